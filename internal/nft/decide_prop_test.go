package nft

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// TestCompileMatchesModel: for random policies, sets, CIDRs (overlapping, with except), port
// ranges, named ports and tiers, the compiled structure gives every probed packet exactly the
// model's outcome (verdict and reason) — the map shape always, the listed shape (list.go)
// whenever the plan has it (every third iteration draws only allow rules for it).
func TestCompileMatchesModel(t *testing.T) {
	g := newModelGen(rand.New(rand.NewSource(11)), false)
	listed := 0
	for iter := 0; iter < 300; iter++ {
		s, tiers := g.state(fmt.Sprint(iter), iter%3 == 0, iter%2 == 0)
		listed += g.check(t, fmt.Sprint("iter ", iter), s, tiers, 3)
	}
	if listed < 100 {
		t.Fatalf("only %d of 600 plans had the listed shape: the test no longer exercises it", listed)
	}
}

// modelGen draws random model states for the compiler's properties: three address sets and a
// named-port set over a pool of addresses, and up to three tiers of one to three policies whose
// rules mix actions, protocols, CIDRs with excepts, port ranges, negated ports and named ports,
// each rule written as an ingress rule (peer in Src) or an egress one (peer in Dst) and used as
// both. A wide generator (FuzzCompile's) widens every choice: both families (the pool, the
// prefixes, a local address of each), prefixes cut at random lengths around pool addresses,
// ports anywhere in 0-65535, negated protocols, IP versions, ICMP and source-port matches
// (which match nothing), a second named-port set of every port protocol, negated named ports,
// tier defaults that allow, and policies the State does not hold.
type modelGen struct {
	rng      testenv.Chooser
	wide     bool
	pool     []netip.Addr
	prefixes []netip.Prefix
	protos   []model.Protocol
	actions  []model.Action
	local4   netip.Addr
	local6   netip.Addr
	npSets   []dataplane.SetID
}

