package nft

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
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

// Outcome is a verdict with the reason a reader of `nft list ruleset` is shown, and the Log
// rules that log the packet on its way (their reasons, in evaluation order, each ending in
// "\n"; "" for none).
type Outcome struct {
	Verdict Verdict
	Reason  string
	Logs    string
}

// State is the dataplane's view of the graph's output that the compiler reads.
type State struct {
	Sets     map[dataplane.SetID]*Set
	Policies map[model.PolicyKey]*dataplane.PolicyUpdated
	// refIndexMin: plans referencing more sets than this index peers by set (see plan.index).
	refIndexMin int
	// localSide caches GroupKey's local-side references per direction and tier list; cleared
	// whenever a policy changes.
	localSide map[string]*localSideRefs
	// compileBudget bounds the work of one group's compile (plan.spend).
	compileBudget int64
	// rejected holds the policies whose rules are not enforced as written (reject), with the
	// rules enforced instead; a new version of the policy is enforced as written again.
	rejected map[model.PolicyKey][]dataplane.Rule
	// logs says that Log rules log (to the deny log's group): they are compiled into outcomes'
	// Logs; without, they are left out (they change no verdict).
	logs bool
	// domainPolicies counts the held policies with a domain-name rule (domainRules: none, no walk).
	domainPolicies int
}

// Set is a graph set: addresses, or address.proto.port members for named ports. It is indexed
// for the compiler's two questions — is an address a member, and which named-port members an
// address has — without a map per address (a cluster's sets hold millions of members).
type Set struct {
	Kind        dataplane.SetKind
	Description string
	// v4 and v6 hold an address set's members, one family each, as the table's shared selector
	// sets (sel_…, shared.go): a listed group puts these very objects in the table, so a member is
	// held once, and their Put and Delete journal what the next commit sends (a copy in the
	// table would hold every member twice). Nil for a named-port set.
	v4, v6 *ruleset.Set
	// addrs counts the named-port members of each address (named-port sets only).
	addrs map[netip.Addr]uint32
	// ports lists the named-port members of each address (named-port sets only).
	ports map[netip.Addr][]dataplane.Member
}

