package nft

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"golang.org/x/sys/unix"
)

// This file is the host endpoints' other stages (dataplane.Stage): doNotTrack policy before
// conntrack, preDNAT policy before DNAT, applyOnForward policy on forwarded traffic. A stage's
// objects enter the table with the first group of that stage and stay.
//
// Before DNAT and conntrack, a packet to (from) a node address is dispatched as on the input
// (output) hook, by interface and address (host_<stage>_in_if_addr_v4 …) and by address for
// the "*" endpoint on the interfaces no named endpoint claims (host_<stage>_in_addr_v4 …,
// behind `iifname != @host_named_if`); its group compiles against that node address, as the
// node's own traffic does. Every other packet — and every forwarded one — is dispatched by
// the endpoint's interface alone (the per-family maps host_<stage>_in_v4 … keyed by iifname,
// or oifname for egress; the "*" endpoint's group is the goto of a rule after them, for the
// interfaces no named endpoint claims): its group's local side is the packet's (its
// destination for ingress, its source for egress), which a rule's local-side selectors, named
// ports and nets are matched against by lookups in the shared sets (ordered.go); a group whose
// rules do not read the local side compiles against the unspecified address of its family. An
// endpoint that polices several interfaces has its elements on each. Lookups are hash
// lookups: the cost does not grow with the endpoints.
//
// An allow before conntrack or DNAT sets markAccepted; the later stages of the packet accept
// what carries it before their host endpoint dispatch (an untracked allow skips pre-DNAT and
// the node's own policy, a pre-DNAT allow the node's own and the forward-ingress policy, as
// in Felix). The bit is set before dispatch and cleared by what leaves a stage undecided
// (chainUndecided, and the end of the stage's chain), so that a group's allow is its plain
// accept:
//
//	raw_in    prerouting raw (-300)        clear the bit; lo, workload interfaces, failsafe
//	                                       ports (and replies of outbound ones) accept; set the
//	                                       bit; dispatch; clear the bit
//	raw_out   output raw (-300)            the same for egress, the agent's API server too
//	notrack_in, notrack_out   raw + 10     meta mark & bit == bit notrack
//	prednat   prerouting dstnat - 10       marked accept (clear the bit without raw_in);
//	                                       established accept; lo, workload interfaces, failsafe
//	                                       ports accept; set the bit; dispatch; clear the bit
//	fwd_in    forward filter + 5           marked accept; established accept; from workload
//	                                       interfaces accept; dispatch by iifname
//	fwd_out   forward filter + 6           established accept; to workload interfaces accept;
//	                                       dispatch by oifname
//
// and input_host (output_host) accepts marked packets before the node's own dispatch. Only a
// chain after one that clears the bit accepts on it: a mark another program set never skips
// a policy.

// markAccepted is the packet mark bit that carries an untracked or pre-DNAT allow to the later
// stages.
const markAccepted uint32 = 0x00800000

// The stage objects' names.
const (
	chainRawIn       = "raw_in"
	chainRawOut      = "raw_out"
	chainNotrackIn   = "notrack_in"
	chainNotrackOut  = "notrack_out"
	chainPreDNAT     = "prednat"
	chainFwdIn       = "fwd_in"
	chainFwdOut      = "fwd_out"
	chainUndecided   = "host_undecided"
	setHostNamedIf   = "host_named_if"
	reasonUndecided  = "host endpoint stage: no policy decided, on to the next stage"
	priorityRaw      = -300
	priorityPreDNAT  = -110
	priorityFwdIn    = 5
	priorityFwdOut   = 6
	priorityNotrack  = -290
	namedIfComment   = "interfaces with a named host endpoint: not the * endpoint's"
	undecidedComment = "a host endpoint stage left the packet undecided: the next stage judges it"
)

// stageMap is the dispatch map of a stage's element of a named interface.
func stageMap(st dataplane.Stage, dir model.Direction, is4 bool) string {
	name := "host_" + st.String() + "_in"
	if dir == model.Egress {
		name = "host_" + st.String() + "_out"
	}
	if is4 {
		return name + "_v4"
	}
	return name + "_v6"
}

