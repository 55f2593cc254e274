package nft

import (
	"fmt"
	"iter"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Verdict is what the kernel does with the first packet of a connection.
type Verdict uint8

const (
	Allow Verdict = iota + 1
	Deny
)

func (v Verdict) String() string {
	if v == Deny {
		return "deny"
	}
	return "allow"
}

// Outcome is a verdict with the reason a reader of `nft list ruleset` is shown.
type Outcome struct {
	Verdict Verdict
	Reason  string
}

// State is the dataplane's view of the graph's output that the compiler reads.
type State struct {
	Sets     map[graph.SetID]*Set
	Policies map[model.PolicyKey]*graph.PolicyUpdated
	// gateIndexMin: plans with more gate sets than this index peers by gate (see plan.gates).
	gateIndexMin int
}

// Set is a graph set: addresses, or address.proto.port members for named ports. It is indexed
// for the compiler's two questions — is an address a member, and which named-port members an
// address has — without a map per address (a cluster's sets hold millions of members).
type Set struct {
	Kind        graph.SetKind
	Description string
	// v4 and v6 hold an address set's members, one family each, as the table's shared selector
	// sets (sel_…, shared.go): a listed group puts these very objects in the table, so a member is
	// held once, and their Put and Delete journal what the next commit sends (at P3's scale the
	// copy the table used to hold was ≈ 20 MB). Nil for a named-port set.
	v4, v6 *ruleset.Set
	// addrs counts the named-port members of each address (named-port sets only).
	addrs map[netip.Addr]uint32
	// ports lists the named-port members of each address (named-port sets only).
	ports map[netip.Addr][]graph.Member
}

func newSet(id graph.SetID, kind graph.SetKind, description string, members []graph.Member) *Set {
	s := &Set{Kind: kind, Description: description}
	if kind == graph.SetNamedPorts {
		s.addrs = make(map[netip.Addr]uint32, len(members))
		s.ports = map[netip.Addr][]graph.Member{}
		return s
	}
	n4 := 0
	for _, m := range members {
		if m.Addr.Unmap().Is4() {
			n4++
		}
	}
	comment := ruleset.Comment(setComment(id, description))
	s.v4 = ruleset.NewAddrSet(selSetName(id, true), addrKey(true), comment, n4)
	s.v6 = ruleset.NewAddrSet(selSetName(id, false), addrKey(false), comment, len(members)-n4)
	return s
}

// setComment is what the table's sets of graph set id say of it: its description, else its id.
func setComment(id graph.SetID, description string) string {
	if description != "" {
		return description
	}
	return string(id)
}

// family is an address set's members of one family.
func (s *Set) family(is4 bool) *ruleset.Set {
	if is4 {
		return s.v4
	}
	return s.v6
}

// has reports whether address a (unmapped) is a member (of a named-port set: has a member).
func (s *Set) has(a netip.Addr) bool {
	if s.addrs != nil {
		_, ok := s.addrs[a]
		return ok
	}
	_, ok := s.family(a.Is4()).Get(ruleset.AddrKey(a))
	return ok
}

// addresses yields the addresses that are members (or, of a named-port set, have members) of
// family is4.
func (s *Set) addresses(is4 bool) iter.Seq[netip.Addr] {
	if s.addrs == nil {
		return s.family(is4).Addresses()
	}
	return func(yield func(netip.Addr) bool) {
		for a := range s.addrs {
			if a.Is4() == is4 && !yield(a) {
				return
			}
		}
	}
}

// NewState returns an empty State.
func NewState() *State {
	return &State{Sets: map[graph.SetID]*Set{}, Policies: map[model.PolicyKey]*graph.PolicyUpdated{}, gateIndexMin: 16}
}

// Apply folds one graph message into the state (endpoint messages are the Dataplane's business).
func (s *State) Apply(m graph.Message) {
	switch m := m.(type) {
	case graph.SetReplaced:
		set := newSet(m.ID, m.Kind, m.Description, m.Members)
		for _, mb := range m.Members {
			set.add(mb)
		}
		s.Sets[m.ID] = set
	case graph.SetMembersChanged:
		set := s.Sets[m.ID]
		if set == nil {
			kind := graph.SetAddrs
			for _, mb := range append(m.Added, m.Removed...) {
				if mb.Port != 0 || mb.Protocol != model.ProtocolAny {
					kind = graph.SetNamedPorts
				}
			}
			set = newSet(m.ID, kind, "", nil)
			s.Sets[m.ID] = set
		}
		for _, mb := range m.Removed {
			set.remove(mb)
		}
		for _, mb := range m.Added {
			set.add(mb)
		}
	case graph.SetRemoved:
		delete(s.Sets, m.ID)
	case graph.PolicyUpdated:
		p := m
		s.Policies[m.Key] = &p
	case graph.PolicyRemoved:
		delete(s.Policies, m.Key)
	}
}

func (s *Set) add(m graph.Member) {
	m.Addr = m.Addr.Unmap()
	if s.ports == nil {
		s.family(m.Addr.Is4()).Put(ruleset.Element{ElementKey: ruleset.AddrKey(m.Addr)})
		return
	}
	if slices.Contains(s.ports[m.Addr], m) {
		return
	}
	s.ports[m.Addr] = append(s.ports[m.Addr], m)
	s.addrs[m.Addr]++
}

func (s *Set) remove(m graph.Member) {
	m.Addr = m.Addr.Unmap()
	if s.ports == nil {
		s.family(m.Addr.Is4()).Delete(ruleset.AddrKey(m.Addr))
		return
	}
	ms := s.ports[m.Addr]
	i := slices.Index(ms, m)
	if i < 0 {
		return
	}
	if ms = slices.Delete(ms, i, i+1); len(ms) == 0 {
		delete(s.ports, m.Addr)
	} else {
		s.ports[m.Addr] = ms
	}
	if s.addrs[m.Addr]--; s.addrs[m.Addr] == 0 {
		delete(s.addrs, m.Addr)
	}
}

func (s *State) member(id graph.SetID, a netip.Addr) bool {
	set := s.Sets[id]
	if set == nil {
		return false // a missing set has no members: bad input never widens an allow
	}
	return set.has(a)
}

func (s *State) namedPort(id graph.SetID, a netip.Addr, proto model.Protocol, port uint16) bool {
	set := s.Sets[id]
	if set == nil {
		return false
	}
	return slices.Contains(set.ports[a], graph.Member{Addr: a, Protocol: proto, Port: port})
}

// packet is what the evaluator looks at: the peer and the local endpoint address, L4 protocol
// and destination port. known=false means the peer is in no set (interval/default lookups).
type packet struct {
	peer, local netip.Addr
	known       bool
	proto       model.Protocol
	port        uint16
}

// Evaluate resolves the policy model's evaluation order for one packet: tiers in order, policies
// in order, rules in order; first Allow/Deny wins; Pass goes to the next tier; a tier's default
// applies when none decided; allow after the last tier. It is the reference semantics that the
// compiled structures must equal.
func (s *State) Evaluate(dir model.Direction, tiers []graph.TierPolicies, local, peer netip.Addr, proto model.Protocol, port uint16) Outcome {
	return s.eval(dir, tiers, packet{peer: peer.Unmap(), local: local.Unmap(), known: true, proto: proto, port: port})
}

// policyRule is one rule of a tier's policies in one direction.
type policyRule struct {
	*graph.Rule
	policy model.PolicyKey
	dir    model.Direction
	index  int // among the policy's rules of the direction
}

// reason names the rule in outcomes and comments: its comment, else policy, direction and index.
func (r policyRule) reason() string {
	if r.Comment != "" {
		return r.Comment
	}
	return fmt.Sprintf("%s %s rule %d", r.policy, r.dir, r.index)
}

// tierRules yields the rules of a tier's policies in one direction, in evaluation order; a
// policy the State does not hold (yet) contributes none.
func (s *State) tierRules(dir model.Direction, t graph.TierPolicies) iter.Seq[policyRule] {
	return func(yield func(policyRule) bool) {
		for _, key := range t.Policies {
			pol := s.Policies[key]
			if pol == nil {
				continue
			}
			rules := pol.Ingress
			if dir == model.Egress {
				rules = pol.Egress
			}
			for i := range rules {
				if !yield(policyRule{Rule: &rules[i], policy: key, dir: dir, index: i}) {
					return
				}
			}
		}
	}
}

func (s *State) eval(dir model.Direction, tiers []graph.TierPolicies, p packet) Outcome {
tiers:
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			if !s.matches(dir, r.Rule, p) {
				continue
			}
			switch r.Action {
			case model.ActionAllow:
				return Outcome{Allow, r.reason() + " (allow)"}
			case model.ActionDeny:
				return Outcome{Deny, r.reason() + " (deny)"}
			case model.ActionPass:
				continue tiers
			}
		}
		if o := tierDefault(t); o.Verdict != 0 {
			return o
		}
	}
	if len(tiers) == 0 {
		return Outcome{Allow, "no policy applies"}
	}
	return Outcome{Allow, "no tier decided: allow"}
}

