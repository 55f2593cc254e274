package nft

import (
	"crypto/sha256"
	"encoding/binary"
	"iter"
	"net/netip"
	"slices"
	"sort"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// plan is the rule list of one group, direction and family, flattened in evaluation order with
// what compiling a peer needs worked out once:
//
//   - rules that can match no packet here (another family, ICMP type/code, source ports, a local
//     side that the group's endpoints do not satisfy) are left out; ingress named ports are
//     resolved on the local endpoint, so every rule's ports are ranges;
//   - the rules whose peer side requires a set are indexed by the first such set (gated), the
//     others (ungated) are candidates of every peer, kept per interval (ungatedIn);
//   - the address space of the family is cut by every prefix of the rules' peer sides into
//     elementary intervals (a sweep over the prefixes' boundaries); the rules whose ipBlock
//     predicate holds are the same throughout an interval, and intervals where the same rules
//     hold share an identity (netID: a SHA-256 of the list, so no list is kept);
//   - a peer's decision depends only on its signature — its interval's netID, the referenced
//     sets that hold it and, for egress named ports, its named ports — so classes are memoised
//     by signature (memo), and computed once per distinct list of matching rules (byRules);
//     both are keyed by SHA-256 digests, whose size does not grow with the lists.
//
// Cost, for R rules, P prefixes, I ≤ 2P+1 elementary intervals and A known peer addresses:
// the sweep is O(P log P + Σ h) for h the rules holding in each interval where one changed; a
// known peer costs the sets holding it and a binary search of its interval; a new signature
// costs a pass over the rules that can match (O(R)), and a new list of c matching rules a
// class computed in O(c · log g) for g undecided port ranges (paint). So a compile is
// O(R·(A + I) + P log P) at worst, never a product of rules, peers and ports — and it is
// bounded: every step spends from a budget (spend), and a compile that exhausts it stops
// (over) and is answered by the Builder (see compileGroup).
type plan struct {
	s     *State
	dir   model.Direction
	is4   bool
	local netip.Addr
	rules []planRule
	tierOutcomes
	ruleIndex
	peerRefs
	intervals
	classMemo
	spending
	srcAt   srcAt
	scratch scratch
}

// tierOutcomes are the outcomes a plan's tiers give where no rule decides.
type tierOutcomes struct {
	ntier int
	// defaults[i] is tier i's default outcome (Verdict 0 for Pass), built once: its reason names
	// the tier's policies, which costs as much as the tier is long.
	defaults []Outcome
	final    Outcome // after the last tier
}

// ruleIndex sorts a plan's rules by what their peer side requires, so that a peer's candidate
// rules are found without visiting the others.
type ruleIndex struct {
	// ungatedAll are the rules whose peer side requires no set and excludes none; ungatedBy
	// lists, per netID, those whose ipBlock predicate holds there (ungatedIn). ungatedNot are
	// the other rules that require no set: they exclude some.
	ungatedAll, ungatedNot []int32
	ungatedBy              map[int32][]int32
	gated                  map[dataplane.SetID][]int32
	protos                 []model.Protocol // non-port protocols that rules name, but no painted one
	// painted are the protocols whose packets a class partitions by a 16-bit key: the port
	// protocols by destination port, and the family's ICMP protocol by type<<8 | code when a
	// rule matches ICMP type or code.
	painted []model.Protocol
}

// peerRefs are the sets that make an address a known peer of a plan.
type peerRefs struct {
	// refs are the sets the rules' peer sides reference (Sets, NotSets, egress named-port sets),
	// sorted: an address in one of them is a known peer (an element of the peers map).
	refs []dataplane.SetID
	// index maps a peer address to the refs holding it, built only for plans with more than
	// State.refIndexMin refs; smaller plans ask their few sets directly, which keeps no per-peer
	// state for the thousands of groups of a large cluster.
	index  map[netip.Addr][]dataplane.SetID
	npRefs bool // egress named-port sets: a peer's named ports are in its signature
}

// intervals is the plan's cut of the address space by its rules' prefixes.
type intervals struct {
	// starts are the first addresses of the elementary intervals, sorted (starts[0] is the
	// family's zero address); netID[i] identifies the rules whose ipBlock predicate holds in
	// interval i, and covered[i] tells whether a prefix contains it.
	starts  []netip.Addr
	netID   []int32
	covered []bool
}

// classMemo remembers the class keys a plan computed: memo by signature, byRules by matching
// rule list.
type classMemo struct {
	memo    map[digest]string
	byRules map[digest]string
}

// srcAt is the source port a paint is for (on), and the source ports each rule with source
// ports matches (srcRanges): a paint that is not for one source port has no such rule.
type srcAt struct {
	on     bool
	port   uint16
	ranges map[int32][]portGap
}

// holds reports whether rule i's source ports hold the port of the paint.
func (s *srcAt) holds(i int32) bool {
	if !s.on {
		return false
	}
	for _, g := range s.ranges[i] {
		if g.first <= s.port && s.port <= g.last {
			return true
		}
	}
	return false
}

// spending is what a plan may still spend (work units, about a rule visited or a port range
// painted each); over is set when it ran out.
type spending struct {
	budget int64
	over   bool
}

// newClassCost is what a new class spends per port segment it keeps (held in memory, and one
// element of its chain's map in the kernel): the budget bounds the table a compile makes.
const newClassCost = 10

// digest is a SHA-256 of a list the plan identifies without keeping it.
type digest [sha256.Size]byte

// spend takes n work units from the plan's budget and reports whether it is exhausted.
func (pl *plan) spend(n int) bool {
	pl.budget -= int64(n)
	if pl.budget < 0 {
		pl.over = true
	}
	return pl.over
}

// planRule is one rule of a plan.
type planRule struct {
	tier    int32
	action  model.Action
	outcome Outcome // for Allow and Deny rules
	peer    *dataplane.Match
	gated   bool // its peer side requires a set
	netRule bool // its peer side has prefixes of the family: the sweep decides where it holds
	nets    int  // prefixes of the family in peer.Nets (0: any address)
	proto   model.Protocol
	notProt model.Protocol
	portMatch
	// src is what the rule requires of the source port (its portRules: it has source ports).
	src portMatch
	// icmp and notICMP: the type (and code) the rule requires, and excludes, of a packet of the
	// family's ICMP protocol (proto then is that protocol).
	icmp, notICMP *model.ICMPMatch
}

// portMatch is what a plan rule requires of the destination (or source) port.
type portMatch struct {
	// portRules: the rule constrains the ports (Ports or NamedPortSets, or their negations);
	// then it matches port protocols only.
	portRules bool
	hasPos    bool
	pos, neg  []portRange // static port ranges (numeric, and named ports resolved on the local side)
	// posNP and negNP are named-port sets resolved on the peer (egress destination ports,
	// ingress source ports).
	posNP, negNP []dataplane.SetID
}

// scratch holds buffers reused across class computations.
type scratch struct {
	cand   []int32
	gaps   []portGap
	passed []portGap
	ranges []portGap
	neg    []portGap
	segs   []PortSeg
	key    []byte
}

// portGap is an inclusive range of ports; logs, in a paint, are the Log rules its packets met.
type portGap struct {
	first, last uint16
	logs        string
}

// newPlan prepares the rules of tiers; budget bounds the work of the plan's compile.
func (s *State) newPlan(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool, budget int64) *plan {
	pl := &plan{s: s, dir: dir, is4: is4, local: local, tierOutcomes: tierOutcomes{ntier: len(tiers)},
		ruleIndex: ruleIndex{gated: map[dataplane.SetID][]int32{}, ungatedBy: map[int32][]int32{}},
		classMemo: classMemo{memo: map[digest]string{}, byRules: map[digest]string{}}, spending: spending{budget: budget}}
	pl.final = Outcome{Verdict: Allow, Reason: "no policy applies"}
	if len(tiers) > 0 {
		pl.final = Outcome{Verdict: Allow, Reason: "no tier decided: allow"}
	}
	seenProto := map[model.Protocol]bool{}
	refs := map[dataplane.SetID]struct{}{}
	for ti, t := range tiers {
		pl.defaults = append(pl.defaults, tierDefault(t))
		for r := range s.tierRules(dir, t) {
			if pl.spend(1) {
				return pl
			}
			// every set a peer side references makes its members known peers, whether or not
			// the rule can match here
			peer := &r.Src
			if dir == model.Egress {
				peer = &r.Dst
			}
			addRefs(refs, peer.NamedPortSets, peer.NotNamedPortSets)
			addRefs(refs, peer.Sets, peer.NotSets)
			pr, ok := pl.prepare(r)
			if !ok {
				continue
			}
			pr.tier = int32(ti)
			pos := int32(len(pl.rules))
			pl.rules = append(pl.rules, pr)
			switch {
			case len(pr.peer.Sets) > 0:
				pl.gated[pr.peer.Sets[0]] = append(pl.gated[pr.peer.Sets[0]], pos)
			case len(pr.peer.NotSets) > 0:
				pl.ungatedNot = append(pl.ungatedNot, pos)
			default:
				pl.ungatedAll = append(pl.ungatedAll, pos)
			}
			pl.npRefs = pl.npRefs || len(pr.posNP)+len(pr.negNP)+len(pr.src.posNP)+len(pr.src.negNP) > 0
			for _, p := range []model.Protocol{pr.proto, pr.notProt} {
				if p != model.ProtocolAny && !hasPorts(p) && !seenProto[p] {
					seenProto[p] = true
					pl.protos = append(pl.protos, p)
				}
			}
		}
	}
	pl.painted = portProtocols
	if slices.ContainsFunc(pl.rules, func(r planRule) bool { return r.icmp != nil || r.notICMP != nil }) {
		ip := icmpProtocol(is4)
		pl.painted = append(slices.Clip(portProtocols), ip)
		pl.protos = slices.DeleteFunc(pl.protos, func(p model.Protocol) bool { return p == ip })
	}
	slices.Sort(pl.protos)
	for id := range refs {
		pl.refs = append(pl.refs, id)
	}
	slices.Sort(pl.refs)
	if len(pl.refs) > s.refIndexMin {
		pl.index = map[netip.Addr][]dataplane.SetID{}
		for _, id := range pl.refs {
			if set := s.Sets[id]; set != nil {
				for a := range set.addresses(is4) {
					pl.index[a] = append(pl.index[a], id)
				}
				if pl.spend(set.len(is4)) {
					return pl
				}
			}
		}
	}
	pl.sweep()
	return pl
}

func addRefs(refs map[dataplane.SetID]struct{}, lists ...[]dataplane.SetID) {
	for _, ids := range lists {
		for _, id := range ids {
			refs[id] = struct{}{}
		}
	}
}

// prepare works out what a rule needs for this plan; ok is false when it matches no packet here.
func (pl *plan) prepare(r policyRule) (planRule, bool) {
	if neverMatches(r.Rule, pl.is4) {
		return planRule{}, false
	}
	peer, localSide := &r.Src, &r.Dst
	if pl.dir == model.Egress {
		peer, localSide = &r.Dst, &r.Src
	}
	if !pl.s.addrMatch(localSide, pl.local) {
		return planRule{}, false
	}
	pr := planRule{action: r.Action, peer: peer, gated: len(peer.Sets) > 0, proto: r.Protocol, notProt: r.NotProtocol,
		icmp: r.ICMP, notICMP: r.NotICMP}
	if pr.icmp != nil || pr.notICMP != nil {
		pr.proto = icmpProtocol(pl.is4) // neverMatches left out every other protocol
	}
	switch r.Action {
	case model.ActionAllow:
		pr.outcome = Outcome{Verdict: Allow, Reason: r.reason() + " (allow)"}
	case model.ActionDeny:
		pr.outcome = Outcome{Verdict: Deny, Reason: r.reason() + " (deny)"}
	case model.ActionLog:
		if !pl.s.logs {
			return planRule{}, false // it logs nowhere and changes no verdict
		}
		pr.outcome = Outcome{Logs: r.reason() + " (log)\n"}
	}
	for _, n := range peer.Nets {
		if n.Addr().Is4() == pl.is4 {
			pr.nets++
		}
	}
	if len(peer.Nets) > 0 && pr.nets == 0 {
		return planRule{}, false // only prefixes of the other family: no address of this one
	}
	pr.netRule = pr.nets > 0 || slices.ContainsFunc(peer.NotNets, func(n netip.Prefix) bool { return n.Addr().Is4() == pl.is4 })
	pr.portMatch = pl.portMatchOf(&r.Dst, pl.dir == model.Egress)
	pr.src = pl.portMatchOf(&r.Src, pl.dir == model.Ingress)
	return pr, true
}

// portMatchOf is what one side of a rule requires of its port; onPeer says that the side is the
// peer's, whose named ports resolve per peer (else on the local endpoint, here).
func (pl *plan) portMatchOf(m *dataplane.Match, onPeer bool) portMatch {
	var pm portMatch
	pm.hasPos = len(m.Ports) > 0 || len(m.NamedPortSets) > 0
	pm.portRules = pm.hasPos || len(m.NotPorts) > 0 || len(m.NotNamedPortSets) > 0
	numeric := func(ps []model.Port) (out []portRange) {
		for _, p := range ps {
			if p.Name == "" {
				out = append(out, portRange{model.ProtocolAny, p.First, p.Last})
			}
		}
		return out
	}
	pm.pos, pm.neg = numeric(m.Ports), numeric(m.NotPorts)
	if onPeer {
		pm.posNP, pm.negNP = m.NamedPortSets, m.NotNamedPortSets
	} else {
		pm.pos = append(pm.pos, pl.localNamedPorts(m.NamedPortSets)...)
		pm.neg = append(pm.neg, pl.localNamedPorts(m.NotNamedPortSets)...)
	}
	return pm
}

// localNamedPorts resolves named-port sets on the local endpoint.
func (pl *plan) localNamedPorts(ids []dataplane.SetID) []portRange {
	var out []portRange
	for _, id := range ids {
		if set := pl.s.Sets[id]; set != nil {
			for _, m := range set.ports[pl.local] {
				out = append(out, portRange{m.Protocol, m.Port, m.Port})
			}
		}
	}
	return out
}

// sweep cuts the family's address space by the boundaries of every prefix of the rules' peer
// sides and records, per elementary interval, the rules whose ipBlock predicate holds there.
func (pl *plan) sweep() {
	type event struct {
		at   netip.Addr
		rule int32
		not  bool
		d    int32
	}
	var events []event
	for i := range pl.rules {
		r := &pl.rules[i]
		if !r.netRule {
			continue
		}
		for k, ns := range [][]netip.Prefix{r.peer.Nets, r.peer.NotNets} {
			for _, n := range ns {
				if n.Addr().Is4() != pl.is4 {
					continue
				}
				n = n.Masked()
				events = append(events, event{n.Addr(), int32(i), k == 1, 1})
				if last := lastAddr(n); last != maxAddr(pl.is4) {
					events = append(events, event{last.Next(), int32(i), k == 1, -1})
				}
			}
		}
	}
	sort.Slice(events, func(i, j int) bool { return events[i].at.Less(events[j].at) })
	netCount := make([]int32, len(pl.rules))
	notCount := make([]int32, len(pl.rules))
	holds := func(i int32) bool {
		return (pl.rules[i].nets == 0 || netCount[i] > 0) && notCount[i] == 0
	}
	// held: the rules holding in the current interval, sorted; rules without prefixes of the
	// family other than excepts hold where no except covers them
	var held []int32
	for i := range pl.rules {
		if pl.rules[i].netRule && holds(int32(i)) {
			held = append(held, int32(i))
		}
	}
	ids := map[digest]int32{}
	intern := func() int32 {
		pl.spend(len(held))
		h := sha256.New()
		h.Write(appendInt32s(pl.scratch.key[:0], held))
		var k digest
		h.Sum(k[:0])
		id, ok := ids[k]
		if !ok {
			id = int32(len(ids))
			ids[k] = id
		}
		return id
	}
	cover := 0
	at := zeroAddr(pl.is4)
	e := 0
	cur := int32(-1)
	for {
		changed := cur < 0
		for ; e < len(events) && events[e].at == at; e++ {
			ev := events[e]
			before := holds(ev.rule)
			if ev.not {
				notCount[ev.rule] += ev.d
			} else {
				netCount[ev.rule] += ev.d
			}
			cover += int(ev.d)
			if now := holds(ev.rule); now != before {
				changed = true
				j, _ := slices.BinarySearch(held, ev.rule)
				if now {
					held = slices.Insert(held, j, ev.rule)
				} else {
					held = slices.Delete(held, j, j+1)
				}
			}
		}
		if changed {
			cur = intern()
		}
		if pl.over {
			return
		}
		pl.starts = append(pl.starts, at)
		pl.covered = append(pl.covered, cover > 0)
		pl.netID = append(pl.netID, cur)
		if e == len(events) {
			break
		}
		at = events[e].at
	}
}

// interval returns the elementary interval holding address a.
func (pl *plan) interval(a netip.Addr) int {
	i, found := slices.BinarySearchFunc(pl.starts, a, netip.Addr.Compare)
	if !found {
		i--
	}
	return i
}

// refsOf lists the referenced sets holding a peer address (sorted).
func (pl *plan) refsOf(a netip.Addr, buf []dataplane.SetID) []dataplane.SetID {
	if pl.index != nil {
		return pl.index[a]
	}
	out := buf[:0]
	for _, id := range pl.refs {
		if pl.s.member(id, a) {
			out = append(out, id)
		}
	}
	return out
}

// classOf computes (or recalls) the class of peer a: known, with the referenced sets refs
// holding it, or an address of elementary interval iv that no set holds (refs empty).
func (pl *plan) classOf(d *Decision, a netip.Addr, iv int, refs []dataplane.SetID) string {
	sc := &pl.scratch
	pl.spend(1 + len(refs))
	k := binary.AppendUvarint(sc.key[:0], uint64(pl.netID[iv]))
	for _, id := range refs {
		k = append(append(k, id...), 0)
	}
	if pl.npRefs && len(refs) > 0 {
		k = pl.appendNamedPorts(k, a, refs)
	}
	sc.key = k
	sig := digest(sha256.Sum256(k))
	if ck, ok := pl.memo[sig]; ok {
		return ck
	}
	cand := pl.candidates(a, iv, refs)
	rk := appendInt32s(sc.key[:0], cand)
	if pl.npRefs && len(refs) > 0 {
		rk = pl.appendNamedPorts(append(rk, 0xff), a, refs)
	}
	sc.key = rk
	lk := digest(sha256.Sum256(rk))
	ck, ok := pl.byRules[lk]
	if !ok {
		c := pl.class(d, cand, a, len(refs) > 0)
		n := len(d.Classes)
		if ck = d.intern(c); len(d.Classes) > n {
			pl.spend(newClassCost * (1 + len(c.Ports))) // what the class keeps, and its elements
		}
		pl.byRules[lk] = ck
	}
	if len(pl.memo) > 4*len(d.Peers)+4096 {
		clear(pl.memo) // peer churn: keep the memo as large as the decision, not its history
	}
	pl.memo[sig] = ck
	return ck
}

// appendNamedPorts appends, for each referenced named-port set, its id and the peer's members
// of it: equal members of different sets are different signatures.
func (pl *plan) appendNamedPorts(k []byte, a netip.Addr, refs []dataplane.SetID) []byte {
	for _, id := range refs {
		if set := pl.s.Sets[id]; set != nil && set.ports != nil {
			k = append(append(k, id...), 0)
			for _, m := range set.ports[a] {
				k = append(k, byte(m.Protocol), byte(m.Port>>8), byte(m.Port))
			}
			k = append(k, 0)
		}
	}
	return k
}

// candidates lists, in evaluation order, the rules whose peer side holds for peer a, held by
// the sets refs (none: an unknown address).
func (pl *plan) candidates(a netip.Addr, iv int, refs []dataplane.SetID) []int32 {
	sc := &pl.scratch
	holds := func(i int32) bool {
		r := &pl.rules[i]
		for _, id := range r.peer.Sets {
			if _, ok := slices.BinarySearch(refs, id); !ok {
				return false
			}
		}
		for _, id := range r.peer.NotSets {
			if _, ok := slices.BinarySearch(refs, id); ok {
				return false
			}
		}
		return !r.netRule || r.netHolds(a, pl.is4)
	}
	out := append(sc.cand[:0], pl.ungatedIn(iv, a)...)
	n := len(pl.ungatedNot)
	for _, i := range pl.ungatedNot {
		if holds(i) {
			out = append(out, i)
		}
	}
	for _, id := range refs {
		n += len(pl.gated[id])
		for _, i := range pl.gated[id] {
			if holds(i) {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	pl.spend(n + len(out))
	sc.cand = out
	return out
}

// ungatedIn lists the ungated rules without excluded sets whose ipBlock predicate holds in
// elementary interval iv (a holds there): the same for every peer of the interval, so kept per
// netID and spent for once.
func (pl *plan) ungatedIn(iv int, a netip.Addr) []int32 {
	id := pl.netID[iv]
	if l, ok := pl.ungatedBy[id]; ok {
		return l
	}
	var l []int32
	for _, i := range pl.ungatedAll {
		if r := &pl.rules[i]; !r.netRule || r.netHolds(a, pl.is4) {
			l = append(l, i)
		}
	}
	pl.spend(len(pl.ungatedAll) + 2*len(l))
	pl.ungatedBy[id] = l
	return l
}

// netHolds reports whether the rule's ipBlock predicate holds for address a of the family: in
// one of its prefixes (when it has any) and in none of its excepts.
func (r *planRule) netHolds(a netip.Addr, is4 bool) bool {
	in := r.nets == 0
	for _, n := range r.peer.Nets {
		if n.Addr().Is4() == is4 && n.Contains(a) {
			in = true
			break
		}
	}
	if !in {
		return false
	}
	for _, n := range r.peer.NotNets {
		if n.Contains(a) {
			return false
		}
	}
	return true
}

// class computes the decision function of a peer whose matching rules are cand (in evaluation
// order): for the protocol no rule names (Other) and each non-port protocol rules name, the
// first deciding rule; for each port protocol, the rules paint their port ranges over the ports
// still undecided.
func (pl *plan) class(d *Decision, cand []int32, peer netip.Addr, known bool) *Class {
	c := &Class{Protos: map[model.Protocol]Outcome{}}
	c.Other = pl.decideProto(cand, 255) // stands for every protocol no rule names (255 is reserved)
	for _, proto := range pl.protos {
		if o := pl.decideProto(cand, proto); o != c.Other {
			c.Protos[proto] = o
		}
	}
	segs := pl.scratch.segs[:0]
	for _, proto := range pl.painted {
		if hasPorts(proto) && pl.srcRanges(cand, proto, peer, known) {
			c.SrcPorts = append(c.SrcPorts, pl.srcClasses(d, cand, proto, peer, known, c.Other)...)
			continue
		}
		segs = pl.paintJoined(cand, proto, peer, known, segs)
	}
	pl.scratch.segs = segs
	for _, sg := range segs {
		if sg.Outcome != c.Other {
			c.Ports = append(c.Ports, sg)
		}
	}
	return c
}

// paintJoined appends the port segments of protocol proto (paint), sorted, adjacent segments of
// equal outcome joined.
func (pl *plan) paintJoined(cand []int32, proto model.Protocol, peer netip.Addr, known bool, segs []PortSeg) []PortSeg {
	start := len(segs)
	segs = pl.paint(cand, proto, peer, known, segs)
	part := segs[start:]
	slices.SortFunc(part, func(a, b PortSeg) int { return int(a.First) - int(b.First) })
	n := start
	for _, sg := range part {
		if n > start && segs[n-1].Outcome == sg.Outcome && uint32(segs[n-1].Last)+1 == uint32(sg.First) {
			segs[n-1].Last = sg.Last
			continue
		}
		segs[n] = sg
		n++
	}
	return segs[:n]
}

// srcRanges works out, for the rules of cand with source ports that admit proto, the source
// ports each matches (pl.srcAt's table), and reports whether there is any such rule: then the
// class's outcome for proto depends on the source port.
func (pl *plan) srcRanges(cand []int32, proto model.Protocol, peer netip.Addr, known bool) bool {
	clear(pl.srcAt.ranges)
	for _, i := range cand {
		r := &pl.rules[i]
		if !r.src.portRules || !r.admits(proto) {
			continue
		}
		if pl.srcAt.ranges == nil {
			pl.srcAt.ranges = map[int32][]portGap{}
		}
		pl.srcAt.ranges[i] = slices.Clone(pl.portRangesOf(&r.src, proto, peer, known))
	}
	return len(pl.srcAt.ranges) > 0
}

// srcClasses partitions the source ports of proto for a peer whose rules cand have source ports
// (srcRanges): the bounds of those rules' ranges cut 0-65535 into at most 2·s+1 intervals for s
// ranges, throughout each of which the same rules match; each interval's destination ports are
// painted by those rules and the rules without source ports, into a class of its own (whose
// other packets get other), and adjacent intervals of one class are joined; an interval whose
// packets all get other has no range (the class's other packets get other too). So a class with
// source ports costs (2·s+1) paints at most, within the plan's budget.
func (pl *plan) srcClasses(d *Decision, cand []int32, proto model.Protocol, peer netip.Addr, known bool, other Outcome) []SrcPortSeg {
	cuts := []uint32{0}
	for _, rgs := range pl.srcAt.ranges {
		for _, g := range rgs {
			cuts = append(cuts, uint32(g.first), uint32(g.last)+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []SrcPortSeg
	for first, last := range spans(cuts) {
		pl.srcAt.port, pl.srcAt.on = first, true
		segs := pl.paintJoined(cand, proto, peer, known, nil)
		pl.srcAt.on = false
		sub := &Class{Other: other, Protos: map[model.Protocol]Outcome{}}
		for _, sg := range segs {
			if sg.Outcome != other {
				sub.Ports = append(sub.Ports, sg)
			}
		}
		if len(sub.Ports) == 0 {
			continue // every packet gets other: the class's own Ports hold nothing of proto
		}
		n := len(d.Classes)
		key := d.intern(sub)
		if len(d.Classes) > n {
			pl.spend(newClassCost * (1 + len(sub.Ports)))
		}
		if n := len(out); n > 0 && out[n-1].Class.Key == key && uint32(out[n-1].Last)+1 == uint32(first) {
			out[n-1].Last = last
			continue
		}
		out = append(out, SrcPortSeg{Proto: proto, First: first, Last: last, Class: d.Classes[key]})
	}
	return out
}

// spans yields the ranges of 0-65535 that the sorted, distinct cuts (the first 0; cuts past
// 65535 end none) start: each from its cut to the port before the next one.
func spans(cuts []uint32) iter.Seq2[uint16, uint16] {
	return func(yield func(uint16, uint16) bool) {
		for k, first := range cuts {
			if first > 65535 {
				return
			}
			last := uint32(65535)
			if k+1 < len(cuts) {
				last = min(cuts[k+1]-1, 65535)
			}
			if !yield(uint16(first), uint16(last)) {
				return
			}
		}
	}
}

// admits reports whether rule r can match packets of protocol proto.
func (r *planRule) admits(proto model.Protocol) bool {
	if r.proto != model.ProtocolAny && r.proto != proto || r.notProt != model.ProtocolAny && r.notProt == proto {
		return false
	}
	return !r.portRules && !r.src.portRules || hasPorts(proto)
}

// decideProto is the outcome of a packet of a protocol without ports (every rule that admits it
// matches it whole): tiers in order, the first Allow or Deny wins, Pass leaves the tier, a
// tier's default when none decided, then the final outcome.
func (pl *plan) decideProto(cand []int32, proto model.Protocol) Outcome {
	i := 0
	logs := ""
	decided := func(o Outcome) Outcome {
		o.Logs = logs
		return o
	}
	for ti := range pl.ntier {
		passed := false
		for ; i < len(cand) && int(pl.rules[cand[i]].tier) == ti; i++ {
			r := &pl.rules[cand[i]]
			if passed || !r.admits(proto) {
				continue
			}
			switch r.action {
			case model.ActionAllow, model.ActionDeny:
				return decided(r.outcome)
			case model.ActionPass:
				passed = true
			case model.ActionLog:
				logs += r.outcome.Logs
			}
		}
		if passed {
			continue
		}
		if o := pl.defaults[ti]; o.Verdict != 0 {
			return decided(o)
		}
	}
	return decided(pl.final)
}

// paint appends the port segments of protocol proto (unsorted, disjoint, covering every port):
// the rules, in evaluation order, take the ports of their ranges that are still undecided —
// Allow and Deny decide them, Pass moves them to the next tier — and at the end of a tier its
// default decides what is left; the final outcome takes the rest. Each port is decided once, so
// the cost is O(rules · log ranges) plus the segments made.
func (pl *plan) paint(cand []int32, proto model.Protocol, peer netip.Addr, known bool, out []PortSeg) []PortSeg {
	sc := &pl.scratch
	gaps := append(sc.gaps[:0], portGap{first: 0, last: 65535})
	passed := sc.passed[:0]
	emit := func(g portGap, o Outcome) {
		o.Logs = g.logs
		out = append(out, PortSeg{Proto: proto, First: g.first, Last: g.last, Outcome: o})
	}
	i := 0
	for ti := range pl.ntier {
		passed = passed[:0]
		for ; i < len(cand) && int(pl.rules[cand[i]].tier) == ti; i++ {
			r := &pl.rules[cand[i]]
			if len(gaps) == 0 || !r.admits(proto) || r.action != model.ActionAllow && r.action != model.ActionDeny &&
				r.action != model.ActionPass && r.action != model.ActionLog {
				continue
			}
			if r.src.portRules && !pl.srcAt.holds(cand[i]) {
				continue
			}
			rgs := pl.portRanges(r, proto, peer, known)
			pl.spend(1 + len(rgs))
			if r.action == model.ActionLog {
				for _, rg := range rgs {
					gaps = logGaps(gaps, rg, r.outcome.Logs)
				}
				continue
			}
			for _, rg := range rgs {
				gaps = carve(gaps, rg, func(g portGap) {
					if r.action == model.ActionPass {
						passed = append(passed, g)
					} else {
						emit(g, r.outcome)
					}
				})
			}
		}
		if o := pl.defaults[ti]; o.Verdict != 0 {
			for _, g := range gaps {
				emit(g, o)
			}
			gaps = append(gaps[:0], passed...)
		} else {
			gaps = append(gaps, passed...)
		}
		slices.SortFunc(gaps, func(a, b portGap) int { return int(a.first) - int(b.first) })
	}
	for _, g := range gaps {
		emit(g, pl.final)
	}
	pl.spend(len(out))
	sc.gaps, sc.passed = gaps, passed
	return out
}

// carve removes range rg from the sorted, disjoint gaps, calling take for each piece removed.
func carve(gaps []portGap, rg portGap, take func(portGap)) []portGap {
	i := sort.Search(len(gaps), func(i int) bool { return gaps[i].last >= rg.first })
	j := i
	var keep [2]portGap
	n := 0
	for ; j < len(gaps) && gaps[j].first <= rg.last; j++ {
		g := gaps[j]
		if g.first < rg.first {
			keep[n] = portGap{g.first, rg.first - 1, g.logs}
			n++
		}
		take(portGap{max(g.first, rg.first), min(g.last, rg.last), g.logs})
		if g.last > rg.last {
			keep[n] = portGap{rg.last + 1, g.last, g.logs}
			n++
		}
	}
	if i == j {
		return gaps
	}
	return slices.Replace(gaps, i, j, keep[:n]...)
}

// portRanges is the sorted, disjoint list of ports of protocol proto that rule r's destination
// port matches (every port when it has none): its ports, or every port, without its excluded
// ports. Egress named ports resolve on the peer (none when it is unknown). For ICMP and ICMPv6
// the "ports" are the keys type<<8 | code (icmpRanges).
func (pl *plan) portRanges(r *planRule, proto model.Protocol, peer netip.Addr, known bool) []portGap {
	sc := &pl.scratch
	pos := sc.ranges[:0]
	if !hasPorts(proto) {
		sc.ranges = icmpRanges(pos, r.icmp, r.notICMP)
		return sc.ranges
	}
	return pl.portRangesOf(&r.portMatch, proto, peer, known)
}

// portRangesOf is portRanges of one side's port match pm (a port protocol's).
func (pl *plan) portRangesOf(pm *portMatch, proto model.Protocol, peer netip.Addr, known bool) []portGap {
	sc := &pl.scratch
	pos := sc.ranges[:0]
	add := func(list []portGap, prs []portRange) []portGap {
		for _, p := range prs {
			if p.proto == model.ProtocolAny || p.proto == proto {
				list = append(list, portGap{first: p.first, last: p.last})
			}
		}
		return list
	}
	addNamed := func(list []portGap, ids []dataplane.SetID) []portGap {
		if !known {
			return list
		}
		for _, id := range ids {
			if set := pl.s.Sets[id]; set != nil {
				for _, m := range set.ports[peer] {
					if m.Protocol == proto {
						list = append(list, portGap{first: m.Port, last: m.Port})
					}
				}
			}
		}
		return list
	}
	if pm.hasPos {
		pos = addNamed(add(pos, pm.pos), pm.posNP)
		pos = joinGaps(pos)
	} else {
		pos = append(pos, portGap{first: 0, last: 65535})
	}
	if len(pm.neg) > 0 || len(pm.negNP) > 0 {
		neg := joinGaps(addNamed(add(sc.neg[:0], pm.neg), pm.negNP))
		for _, g := range neg {
			pos = carve(pos, g, func(portGap) {})
		}
		sc.neg = neg
	}
	sc.ranges = pos
	return pos
}

// icmpRanges appends to out the ICMP keys (type<<8 | code) that match m (every key when nil)
// and not notM: a type alone is the range type<<8 … type<<8 | 255.
func icmpRanges(out []portGap, m, notM *model.ICMPMatch) []portGap {
	out = append(out, icmpKeys(m))
	if notM != nil {
		out = carve(out, icmpKeys(notM), func(portGap) {})
	}
	return out
}

// icmpKeys is the range of ICMP keys that m matches (nil: all).
func icmpKeys(m *model.ICMPMatch) portGap {
	switch {
	case m == nil:
		return portGap{first: 0, last: 65535}
	case m.Code == nil:
		return portGap{first: uint16(m.Type) << 8, last: uint16(m.Type)<<8 | 255}
	}
	k := uint16(m.Type)<<8 | uint16(*m.Code)
	return portGap{first: k, last: k}
}

// ICMPKey is the 16-bit key of an ICMP or ICMPv6 packet that classes partition: type<<8 | code,
// the transport header's first 16 bits (what `th sport` loads).
func ICMPKey(typ, code uint8) uint16 { return uint16(typ)<<8 | uint16(code) }

// icmpProtocol is the ICMP protocol of the family.
func icmpProtocol(is4 bool) model.Protocol {
	if is4 {
		return model.ProtocolICMP
	}
	return model.ProtocolICMPv6
}

// logGaps appends log to the logs of the ports of the sorted, disjoint gaps that range rg
// holds, splitting the gaps it cuts: a Log rule logs the packets still undecided and leaves them
// undecided.
func logGaps(gaps []portGap, rg portGap, log string) []portGap {
	var logged []portGap
	gaps = carve(gaps, rg, func(g portGap) {
		g.logs += log
		logged = append(logged, g)
	})
	gaps = append(gaps, logged...)
	slices.SortFunc(gaps, func(a, b portGap) int { return int(a.first) - int(b.first) })
	return gaps
}

// joinGaps sorts ranges and joins overlapping and adjacent ones, in place.
func joinGaps(gs []portGap) []portGap {
	slices.SortFunc(gs, func(a, b portGap) int { return int(a.first) - int(b.first) })
	out := gs[:0]
	for _, g := range gs {
		if n := len(out); n > 0 && uint32(g.first) <= uint32(out[n-1].last)+1 {
			out[n-1].last = max(out[n-1].last, g.last)
			continue
		}
		out = append(out, g)
	}
	return out
}

func appendInt32s(b []byte, xs []int32) []byte {
	for _, x := range xs {
		b = binary.AppendUvarint(b, uint64(x))
	}
	return b
}

func zeroAddr(is4 bool) netip.Addr {
	if is4 {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

func maxAddr(is4 bool) netip.Addr {
	if is4 {
		return netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	return netip.AddrFrom16([16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff, 5: 0xff, 6: 0xff, 7: 0xff,
		8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff})
}