// stageAddrMap is the dispatch map of a stage's element of a node address: by interface and
// address for a named interface, by address for the "*" endpoint.
func stageAddrMap(st dataplane.Stage, dir model.Direction, named, is4 bool) string {
	name := strings.TrimSuffix(stageMap(st, dir, is4), map[bool]string{true: "_v4", false: "_v6"}[is4])
	if named {
		name += "_if"
	}
	if is4 {
		return name + "_addr_v4"
	}
	return name + "_addr_v6"
}

// stageAddrKeys are the keys of a direction's node address maps: interface . address, address.
func stageAddrKeys(dir model.Direction, is4 bool) (named, all ruleset.Key) {
	k := hostKeys(dir)
	if is4 {
		return k[0], k[2]
	}
	return k[1], k[3]
}

// stageChain is the base chain that dispatches a stage's direction.
func stageChain(st dataplane.Stage, dir model.Direction) string {
	switch {
	case st == dataplane.StageUntracked && dir == model.Egress:
		return chainRawOut
	case st == dataplane.StageUntracked:
		return chainRawIn
	case st == dataplane.StagePreDNAT:
		return chainPreDNAT
	case dir == model.Egress:
		return chainFwdOut
	}
	return chainFwdIn
}

// stageKey is the key of a stage's dispatch maps of a direction.
func stageKey(dir model.Direction) ruleset.Key {
	if dir == model.Egress {
		return ruleset.KeyOifname
	}
	return ruleset.KeyIifname
}