func (s *State) matches(dir model.Direction, r *graph.Rule, p packet) bool {
	if r.IPVersion == 4 && !p.peer.Is4() || r.IPVersion == 6 && !p.peer.Is6() {
		return false
	}
	if r.Protocol != model.ProtocolAny && r.Protocol != p.proto {
		return false
	}
	if r.NotProtocol != model.ProtocolAny && r.NotProtocol == p.proto {
		return false
	}
	if r.ICMP != nil || r.NotICMP != nil {
		// ICMP type/code is not resolved into the lookup structures yet: such a rule matches
		// nothing (never widens an allow; a type-restricted deny is not enforced).
		return false
	}
	src, dst := p.peer, p.local
	srcKnown, dstKnown := p.known, true
	if dir == model.Egress {
		src, dst = p.local, p.peer
		srcKnown, dstKnown = true, p.known
	}
	if !s.addrMatch(&r.Src, src, srcKnown) || !s.addrMatch(&r.Dst, dst, dstKnown) {
		return false
	}
	if len(r.Src.Ports) > 0 || len(r.Src.NamedPortSets) > 0 || len(r.Src.NotPorts) > 0 || len(r.Src.NotNamedPortSets) > 0 {
		return false // source ports: unsupported, the rule matches nothing
	}
	return s.portMatch(&r.Dst, dst, dstKnown, p.proto, p.port)
}