func newSet(id dataplane.SetID, kind dataplane.SetKind, description string, members []dataplane.Member) *Set {
	s := &Set{Kind: kind, Description: description}
	if kind == dataplane.SetNamedPorts {
		s.addrs = make(map[netip.Addr]uint32, len(members))
		s.ports = map[netip.Addr][]dataplane.Member{}
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
func setComment(id dataplane.SetID, description string) string {
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

// len counts the addresses of family is4 that are members (of a named-port set: an upper
// bound, its addresses of both families).
func (s *Set) len(is4 bool) int {
	if s.addrs != nil {
		return len(s.addrs)
	}
	return s.family(is4).Len()
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

// DefaultCompileBudget is the work one group's compile may do, in the plan's units (a rule
// visited, a port range painted, a set membership looked up; a kept port segment counts
// newClassCost), so a compile keeps at most 2,000,000 class elements. BenchmarkLargePolicy
// checks that a policy of 200 rules of 50 peers over 10,000 pods compiles within it.
const DefaultCompileBudget = 20_000_000

// NewState returns an empty State.
func NewState() *State {
	return &State{Sets: map[dataplane.SetID]*Set{}, Policies: map[model.PolicyKey]*dataplane.PolicyUpdated{}, refIndexMin: 16, compileBudget: DefaultCompileBudget}
}

// Apply folds one graph message into the state (endpoint messages are the Builder's business).
func (s *State) Apply(m dataplane.Message) {
	switch m := m.(type) {
	case dataplane.SetReplaced:
		set := newSet(m.ID, m.Kind, m.Description, m.Members)
		for _, mb := range m.Members {
			set.add(mb)
		}
		s.Sets[m.ID] = set
	case dataplane.SetMembersChanged:
		set := s.Sets[m.ID]
		if set == nil {
			kind := dataplane.SetAddrs
			for _, mb := range append(m.Added, m.Removed...) {
				if mb.Port != 0 || mb.Protocol != model.ProtocolAny {
					kind = dataplane.SetNamedPorts
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
	case dataplane.SetRemoved:
		delete(s.Sets, m.ID)
	case dataplane.PolicyUpdated:
		p := m
		s.countDomains(s.Policies[m.Key], &p)
		s.Policies[m.Key] = &p
		delete(s.rejected, m.Key)
		clear(s.localSide)
	case dataplane.PolicyRemoved:
		s.countDomains(s.Policies[m.Key], nil)
		delete(s.Policies, m.Key)
		delete(s.rejected, m.Key)
		clear(s.localSide)
	}
}

func (s *Set) add(m dataplane.Member) {
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

func (s *Set) remove(m dataplane.Member) {
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

func (s *State) member(id dataplane.SetID, a netip.Addr) bool {
	set := s.Sets[id]
	if set == nil {
		return false // a missing set has no members: bad input never widens an allow
	}
	return set.has(a)
}

func (s *State) namedPort(id dataplane.SetID, a netip.Addr, proto model.Protocol, port uint16) bool {
	set := s.Sets[id]
	if set == nil {
		return false
	}
	return slices.Contains(set.ports[a], dataplane.Member{Addr: a, Protocol: proto, Port: port})
}

// policyRule is one rule of a tier's policies in one direction.
type policyRule struct {
	*dataplane.Rule
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

// reject stops enforcing a policy's rules as written, in both directions, without ever allowing
// more than they do: a policy whose rules only allow keeps no rule (it still isolates the
// endpoints it selects, through its tier's default), any other is enforced as one rule denying
// everything at its place in its tier. The policy keeps its place in the endpoints' tiers.
func (s *State) reject(key model.PolicyKey, reason string) {
	pol := s.Policies[key]
	if pol == nil {
		return
	}
	var sub []dataplane.Rule
	for _, r := range slices.Concat(pol.Ingress, pol.Egress) {
		if r.Action != model.ActionAllow && r.Action != model.ActionLog {
			sub = []dataplane.Rule{{Action: model.ActionDeny, Comment: key.String() + " not enforced as written (" + reason + "): denied"}}
			break
		}
	}
	if s.rejected == nil {
		s.rejected = map[model.PolicyKey][]dataplane.Rule{}
	}
	s.rejected[key] = sub
	clear(s.localSide)
}

// ruleCost weighs a policy's rules in one direction for choosing which policy to reject when a
// compile runs out of budget: a rule and each of its selectors, prefixes and ports.
func (s *State) ruleCost(key model.PolicyKey, dir model.Direction) int {
	n := 0
	for r := range s.tierRules(dir, dataplane.TierPolicies{Policies: []model.PolicyKey{key}}) {
		n++
		for _, m := range []*dataplane.Match{&r.Src, &r.Dst} {
			n += len(m.Sets) + len(m.NotSets) + len(m.Nets) + len(m.NotNets) + len(m.Ports) + len(m.NotPorts) +
				len(m.NamedPortSets) + len(m.NotNamedPortSets)
		}
	}
	return n
}

// tierRules yields the rules of a tier's policies in one direction, in evaluation order; a
// policy the State does not hold (yet) contributes none.
func (s *State) tierRules(dir model.Direction, t dataplane.TierPolicies) iter.Seq[policyRule] {
	return func(yield func(policyRule) bool) {
		for _, key := range t.Policies {
			rules := s.policyRules(key, dir)
			for i := range rules {
				if !yield(policyRule{Rule: &rules[i], policy: key, dir: dir, index: i}) {
					return
				}
			}
		}
	}
}

// policyRules returns a policy's rules in one direction as the State enforces them (reject);
// none for a policy it does not hold (yet).
func (s *State) policyRules(key model.PolicyKey, dir model.Direction) []dataplane.Rule {
	pol := s.Policies[key]
	if pol == nil {
		return nil
	}
	if sub, ok := s.rejected[key]; ok {
		return sub
	}
	if dir == model.Egress {
		return pol.Egress
	}
	return pol.Ingress
}

// addrMatch reports whether address a passes one side of a rule: a member of every set of
// Sets and of none of NotSets, in one of Nets (when any) and in none of NotNets.
func (s *State) addrMatch(m *dataplane.Match, a netip.Addr) bool {
	for _, id := range m.Sets {
		if !s.member(id, a) {
			return false
		}
	}
	for _, id := range m.NotSets {
		if s.member(id, a) {
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

func hasPorts(p model.Protocol) bool {
	return p == model.ProtocolTCP || p == model.ProtocolUDP || p == model.ProtocolSCTP
}

// PortProtocols are the protocols whose destination port the class chains look up.
var portProtocols = []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP}

// PortSeg is one interval of a class's disjoint protocol × port partition; for ICMP and ICMPv6
// the "ports" are the keys type<<8 | code (ICMPKey).
type PortSeg struct {
	Proto       model.Protocol
	First, Last uint16
	Outcome
}

// Class is the decision function of a peer class: a disjoint partition of (protocol, port) for
// the port protocols, and of (protocol, type<<8 | code) for the family's ICMP protocol when a
// rule of the plan matches ICMP type or code; the outcome for every other protocol.
type Class struct {
	Key   string
	Ports []PortSeg // only segments whose outcome differs from Other
	// SrcPorts partition the source ports of the port protocols whose outcome depends on them
	// (rules with source ports), each range leading to the class of its packets: Ports holds no
	// segment of such a protocol.
	SrcPorts []SrcPortSeg
	// Protos: outcomes of non-port protocols that rules name (Protocol or NotProtocol), where
	// they differ from Other; never a protocol that Ports partitions.
	Protos map[model.Protocol]Outcome
	Other  Outcome
	sum    string // summary(), memoized
	name   string // chain(), memoized
}

// SrcPortSeg is one range of source ports of a protocol, and the class (of destination ports)
// its packets get.
type SrcPortSeg struct {
	Proto       model.Protocol
	First, Last uint16
	Class       *Class
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

// Lookup returns the outcome the compiled structure gives a packet (what the kernel does): sport
// and port are its source and destination ports, for ICMP and ICMPv6 port is its ICMPKey.
func (d *Decision) Lookup(peer netip.Addr, proto model.Protocol, sport, port uint16) Outcome {
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
	return outcome(d.Classes[key], proto, sport, port)
}

// Compile builds the decision structure for the tiers of one endpoint group in one direction and
// family (v4: is4). local is an address of a group endpoint (ingress named ports resolve on it;
// endpoints are grouped so that all members resolve them alike).
func (s *State) Compile(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool) *Decision {
	return s.compile(dir, tiers, local, is4).Decision
}

// compiled is a Decision with what recompiling single peers of it needs: the plan, whose
// memo of classes by peer signature stays valid while the group's policies and local-side facts
// do (a change of either recompiles the group).
type compiled struct {
	*Decision
	plan     *plan
	local    netip.Addr
	fastMemo map[[2]string]fastResult // see fast.go
}

// compile compiles one group's tiers for a direction and family within the State's compile
// budget; a compile that exhausts it stops early, its plan marked over (the Decision is then
// incomplete and must not be used).
func (s *State) compile(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool) *compiled {
	d := &Decision{Peers: map[netip.Addr]string{}, Classes: map[string]*Class{}}
	pl := s.newPlan(dir, tiers, local, is4, s.compileBudget)
	cp := &compiled{Decision: d, plan: pl, local: local}
	if pl.over {
		return cp
	}
	// known peers: the addresses of the referenced sets
	if pl.index != nil {
		for a, refs := range pl.index {
			if d.Peers[a] = pl.classOf(d, a, pl.interval(a), refs); pl.over {
				return cp
			}
		}
	} else {
		var buf []dataplane.SetID
		for _, id := range pl.refs {
			if set := s.Sets[id]; set != nil {
				for a := range set.addresses(is4) {
					if _, done := d.Peers[a]; !done {
						buf = pl.refsOf(a, buf)
						if d.Peers[a] = pl.classOf(d, a, pl.interval(a), buf); pl.over {
							return cp
						}
					}
				}
			}
		}
	}
	// every other address: the elementary intervals, adjacent ones of one class joined
	type run struct {
		Interval
		covered bool // its first elementary interval is inside a prefix
	}
	var runs []run
	for i, from := range pl.starts {
		to := maxAddr(is4)
		if i+1 < len(pl.starts) {
			to = pl.starts[i+1].Prev()
		}
		k := pl.classOf(d, from, i, nil)
		if pl.over {
			return cp
		}
		if n := len(runs); n > 0 && runs[n-1].Class == k {
			runs[n-1].To = to
			continue
		}
		runs = append(runs, run{Interval{From: from, To: to, Class: k}, pl.covered[i]})
	}
	// the default is the class of the first run that starts outside every prefix; when every
	// address is inside one, the first run's class (and all runs are kept)
	d.Default = runs[0].Class
	for _, r := range runs {
		if !r.covered {
			d.Default = r.Class
			break
		}
	}
	for _, r := range runs {
		if r.Class != d.Default {
			d.Intervals = append(d.Intervals, r.Interval)
		}
	}
	return cp
}

// peerChanged tells the compiled decision that set id's membership of address a may have
// changed (the State already holds the new membership); it keeps the plan's index true.
func (cp *compiled) peerChanged(id dataplane.SetID, a netip.Addr) {
	pl := cp.plan
	if pl.index == nil {
		return // no index: refsOf asks the State, which is already current
	}
	if _, ref := slices.BinarySearch(pl.refs, id); !ref {
		return
	}
	in := pl.s.member(id, a)
	refs := pl.index[a]
	i, found := slices.BinarySearch(refs, id)
	switch {
	case in && !found:
		pl.index[a] = slices.Insert(slices.Clip(refs), i, id)
	case !in && found:
		if refs = slices.Delete(slices.Clip(refs), i, i+1); len(refs) == 0 {
			delete(pl.index, a)
		} else {
			pl.index[a] = refs
		}
	}
}

// recompilePeer recomputes one address's entry of Peers from the State: its class when some
// referenced peer-side set holds it, else no entry (intervals and the default judge it). It
// returns the old and new class keys ("" for none).
func (cp *compiled) recompilePeer(a netip.Addr) (old, cur string) {
	old = cp.Peers[a]
	pl := cp.plan
	pl.budget, pl.over = pl.s.compileBudget, false // one peer costs at most what its compile did
	refs := pl.refsOf(a, nil)
	if len(refs) == 0 {
		delete(cp.Peers, a)
		return old, ""
	}
	cur = cp.plan.classOf(cp.Decision, a, cp.plan.interval(a), refs)
	cp.Peers[a] = cur
	return old, cur
}

// intern files a class under its key: peers with equal decision functions share one class (one
// chain in the kernel), and its key string.
func (d *Decision) intern(c *Class) string {
	key := classKey(c)
	if old, ok := d.Classes[key]; ok {
		return old.Key
	}
	c.Key = key
	d.Classes[key] = c
	return key
}

// classKey is a class's identity: equal decision functions (and reasons) give equal keys. It is
// the hex SHA-256 of the class's canonical text ("<verdict>:<reason>", then
// "|<proto>.<first>-<last>:<verdict>:<reason>" per port segment, then "|p<proto>:<verdict>:<reason>"
// per protocol in order, then "|s<proto>.<first>-<last>:<class key>" per source-port range; an
// outcome with logs has "\x00logs:<logs>" after its reason), streamed into the hash: a class of many segments costs no string of
// their length. The class chain's name is "c_" and the first 12 hex digits of it.
func classKey(c *Class) string {
	h := sha256.New()
	buf := make([]byte, 0, 128)
	write := func(o Outcome) {
		buf = append(strconv.AppendUint(buf, uint64(o.Verdict), 10), ':')
		h.Write(buf)
		h.Write([]byte(o.Reason))
		if o.Logs != "" {
			h.Write([]byte("\x00logs:" + o.Logs))
		}
		buf = buf[:0]
	}
	write(c.Other)
	for _, sg := range c.Ports {
		buf = append(strconv.AppendUint(append(buf, '|'), uint64(sg.Proto), 10), '.')
		buf = append(strconv.AppendUint(buf, uint64(sg.First), 10), '-')
		buf = append(strconv.AppendUint(buf, uint64(sg.Last), 10), ':')
		write(sg.Outcome)
	}
	for _, pr := range slices.Sorted(maps.Keys(c.Protos)) {
		o := c.Protos[pr]
		buf = append(strconv.AppendUint(append(buf, '|', 'p'), uint64(pr), 10), ':')
		write(o)
	}
	for _, sg := range c.SrcPorts {
		buf = append(strconv.AppendUint(append(buf, '|', 's'), uint64(sg.Proto), 10), '.')
		buf = append(strconv.AppendUint(buf, uint64(sg.First), 10), '-')
		buf = append(strconv.AppendUint(buf, uint64(sg.Last), 10), ':')
		h.Write(append(buf, sg.Class.Key...))
		buf = buf[:0]
	}
	return hex.EncodeToString(h.Sum(nil))
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
func tierDefault(t dataplane.TierPolicies) Outcome {
	var v Verdict
	switch t.DefaultAction {
	case model.ActionDeny:
		v = Deny
	case model.ActionAllow:
		v = Allow
	default:
		return Outcome{}
	}
	if t.Tier == model.TierHostUndecided && len(t.Policies) == 0 {
		return Outcome{Verdict: v, Reason: reasonUndecided}
	}
	if t.Tier == model.TierHostDefault && len(t.Policies) == 0 {
		return Outcome{Verdict: v, Reason: "host endpoint default " + v.String() + ": no policy decided"}
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
	return Outcome{Verdict: v, Reason: fmt.Sprintf("tier %s default %s: no rule of %s matched", t.Tier, v, list)}
}