// stageAll is the unspecified address of a family: a stage element's address.
func stageAll(is4 bool) netip.Addr {
	if is4 {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// activateStage puts a stage's objects into the table, once: its maps, its base chains and,
// for the stages before conntrack and DNAT, the mark's chains.
func (b *Builder) activateStage(st dataplane.Stage) {
	if b.layout.stages[st] {
		return
	}
	b.activateHosts()
	b.layout.stages[st] = true
	dirs := []model.Direction{model.Ingress, model.Egress}
	if st == dataplane.StagePreDNAT {
		dirs = dirs[:1]
	}
	for _, dir := range dirs {
		for _, is4 := range []bool{true, false} {
			b.putSet(&ruleset.Set{Name: stageMap(st, dir, is4), Key: stageKey(dir), Map: true,
				Comment: "interface → its host endpoint's " + st.String() + " decision chain", Elements: map[ruleset.ElementKey]ruleset.Value{}})
			if st == dataplane.StageForward {
				continue
			}
			named, all := stageAddrKeys(dir, is4)
			c := "node address → its host endpoint's " + st.String() + " decision chain"
			b.putSet(&ruleset.Set{Name: stageAddrMap(st, dir, true, is4), Key: named, Map: true, Comment: c, Elements: map[ruleset.ElementKey]ruleset.Value{}})
			b.putSet(&ruleset.Set{Name: stageAddrMap(st, dir, false, is4), Key: all, Map: true, Comment: c, Elements: map[ruleset.ElementKey]ruleset.Value{}})
		}
	}
	if _, ok := b.table.Sets[setHostNamedIf]; !ok {
		b.putSet(&ruleset.Set{Name: setHostNamedIf, Key: ruleset.KeyIifname, Comment: namedIfComment, Elements: map[ruleset.ElementKey]ruleset.Value{}})
		b.putNamedIfs()
	}
	if st != dataplane.StageForward && !b.layout.marking {
		b.layout.marking = true
		b.putChain(&ruleset.Chain{Name: chainUndecided, Comment: undecidedComment, Rules: []ruleset.Rule{
			{MarkClear: markAccepted, Verdict: ruleset.Verdict{Kind: ruleset.Accept}}}})
	}
	if st == dataplane.StageUntracked {
		for _, c := range []struct {
			name string
			hook ruleset.Hook
		}{{chainNotrackIn, ruleset.HookPrerouting}, {chainNotrackOut, ruleset.HookOutput}} {
			b.putChain(&ruleset.Chain{Name: c.name, Base: &ruleset.Base{Hook: c.hook, Priority: priorityNotrack},
				Comment: "allowed by a host endpoint's doNotTrack policy: not tracked", Rules: []ruleset.Rule{
					{MarkIs: markAccepted, Notrack: true}}})
		}
	}
	// the chains that accept on the mark do so only where a chain before them clears it
	b.putInput()
	b.putOutput()
	for _, other := range dataplane.Stages {
		if b.layout.stages[other] {
			b.putStageChain(other, model.Ingress)
			if other != dataplane.StagePreDNAT {
				b.putStageChain(other, model.Egress)
			}
		}
	}
	b.opts.log.Info("host endpoints: policing a further stage", "stage", st.String())
}

// nameInterface records the named interfaces of a host endpoint's message m (nil: removed).
func (l *layout) nameInterface(k model.EndpointKey, m *dataplane.EndpointUpdated) {
	var ifnames []string
	if m != nil && m.Host && m.Interface != model.HostInterfaceAll {
		ifnames = m.HostInterfaces()
	}
	if slices.Equal(l.namedIfs[k], ifnames) {
		return
	}
	if len(ifnames) == 0 {
		delete(l.namedIfs, k)
	} else {
		l.namedIfs[k] = ifnames
	}
	l.namedIfsChanged = true
}

// putNamedIfs writes the interfaces of the named host endpoints into host_named_if, once a
// stage is in the table.
func (b *Builder) putNamedIfs() {
	s := b.table.Sets[setHostNamedIf]
	if s == nil {
		return
	}
	b.layout.namedIfsChanged = false
	want := map[ruleset.ElementKey]string{}
	for k, ifnames := range b.layout.namedIfs {
		for _, ifname := range ifnames {
			ek := ruleset.ElementKey{Ifname: ifname}
			if c, ok := want[ek]; !ok || hostComment(k, ifname) < c {
				want[ek] = hostComment(k, ifname)
			}
		}
	}
	for _, el := range s.SortedElements() {
		if _, ok := want[el.ElementKey]; !ok {
			s.Delete(el.ElementKey)
		}
	}
	for ek, c := range want {
		if v, ok := s.Get(ek); !ok || v.Comment != ruleset.Comment(c) {
			s.Put(ruleset.Element{ElementKey: ek, Value: ruleset.Value{Comment: ruleset.Comment(c)}})
		}
	}
}

// putStageChain writes a stage's base chain of a direction.
func (b *Builder) putStageChain(st dataplane.Stage, dir model.Direction) {
	clear := ruleset.Rule{MarkClear: markAccepted, Comment: "the mark bit is this table's"}
	var rules []ruleset.Rule
	var base ruleset.Base
	comment := ""
	switch st {
	case dataplane.StageUntracked:
		base = ruleset.Base{Hook: ruleset.HookPrerouting, Priority: priorityRaw}
		comment = "host endpoints' doNotTrack policy, before conntrack"
		rules = append(rules, clear)
		rules = append(rules, b.unpoliced(dir == model.Egress, "a local pod's traffic: not a host endpoint's")...)
		rules = append(rules, icmpv6())
		in := dir == model.Ingress
		if !in {
			base.Hook = ruleset.HookOutput
			rules = append(rules,
				acceptIn(ruleset.KeyIPDaddrL4ProtoDport, setAgentAPIv4, "the agent's API server: never blocked (IPv4)"),
				acceptIn(ruleset.KeyIP6DaddrL4ProtoDport, setAgentAPIv6, "the agent's API server: never blocked (IPv6)"))
		}
		rules = append(rules, b.failsafes(in, false)...)
		rules = append(rules, b.failsafes(!in, true)...)
	case dataplane.StagePreDNAT:
		base = ruleset.Base{Hook: ruleset.HookPrerouting, Priority: priorityPreDNAT}
		comment = "host endpoints' preDNAT policy, before DNAT"
		if b.layout.stages[dataplane.StageUntracked] {
			rules = append(rules, b.markedAccept(false)...) // raw_in cleared and set the bit
		} else {
			rules = append(rules, clear)
		}
		rules = append(rules, established())
		rules = append(rules, b.unpoliced(false, "a local pod's traffic: not a host endpoint's")...)
		rules = append(rules, icmpv6())
		rules = append(rules, b.failsafes(true, false)...)
	default:
		base = ruleset.Base{Hook: ruleset.HookForward, Priority: priorityFwdIn}
		comment = "forwarded through a host endpoint's interface: its applyOnForward ingress policy"
		if dir == model.Egress {
			base.Priority = priorityFwdOut
			comment = "forwarded through a host endpoint's interface: its applyOnForward egress policy"
		} else {
			rules = append(rules, b.markedAccept(false)...)
		}
		rules = append(rules, established())
		rules = append(rules, b.unpoliced(dir == model.Egress, "a local pod's side: its own policy")...)
	}
	mark := st != dataplane.StageForward
	if mark {
		rules = append(rules, ruleset.Rule{MarkSet: markAccepted, Comment: "allowed unless the dispatch below decides otherwise"})
	}
	notNamed := ruleset.Lookup{Key: stageKey(dir), Set: setHostNamedIf, Invert: true}
	for _, is4 := range []bool{true, false} {
		if !mark {
			break
		}
		named, all := stageAddrKeys(dir, is4)
		rules = append(rules, lookup(named, stageAddrMap(st, dir, true, is4), "a node address through an interface with a host endpoint"),
			ruleset.Rule{Lookups: []ruleset.Lookup{notNamed, {Key: all, Set: stageAddrMap(st, dir, false, is4), Map: true}},
				Comment: "a node address through any other interface: its * host endpoint"})
	}
	for _, is4 := range []bool{true, false} {
		fam := uint8(unix.NFPROTO_IPV6)
		if is4 {
			fam = unix.NFPROTO_IPV4
		}
		rules = append(rules, ruleset.Rule{Nfproto: fam,
			Lookups: []ruleset.Lookup{{Key: stageKey(dir), Set: stageMap(st, dir, is4), Map: true}},
			Comment: "an interface with a host endpoint"})
	}
	for _, is4 := range []bool{true, false} {
		chain := b.layout.stageAll[dispatchKey{dir: dir, addr: stageAll(is4), ifname: model.HostInterfaceAll, stage: st}]
		if chain == "" {
			continue
		}
		fam := uint8(unix.NFPROTO_IPV6)
		if is4 {
			fam = unix.NFPROTO_IPV4
		}
		rules = append(rules, ruleset.Rule{Nfproto: fam, Lookups: []ruleset.Lookup{notNamed},
			Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: chain}, Comment: "any other interface: its * host endpoint"})
	}
	if mark {
		rules = append(rules, ruleset.Rule{MarkClear: markAccepted, Comment: "no host endpoint policy of this stage: undecided"})
	}
	b.putChain(&ruleset.Chain{Name: stageChain(st, dir), Base: &base, Comment: comment, Rules: rules})
}

// setStageDispatch points a stage's element at its group chain: a named interface's element
// in its map, the "*" endpoint's in its base chain.
func (b *Builder) setStageDispatch(dk dispatchKey, chain string, k model.EndpointKey) {
	b.activateStage(dk.stage)
	if !dk.addr.IsUnspecified() {
		b.table.Sets[stageAddrMap(dk.stage, dk.dir, dk.ifname != model.HostInterfaceAll, dk.addr.Is4())].Put(ruleset.Element{
			ElementKey: dk.elementKey(), Value: ruleset.Value{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: chain},
				Comment: ruleset.Comment(hostComment(k, dk.ifname))}})
		return
	}
	if dk.ifname == model.HostInterfaceAll {
		b.layout.stageAll[dk] = chain
		b.putStageChain(dk.stage, dk.dir)
		return
	}
	b.table.Sets[stageMap(dk.stage, dk.dir, dk.addr.Is4())].Put(ruleset.Element{ElementKey: ruleset.ElementKey{Ifname: dk.ifname},
		Value: ruleset.Value{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: chain}, Comment: ruleset.Comment(hostComment(k, dk.ifname))}})
}