func (s *State) addrMatch(m *graph.Match, a netip.Addr, known bool) bool {
	for _, id := range m.Sets {
		if !known || !s.member(id, a) {
			return false
		}
	}
	for _, id := range m.NotSets {
		if known && s.member(id, a) {
			return false
		}
	}
	if len(m.Nets) > 0 {
		in := false
		for _, n := range m.Nets {
			if n.Contains(a) {
				in = true
				break
			}
		}
		if !in {
			return false
		}
	}
	for _, n := range m.NotNets {
		if n.Contains(a) {
			return false
		}
	}
	return true
}

func portIn(ps []model.Port, port uint16) bool {
	for _, p := range ps {
		if p.Name == "" && p.First <= port && port <= p.Last {
			return true
		}
	}
	return false
}

func (s *State) portMatch(m *graph.Match, a netip.Addr, known bool, proto model.Protocol, port uint16) bool {
	if len(m.Ports) > 0 || len(m.NamedPortSets) > 0 {
		if !hasPorts(proto) {
			return false
		}
		ok := portIn(m.Ports, port)
		for _, id := range m.NamedPortSets {
			if !ok && known && s.namedPort(id, a, proto, port) {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	if len(m.NotPorts) > 0 || len(m.NotNamedPortSets) > 0 {
		if !hasPorts(proto) {
			return false
		}
		if portIn(m.NotPorts, port) {
			return false
		}
		for _, id := range m.NotNamedPortSets {
			if known && s.namedPort(id, a, proto, port) {
				return false
			}
		}
	}
	return true
}

func hasPorts(p model.Protocol) bool {
	return p == model.ProtocolTCP || p == model.ProtocolUDP || p == model.ProtocolSCTP
}

// PortProtocols are the protocols whose destination port the class chains look up.
var portProtocols = []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP}

// PortSeg is one interval of a class's disjoint protocol × port partition.
type PortSeg struct {
	Proto       model.Protocol
	First, Last uint16
	Outcome
}

// Class is the decision function of a peer class: a disjoint partition of (protocol, port) for
// the port protocols, and the outcome for every other protocol (ICMP included).
type Class struct {
	Key   string
	Ports []PortSeg // only segments whose outcome differs from Other
	// Protos: outcomes of non-port protocols that rules name (Protocol or NotProtocol), where
	// they differ from Other.
	Protos map[model.Protocol]Outcome
	Other  Outcome
	sum    string // summary(), memoized
}

// Interval is one range of a disjoint partition of the address space.
type Interval struct {
	From, To netip.Addr
	Class    string
}

// Decision is the compiled decision structure of one endpoint group, direction and family.
type Decision struct {
	Peers     map[netip.Addr]string // exact: known endpoint addresses → class
	Intervals []Interval            // disjoint, sorted; addresses not in Peers
	Default   string                // class of every other address
	Classes   map[string]*Class
}

// Lookup returns the outcome the compiled structure gives a packet (what the kernel does).
func (d *Decision) Lookup(peer netip.Addr, proto model.Protocol, port uint16) Outcome {
	peer = peer.Unmap()
	key, ok := d.Peers[peer]
	if !ok {
		key = d.Default
		for _, iv := range d.Intervals {
			if iv.From.Compare(peer) <= 0 && peer.Compare(iv.To) <= 0 {
				key = iv.Class
				break
			}
		}
	}
	return outcome(d.Classes[key], proto, port)
}

// Compile builds the decision structure for the tiers of one endpoint group in one direction and
// family (v4: is4). local is an address of a group endpoint (ingress named ports resolve on it;
// endpoints are grouped so that all members resolve them alike).
func (s *State) Compile(dir model.Direction, tiers []graph.TierPolicies, local netip.Addr, is4 bool) *Decision {
	return s.compile(dir, tiers, local, is4).Decision
}

// compiled is a Decision with what recompiling single peers of it needs: the plan and the
// peer-side sets that make an address known.
type compiled struct {
	*Decision
	plan  *plan
	local netip.Addr
	// extraRefs are the referenced peer-side sets that gate no rule: an address is known if a
	// gate set (plan.gates) or one of these holds it.
	extraRefs []graph.SetID
	fastMemo  map[[2]string]fastResult // see fast.go
}

func (s *State) compile(dir model.Direction, tiers []graph.TierPolicies, local netip.Addr, is4 bool) *compiled {
	d := &Decision{Peers: map[netip.Addr]string{}, Classes: map[string]*Class{}}
	pl := s.newPlan(dir, tiers)
	refs, nets := s.references(dir, tiers, is4)
	cp := &compiled{Decision: d, plan: pl, local: local}
	known := map[netip.Addr]struct{}{}
	for id := range refs {
		if _, gate := pl.gated[id]; !gate {
			cp.extraRefs = append(cp.extraRefs, id)
		}
		if set := s.Sets[id]; set != nil {
			for a := range set.addresses(is4) {
				known[a] = struct{}{}
			}
		}
	}
	slices.Sort(cp.extraRefs)
	for a := range known {
		d.Peers[a] = d.class(pl, packet{peer: a, local: local, known: true})
	}
	// disjoint partition of the address space by the boundaries of every referenced prefix
	var zero, max netip.Addr
	if is4 {
		zero, max = netip.IPv4Unspecified(), netip.AddrFrom4([4]byte{255, 255, 255, 255})
	} else {
		zero, max = netip.IPv6Unspecified(), netip.AddrFrom16([16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	}
	cuts := map[netip.Addr]struct{}{zero: {}}
	for _, n := range nets {
		n = n.Masked()
		cuts[n.Addr()] = struct{}{}
		if last := lastAddr(n); last != max {
			cuts[last.Next()] = struct{}{}
		}
	}
	starts := make([]netip.Addr, 0, len(cuts))
	for a := range cuts {
		starts = append(starts, a)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Less(starts[j]) })
	var ivs []Interval
	for i, from := range starts {
		to := max
		if i+1 < len(starts) {
			to = starts[i+1].Prev()
		}
		k := d.class(pl, packet{peer: from, local: local})
		if n := len(ivs); n > 0 && ivs[n-1].Class == k {
			ivs[n-1].To = to
			continue
		}
		ivs = append(ivs, Interval{From: from, To: to, Class: k})
	}
	// the default is the class of an interval outside every referenced prefix; when every
	// address is inside one, the first interval's class (and all intervals are kept)
	d.Default = ""
	for _, iv := range ivs {
		inside := false
		for _, n := range nets {
			if n.Contains(iv.From) {
				inside = true
				break
			}
		}
		if !inside {
			d.Default = iv.Class
			break
		}
	}
	if d.Default == "" {
		d.Default = ivs[0].Class
	}
	for _, iv := range ivs {
		if iv.Class != d.Default {
			d.Intervals = append(d.Intervals, iv)
		}
	}
	return cp
}

// peerChanged tells the compiled decision that set id's membership of address a may have
// changed (the State already holds the new membership); it keeps the plan's gate index true.
func (cp *compiled) peerChanged(id graph.SetID, a netip.Addr) {
	pl := cp.plan
	if _, gate := pl.gated[id]; !gate || pl.gates == nil {
		return // not a gate, or no index: gatesOf asks the State, which is already current
	}
	in := pl.s.member(id, a)
	gates := pl.gates[a]
	i := slices.Index(gates, id)
	switch {
	case in && i < 0:
		pl.gates[a] = append(gates, id)
	case !in && i >= 0:
		gates = slices.Delete(gates, i, i+1)
		if len(gates) == 0 {
			delete(pl.gates, a)
		} else {
			pl.gates[a] = gates
		}
	}
}

// recompilePeer recomputes one address's entry of Peers from the State: its class when some
// referenced peer-side set holds it, else no entry (intervals and the default judge it). It
// returns the old and new class keys ("" for none).
func (cp *compiled) recompilePeer(a netip.Addr) (old, cur string) {
	old = cp.Peers[a]
	known := len(cp.plan.gatesOf(a)) > 0
	for _, id := range cp.extraRefs {
		if known {
			break
		}
		known = cp.plan.s.member(id, a)
	}
	if !known {
		delete(cp.Peers, a)
		return old, ""
	}
	cur = cp.class(cp.plan, packet{peer: a, local: cp.local, known: true})
	cp.Peers[a] = cur
	return old, cur
}

// references lists the sets whose members are known peers (every set the peer side of a rule
// references) and the peer-side prefixes of one family.
func (s *State) references(dir model.Direction, tiers []graph.TierPolicies, is4 bool) (map[graph.SetID]struct{}, []netip.Prefix) {
	refs := map[graph.SetID]struct{}{}
	var nets []netip.Prefix
	add := func(ids []graph.SetID) {
		for _, id := range ids {
			refs[id] = struct{}{}
		}
	}
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			m := &r.Src
			if dir == model.Egress {
				m = &r.Dst
				add(m.NamedPortSets)
				add(m.NotNamedPortSets)
			}
			add(m.Sets)
			add(m.NotSets)
			for _, n := range slices.Concat(m.Nets, m.NotNets) {
				if n.Addr().Is4() == is4 {
					nets = append(nets, n)
				}
			}
		}
	}
	return refs, nets
}

// class computes the decision function of one peer and interns it: peers with equal functions
// share one class (one chain in the kernel). Only the plan's candidate rules of the peer are
// evaluated (the others cannot match it), so the cost is independent of the number of policies
// whose selectors do not contain the peer.
func (d *Decision) class(pl *plan, p packet) string {
	cand := pl.candidates(p.peer, p.known)
	c := &Class{Protos: map[model.Protocol]Outcome{}}
	p.proto = 255 // stands for every protocol no rule names (reserved: no rule names 255)
	c.Other = pl.eval(cand, p)
	for _, proto := range pl.protos {
		p.proto = proto
		if o := pl.eval(cand, p); o != c.Other {
			c.Protos[proto] = o
		}
	}
	for _, proto := range portProtocols {
		p.proto = proto
		// elementary port boundaries: evaluating per distinct segment is exact because rule
		// port matches are unions of ranges, and named ports are single ports
		cuts := pl.portCuts(cand, p)
		for i, first := range cuts {
			last := uint16(65535)
			if i+1 < len(cuts) {
				last = uint16(cuts[i+1] - 1)
			}
			p.port = uint16(first)
			o := pl.eval(cand, p)
			if n := len(c.Ports); n > 0 && c.Ports[n-1].Proto == proto && c.Ports[n-1].Outcome == o && uint32(c.Ports[n-1].Last)+1 == first {
				c.Ports[n-1].Last = last
				continue
			}
			c.Ports = append(c.Ports, PortSeg{Proto: proto, First: uint16(first), Last: last, Outcome: o})
		}
	}
	// drop segments equal to Other (the class chain's final verdict covers them)
	kept := c.Ports[:0]
	for _, sg := range c.Ports {
		if sg.Outcome != c.Other {
			kept = append(kept, sg)
		}
	}
	c.Ports = kept
	key := classKey(c)
	if old, ok := d.Classes[key]; ok {
		return old.Key // the interned string: peers of one class share it
	}
	c.Key = key
	d.Classes[c.Key] = c
	return c.Key
}

// classKey is a class's identity: equal decision functions (and reasons) give equal keys.
func classKey(c *Class) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%s", c.Other.Verdict, c.Other.Reason)
	for _, sg := range c.Ports {
		fmt.Fprintf(&b, "|%d.%d-%d:%d:%s", sg.Proto, sg.First, sg.Last, sg.Verdict, sg.Reason)
	}
	protos := make([]int, 0, len(c.Protos))
	for pr := range c.Protos {
		protos = append(protos, int(pr))
	}
	sort.Ints(protos)
	for _, pr := range protos {
		o := c.Protos[model.Protocol(pr)]
		fmt.Fprintf(&b, "|p%d:%d:%s", pr, o.Verdict, o.Reason)
	}
	return b.String()
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// tierDefault is the outcome when policies of a tier applied and none decided (Verdict 0: pass
// to the next tier). Its reason names the first policies of the tier, so a reader of a drop's
// comment sees which policies isolated the endpoint; a long tier is named by its first two
// policies and a count (the whole list would make one reason, and one deny chain, per distinct
// list of thousands of names, and comments are cut at 128 bytes anyway).
func tierDefault(t graph.TierPolicies) Outcome {
	var v Verdict
	switch t.DefaultAction {
	case model.ActionDeny:
		v = Deny
	case model.ActionAllow:
		v = Allow
	default:
		return Outcome{}
	}
	const named = 2
	names := make([]string, 0, named)
	for _, k := range t.Policies[:min(named, len(t.Policies))] {
		names = append(names, k.String())
	}
	list := strings.Join(names, ", ")
	if more := len(t.Policies) - named; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return Outcome{v, fmt.Sprintf("tier %s default %s: no rule of %s matched", t.Tier, v, list)}
}