func newModelGen(rng testenv.Chooser, wide bool) *modelGen {
	g := &modelGen{rng: rng, wide: wide,
		pool: addrList("10.0.0.1", "10.0.0.2", "10.0.1.1", "10.1.0.1", "10.255.0.1", "192.168.1.1", "10.0.0.10"),
		prefixes: prefixList("10.0.0.0/8", "10.0.0.0/16", "10.0.0.0/24", "10.0.0.2/32", "10.1.0.0/16",
			"192.168.0.0/16", "0.0.0.0/0"),
		protos:  []model.Protocol{0, model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP, model.ProtocolICMP},
		actions: []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass, model.ActionLog},
		local4:  netip.MustParseAddr("10.0.0.10"),
		local6:  netip.MustParseAddr("fd00::10"),
		npSets:  []dataplane.SetID{"np"},
	}
	if wide {
		g.pool = append(g.pool, addrList("0.0.0.0", "255.255.255.255", "::ffff:10.0.0.2", "fd00::1", "fd00::2",
			"fd00::1:1", "fd00:1::1", "2001:db8::1", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fd00::10")...)
		g.prefixes = append(g.prefixes, prefixList("fd00::/8", "fd00::/64", "fd00::/120", "fd00::2/128",
			"fd00:1::/48", "2001:db8::/32", "::/0")...)
		g.protos = append(g.protos, model.ProtocolICMPv6, 47)
		g.npSets = append(g.npSets, "np2")
	}
	return g
}

func addrList(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func prefixList(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func (g *modelGen) pick(n int) []netip.Prefix {
	var out []netip.Prefix
	for i := 0; i < n; i++ {
		out = append(out, g.prefix())
	}
	return out
}

func (g *modelGen) prefix() netip.Prefix {
	if g.wide && g.rng.Intn(3) > 0 { // a pool address cut at a random length
		a := g.pool[g.rng.Intn(len(g.pool))].Unmap()
		p, _ := a.Prefix(g.rng.Intn(a.BitLen() + 1))
		return p
	}
	return g.prefixes[g.rng.Intn(len(g.prefixes))]
}

func (g *modelGen) ports() []model.Port {
	var out []model.Port
	for i := g.rng.Intn(3); i > 0; i-- {
		out = append(out, g.portRange())
	}
	return out
}

func (g *modelGen) portRange() model.Port {
	if g.wide {
		switch g.rng.Intn(4) {
		case 1:
			f := g.rng.Intn(65536)
			return model.Port{First: uint16(f), Last: uint16(f + g.rng.Intn(65536-f))}
		case 2:
			return []model.Port{{First: 0, Last: 0}, {First: 65535, Last: 65535}, {First: 0, Last: 65535}, {First: 1, Last: 65534}}[g.rng.Intn(4)]
		}
	}
	f := uint16(g.rng.Intn(6) * 20)
	return model.Port{First: f, Last: f + uint16(g.rng.Intn(30))}
}

// state draws a State and the tiers of one endpoint group. allowOnly draws only Allow and Log
// rules without negated ports (the listed shape's case); indexAll makes every plan index its
// peers by set.
func (g *modelGen) state(name string, allowOnly, indexAll bool) (*State, []dataplane.TierPolicies) {
	rng := g.rng
	s := NewState()
	if indexAll {
		s.refIndexMin = 0
	}
	s.logs = indexAll && !allowOnly // Log rules log: outcomes carry them
	for i := 0; i < 3; i++ {
		var ms []dataplane.Member
		in := g.subset(len(g.pool))
		for j, a := range g.pool {
			if in(j) {
				ms = append(ms, dataplane.Member{Addr: a})
			}
		}
		s.Apply(dataplane.SetReplaced{ID: dataplane.SetID(fmt.Sprint("s", i)), Members: ms})
	}
	for i, id := range g.npSets {
		var np []dataplane.Member
		if g.wide {
			for k := rng.Intn(6); k > 0; k-- {
				np = append(np, g.namedPort(i, g.pool[rng.Intn(len(g.pool))]))
			}
		} else {
			for _, a := range g.pool {
				if rng.Intn(2) == 0 {
					np = append(np, g.namedPort(i, a))
				}
			}
		}
		s.Apply(dataplane.SetReplaced{ID: id, Kind: dataplane.SetNamedPorts, Members: np})
	}
	var tiers []dataplane.TierPolicies
	for ti, tn := range []string{"admin", "default", "baseline"} {
		if rng.Intn(3) == 0 {
			continue
		}
		tp := dataplane.TierPolicies{Tier: tn, DefaultAction: []model.Action{model.ActionPass, model.ActionDeny, model.ActionPass}[ti]}
		if g.wide {
			tp.DefaultAction = []model.Action{model.ActionPass, model.ActionDeny, model.ActionAllow}[rng.Intn(3)]
		}
		for pi := rng.Intn(3) + 1; pi > 0; pi-- {
			var rules []dataplane.Rule
			for ri := rng.Intn(4); ri > 0; ri-- {
				rules = append(rules, g.rule(allowOnly))
			}
			k := model.PolicyKey{Kind: "P", Name: fmt.Sprint(name, tn, pi)}
			s.Apply(dataplane.PolicyUpdated{Key: k, Tier: tn, Ingress: rules, Egress: rules})
			tp.Policies = append(tp.Policies, k)
		}
		if g.wide && rng.Intn(8) == 0 {
			tp.Policies = append(tp.Policies, model.PolicyKey{Kind: "P", Name: "not held"})
		}
		tiers = append(tiers, tp)
	}
	return s, tiers
}

// subset draws which of n elements to take: a choice each, or (wide) one choice for all, which
// leaves the fuzzer's input fewer bytes to cross before the rules.
func (g *modelGen) subset(n int) func(j int) bool {
	if g.wide {
		mask := g.rng.Intn(1 << n)
		return func(j int) bool { return mask&(1<<j) == 0 }
	}
	return func(int) bool { return g.rng.Intn(2) == 0 }
}

// namedPort is a member of named-port set i for address a: TCP in the first set, any port
// protocol in the second.
func (g *modelGen) namedPort(i int, a netip.Addr) dataplane.Member {
	proto := model.ProtocolTCP
	if i > 0 {
		proto = portProtocols[g.rng.Intn(len(portProtocols))]
	}
	return dataplane.Member{Addr: a, Protocol: proto, Port: uint16(g.rng.Intn(120))}
}

// npSet draws a named-port set (with one set, drawing nothing).
func (g *modelGen) npSet() dataplane.SetID {
	if len(g.npSets) == 1 {
		return g.npSets[0]
	}
	return g.npSets[g.rng.Intn(len(g.npSets))]
}

func (g *modelGen) rule(allowOnly bool) dataplane.Rule {
	rng := g.rng
	m := dataplane.Match{Nets: g.pick(rng.Intn(2)), NotNets: g.pick(rng.Intn(2))}
	if rng.Intn(2) == 0 {
		m.Sets = []dataplane.SetID{dataplane.SetID(fmt.Sprint("s", rng.Intn(3)))}
	}
	if rng.Intn(4) == 0 {
		m.NotSets = []dataplane.SetID{dataplane.SetID(fmt.Sprint("s", rng.Intn(3)))}
	}
	dst := dataplane.Match{Ports: g.ports(), NotPorts: g.ports()}
	if allowOnly {
		dst.NotPorts = nil
	}
	if rng.Intn(3) == 0 {
		dst.NamedPortSets = []dataplane.SetID{g.npSet()}
	}
	r := dataplane.Rule{Action: g.actions[rng.Intn(len(g.actions))], Protocol: g.protos[rng.Intn(len(g.protos))]}
	if allowOnly {
		r.Action = []model.Action{model.ActionAllow, model.ActionLog}[rng.Intn(2)]
	}
	if (!allowOnly || g.wide) && rng.Intn(5) == 0 {
		g.icmpRule(&r, &dst)
	}
	if rng.Intn(2) == 0 {
		r.Src, r.Dst = m, dst
	} else { // as an egress rule, the peer is the destination
		dst.Sets, dst.NotSets, dst.Nets, dst.NotNets = m.Sets, m.NotSets, m.Nets, m.NotNets
		r.Dst = dst
	}
	if (!allowOnly || g.wide) && rng.Intn(4) == 0 { // source ports: ranges, excluded, named
		switch rng.Intn(4) {
		case 0:
			r.Src.NotPorts = g.ports()
		case 1:
			r.Src.NamedPortSets = []dataplane.SetID{g.npSet()}
		case 2:
			r.Src.NotNamedPortSets = []dataplane.SetID{g.npSet()}
		}
		if len(r.Src.Ports) == 0 || rng.Intn(2) == 0 {
			r.Src.Ports = g.ports()
		}
	}
	if !g.wide {
		return r
	}
	r.IPVersion = []uint8{0, 0, 4, 6}[rng.Intn(4)]
	if !allowOnly && rng.Intn(4) == 0 {
		r.NotProtocol = g.protos[rng.Intn(len(g.protos))]
	}
	if !allowOnly && rng.Intn(5) == 0 {
		r.Dst.NotNamedPortSets = []dataplane.SetID{g.npSet()}
	}
	return r
}

// icmpTypes are the ICMP and ICMPv6 types rules match (probes cover each and its neighbours).
var icmpTypes = []uint8{0, 3, 8, 128, 129}

// icmpRule makes r an ICMP type/code rule: an ICMP match, an excluded one or both, mostly with
// the ICMP protocol of one family (also none, or another protocol: then it matches nothing),
// mostly without destination ports (with them it matches nothing).
func (g *modelGen) icmpRule(r *dataplane.Rule, dst *dataplane.Match) {
	rng := g.rng
	draw := func() *model.ICMPMatch {
		m := &model.ICMPMatch{Type: icmpTypes[rng.Intn(len(icmpTypes))]}
		if rng.Intn(2) == 0 {
			c := []uint8{0, 1, 255}[rng.Intn(3)]
			m.Code = &c
		}
		return m
	}
	switch rng.Intn(4) {
	case 0:
		r.NotICMP = draw()
	case 1:
		r.ICMP, r.NotICMP = draw(), draw()
	default:
		r.ICMP = draw()
	}
	r.Protocol = []model.Protocol{model.ProtocolICMP, model.ProtocolICMP, model.ProtocolICMPv6, 0, model.ProtocolTCP}[rng.Intn(5)]
	if rng.Intn(6) > 0 {
		dst.Ports, dst.NotPorts, dst.NamedPortSets = nil, nil, nil
	}
}

// icmpProbeKeys are the ICMP keys probes send: each rule type's codes 0, 1, 2 and 255, and the
// keys next to its range.
func icmpProbeKeys() []uint16 {
	var out []uint16
	for _, t := range icmpTypes {
		for _, c := range []uint8{0, 1, 2, 255} {
			out = append(out, ICMPKey(t, c))
		}
		out = append(out, ICMPKey(t, 0)-1, ICMPKey(t, 255)+1)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// check compiles the tiers for both directions (a wide generator: and both families), in the
// map shape and, when the plan has it, the listed one, and probes both against the model. It
// then changes set memberships in rounds; after each, the map shape recompiled peer by peer
// must equal a fresh compile and the model. It returns how many plans had the listed shape.
func (g *modelGen) check(t *testing.T, where string, s *State, tiers []dataplane.TierPolicies, rounds int) (listed int) {
	t.Helper()
	locals := []netip.Addr{g.local4}
	if g.wide {
		locals = append(locals, g.local6)
	}
	dirs := []model.Direction{model.Ingress, model.Egress}
	cps := map[[2]any]*compiled{}
	for _, local := range locals {
		pr := g.probes(s, tiers, local.Is4())
		for _, dir := range dirs {
			cp := s.compile(dir, tiers, local, local.Is4())
			if cp.plan.over {
				t.Fatalf("%s %s %s: a compile of %d tiers ran out of budget", where, dir, local, len(tiers))
			}
			cps[[2]any{local, dir}] = cp
			rl, ok := s.compileList(dir, tiers, local, local.Is4())
			if ok {
				listed++
			}
			checkDecision(t, where, s, dir, tiers, local, cp, rl, pr)
			if ol, ok := s.compileOrdered(dir, tiers, local.Is4()); ok {
				checkOrdered(t, where, s, dir, tiers, local, ol, pr)
			}
		}
	}
	// members join and leave the sets; recompiling only the changed peers must keep the
	// structure equal to the model (and to a fresh compile)
	for round := 0; round < rounds; round++ {
		changed := map[netip.Addr]struct{}{}
		var events []struct {
			id dataplane.SetID
			a  netip.Addr
		}
		for i := 0; i < 3; i++ {
			id, a := g.toggleMember(s)
			if !a.IsValid() {
				continue // a local-side change regroups the endpoint: a new compile, not this path
			}
			events = append(events, struct {
				id dataplane.SetID
				a  netip.Addr
			}{id, a})
			changed[a] = struct{}{}
		}
		where := fmt.Sprint(where, " round ", round)
		for _, local := range locals {
			pr := g.probes(s, tiers, local.Is4())
			if g.wide { // the other peers keep the classes probed before: the fresh compile's equality covers them
				pr.addrs = slices.DeleteFunc(pr.addrs, func(a netip.Addr) bool { _, ok := changed[a.Unmap()]; return !ok })
			}
			for _, dir := range dirs {
				cp := cps[[2]any{local, dir}]
				for _, e := range events {
					if e.a.Is4() == local.Is4() { // a group hears of its family's peers only
						cp.peerChanged(e.id, e.a)
					}
				}
				for a := range changed {
					if a.Is4() == local.Is4() {
						cp.recompilePeer(a)
					}
				}
				rl, _ := s.compileList(dir, tiers, local, local.Is4())
				checkDecision(t, where, s, dir, tiers, local, cp, rl, pr)
				fresh := s.compile(dir, tiers, local, local.Is4())
				if len(fresh.Peers) != len(cp.Peers) {
					t.Fatalf("%s %s: %d known peers after incremental updates, a fresh compile has %d", where, dir, len(cp.Peers), len(fresh.Peers))
				}
				for a, k := range fresh.Peers {
					if cp.Peers[a] != k {
						t.Fatalf("%s %s: peer %s has class %q incrementally, %q freshly", where, dir, a, cp.Peers[a], k)
					}
				}
			}
		}
	}
	return listed
}

// toggleMember adds a pool address to a set or removes it (of a named-port set, one of its
// members), as a SetMembersChanged, and returns the set and the address (unmapped); an invalid
// address when it drew a local address and changed nothing.
func (g *modelGen) toggleMember(s *State) (dataplane.SetID, netip.Addr) {
	rng := g.rng
	if !g.wide {
		id := dataplane.SetID(fmt.Sprint("s", rng.Intn(3)))
		a := g.pool[rng.Intn(len(g.pool))]
		if a == g.local4 {
			return id, netip.Addr{}
		}
		m := dataplane.SetMembersChanged{ID: id}
		if s.member(id, a) {
			m.Removed = []dataplane.Member{{Addr: a}}
		} else {
			m.Added = []dataplane.Member{{Addr: a}}
		}
		s.Apply(m)
		return id, a
	}
	n := rng.Intn(3 + len(g.npSets))
	a := g.pool[rng.Intn(len(g.pool))].Unmap()
	if a == g.local4 || a == g.local6 {
		return "", netip.Addr{}
	}
	if n < 3 {
		id := dataplane.SetID(fmt.Sprint("s", n))
		m := dataplane.SetMembersChanged{ID: id}
		if s.member(id, a) {
			m.Removed = []dataplane.Member{{Addr: a}}
		} else {
			m.Added = []dataplane.Member{{Addr: a}}
		}
		s.Apply(m)
		return id, a
	}
	id := g.npSets[n-3]
	m := dataplane.SetMembersChanged{ID: id}
	if ms := s.Sets[id].ports[a]; len(ms) > 0 {
		m.Removed = ms[:1:1]
	} else {
		m.Added = []dataplane.Member{g.namedPort(n-3, a)}
	}
	s.Apply(m)
	return id, a
}

// probes are the packets a check sends: every address with every protocol and, for the
// protocols with ports, every port (a wide probe set sends the others at port 0 only).
type probes struct {
	addrs    []netip.Addr
	protos   []model.Protocol
	ports    []uint16
	sports   []uint16 // source ports of the port protocols
	portless bool
	icmp     []uint16 // the keys (ICMPKey) of ICMP and ICMPv6 packets
}

func (p probes) each(f func(netip.Addr, model.Protocol, uint16, uint16)) {
	sports := p.sports
	if len(sports) == 0 {
		sports = []uint16{0}
	}
	for _, a := range p.addrs {
		for _, proto := range p.protos {
			if hasPorts(proto) {
				for _, sp := range sports {
					for _, port := range p.ports {
						f(a, proto, sp, port)
					}
				}
				continue
			}
			ports, icmp := p.ports, proto == model.ProtocolICMP || proto == model.ProtocolICMPv6
			if icmp {
				ports = p.icmp
			}
			for i, port := range ports {
				if i > 0 && p.portless && !icmp {
					break
				}
				f(a, proto, 0, port)
			}
		}
	}
}

// probes lists the packets that tell the compiled structures apart from the model: the pool
// addresses and a few outside it, several protocols and ports. A wide generator's probes are
// made from the state: every pool address of the family, as given (IPv4-mapped ones too), the
// first and last address of every prefix of the rules and their neighbours, and every port at
// or next to a bound of a rule's port range or a named port.
func (g *modelGen) probes(s *State, tiers []dataplane.TierPolicies, is4 bool) probes {
	if !g.wide {
		pr := probes{addrs: slices.Concat(g.pool, addrList("10.0.0.3", "10.0.255.255", "11.0.0.0", "9.9.9.9", "192.168.255.255", "0.0.0.0", "255.255.255.255")),
			protos: []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolICMP, 47},
			ports:  []uint16{0, 1, 19, 20, 21, 49, 50, 60, 99, 100, 119, 129, 65535}, icmp: icmpProbeKeys()}
		pr.sports = g.sourcePorts(s, tiers, pr.ports)
		return pr
	}
	pr := probes{protos: []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP, model.ProtocolICMP, model.ProtocolICMPv6, 47},
		portless: true, icmp: icmpProbeKeys()}
	addr := func(a netip.Addr) {
		if a.IsValid() && a.Unmap().Is4() == is4 {
			pr.addrs = append(pr.addrs, a)
		}
	}
	for _, a := range slices.Concat(g.pool, addrList("10.0.0.3", "11.0.0.0", "fd00::3", "fe80::1")) {
		addr(a)
	}
	ports := []int{0, 65535}
	portRange := func(ps []model.Port) {
		for _, p := range ps {
			ports = append(ports, int(p.First)-1, int(p.First), int(p.Last), int(p.Last)+1)
		}
	}
	for _, t := range tiers {
		for _, dir := range []model.Direction{model.Ingress, model.Egress} {
			for r := range s.tierRules(dir, t) {
				for _, m := range []*dataplane.Match{&r.Src, &r.Dst} {
					for _, p := range slices.Concat(m.Nets, m.NotNets) {
						first, last := p.Masked().Addr(), lastAddr(p)
						addr(first)
						addr(last)
						addr(first.Prev())
						addr(last.Next())
					}
				}
				portRange(r.Dst.Ports)
				portRange(r.Dst.NotPorts)
			}
		}
	}
	for _, id := range g.npSets {
		for _, ms := range s.Sets[id].ports {
			for _, m := range ms {
				ports = append(ports, int(m.Port)-1, int(m.Port), int(m.Port)+1)
			}
		}
	}
	slices.SortFunc(pr.addrs, netip.Addr.Compare)
	pr.addrs = slices.Compact(pr.addrs)
	slices.Sort(ports)
	for _, p := range slices.Compact(ports) {
		if p >= 0 && p <= 65535 {
			pr.ports = append(pr.ports, uint16(p))
		}
	}
	var bounds []uint16
	for _, t := range tiers {
		for _, dir := range []model.Direction{model.Ingress, model.Egress} {
			for r := range s.tierRules(dir, t) {
				for _, p := range slices.Concat(r.Src.Ports, r.Src.NotPorts) {
					bounds = append(bounds, p.First-1, p.First, p.Last, p.Last+1)
				}
			}
		}
	}
	pr.sports = g.sourcePorts(s, tiers, bounds)
	return pr
}

// sourcePorts are the source ports probes send when a rule of the tiers has source ports: 0,
// 65535, the given ones and each named port and its neighbours; else 0 alone.
func (g *modelGen) sourcePorts(s *State, tiers []dataplane.TierPolicies, given []uint16) []uint16 {
	any := false
	for _, t := range tiers {
		for _, dir := range []model.Direction{model.Ingress, model.Egress} {
			for r := range s.tierRules(dir, t) {
				any = any || hasSrcPorts(r.Rule)
			}
		}
	}
	if !any {
		return []uint16{0}
	}
	out := append([]uint16{0, 65535}, given...)
	for _, id := range g.npSets {
		for _, ms := range s.Sets[id].ports {
			for _, m := range ms {
				out = append(out, m.Port-1, m.Port, m.Port+1)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkOrdered probes an ordered group's rules (ordered.go), whose local side is the packet's,
// with local as the packet's local address, against the model.
func checkOrdered(t *testing.T, where string, s *State, dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, ol *ruleList, pr probes) {
	t.Helper()
	pr.each(func(pa netip.Addr, proto model.Protocol, sport, port uint16) {
		want := s.Evaluate(dir, tiers, local, pa, proto, sport, port)
		if got := ol.lookup(s, dir, local, pa, proto, port); got != want {
			t.Fatalf("%s %s local %s peer %s %s %d→%d: ordered %v, model %v", where, dir, local, pa, proto, sport, port, got, want)
		}
	})
}

// checkDecision probes a compiled structure (its lookup, and what the kernel does with its
// fast path) and, when rl is not nil, a listed group's rules, against the model.
func checkDecision(t *testing.T, where string, s *State, dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, cp *compiled, rl *ruleList, pr probes) {
	t.Helper()
	pr.each(func(pa netip.Addr, proto model.Protocol, sport, port uint16) {
		want := s.Evaluate(dir, tiers, local, pa, proto, sport, port)
		if got := cp.Lookup(pa, proto, sport, port); got != want {
			t.Fatalf("%s %s peer %s %s %d→%d: compiled %v, model %v", where, dir, pa, proto, sport, port, got, want)
		}
		if got := cp.kernelLookup(pa, proto, sport, port); got != want {
			t.Fatalf("%s %s peer %s %s %d→%d: with the fast path %v, model %v", where, dir, pa, proto, sport, port, got, want)
		}
		if rl == nil {
			return
		}
		if got := rl.lookup(s, dir, local, pa, proto, port); got != want {
			t.Fatalf("%s %s peer %s %s %d→%d: listed %v, model %v", where, dir, pa, proto, sport, port, got, want)
		}
	})
}