// deleteStageDispatch removes a stage's element.
func (b *Builder) deleteStageDispatch(dk dispatchKey) {
	if !dk.addr.IsUnspecified() {
		b.table.Sets[stageAddrMap(dk.stage, dk.dir, dk.ifname != model.HostInterfaceAll, dk.addr.Is4())].Delete(dk.elementKey())
		return
	}
	if dk.ifname == model.HostInterfaceAll {
		delete(b.layout.stageAll, dk)
		b.putStageChain(dk.stage, dk.dir)
		return
	}
	b.table.Sets[stageMap(dk.stage, dk.dir, dk.addr.Is4())].Delete(ruleset.ElementKey{Ifname: dk.ifname})
}

// DecideStage is DecideHost for stage st of host endpoint key (dataplane.StageForward,
// StagePreDNAT, StageUntracked): the decision of the group its element of that stage
// dispatches a packet of direction dir to — by the node address local before DNAT or
// conntrack when local is one of the endpoint's, else by interface, local then being the
// packet's own address (its destination for ingress, its source for egress), which the
// group's local-side matches look up (ordered.go). A stage whose policies decide nothing, or
// that has none in that direction, leaves the packet to the next stage: Outcome.Undecided
// reports it. It reports false when key is no local host endpoint, or the packet would be
// dispatched by interface and the endpoint has none.
func (b *Builder) DecideStage(st dataplane.Stage, dir model.Direction, key model.EndpointKey, local, peer netip.Addr,
	proto model.Protocol, sport, port uint16) (Decided, bool) {
	local, peer = local.Unmap(), peer.Unmap()
	e := b.layout.endpoints[key]
	if e == nil || !e.msg.Host || st == dataplane.StageLocal {
		return Decided{}, false
	}
	dk := dispatchKey{dir: dir, addr: local, ifname: e.msg.Interface, stage: st}
	if st == dataplane.StageForward || !slices.Contains(e.msg.Addrs, local) {
		if e.msg.Interface == "" {
			return Decided{}, false
		}
		dk.addr = stageAll(local.Is4())
	}
	return b.decide(key, e, dk, local, peer, proto, sport, port), true
}

// icmpv6 accepts ICMPv6 (neighbour discovery), which no host endpoint stage polices.
func icmpv6() ruleset.Rule {
	return ruleset.Rule{L4Proto: uint8(model.ProtocolICMPv6), Verdict: ruleset.Verdict{Kind: ruleset.Accept},
		Comment: "ICMPv6 (neighbour discovery) is not policed"}
}

// markedAccept is the rule that accepts what an untracked or pre-DNAT policy allowed, once a
// chain before it clears and sets the mark: on prerouting (in) once such a stage is in the
// table, on output (out) once the untracked stage is.
func (b *Builder) markedAccept(out bool) []ruleset.Rule {
	if !b.layout.marking || out && !b.layout.stages[dataplane.StageUntracked] {
		return nil
	}
	return []ruleset.Rule{{MarkIs: markAccepted, Verdict: ruleset.Verdict{Kind: ruleset.Accept},
		Comment: "allowed by a host endpoint's untracked or pre-DNAT policy"}}
}

// stageGroupName is the name of a stage's group chain.
func stageGroupName(prefix string, lowest dispatchKey) string {
	return prefix + shortHash(fmt.Sprint(lowest.stage, " ", lowest.ifname, " ", lowest.addr))
}
