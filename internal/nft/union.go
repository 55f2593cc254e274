package nft

import (
	"cmp"
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// The union shape of a map-shaped group. When a group has one tier, and every rule of it that
// can match here allows single destination ports of a port protocol from the members of
// selectors (no ipBlock, no negation, no named port, no ICMP, no source port), a peer's class
// is the tier's default with the ports its rules allow, each with the reason of the first rule
// that allows it: the union of its rules' ports, whatever their order but for the reasons. With
// at most maxFastPorts ports a peer and no two adjacent ports of one reason, every peer is a fast
// peer (fast.go) and the map shape's table is: the allow set holding each peer's ports, an empty
// peers map, no nets map, and the default's class chain. The union compile computes exactly
// that table without computing a class per peer: it walks each rule's selector members once and
// grants their ports, O(rules + Σ members of the rules' selectors). It keeps its work per policy
// and the grants per peer, so a pod joining or leaving a selector re-grants that one peer (its
// rules, found by set), and a later compile of the group under the same name compiles only the
// policies that changed and changes only the allow elements of the peers whose grants differ.
// Any group outside that case — or whose map-shaped compile could exceed the budget — takes the
// plan (decide.go, plan.go).

// union is a union-shaped group's compiled form, kept per policy so that a compile under the
// same name visits only the policies that changed.
type union struct {
	tier     string
	action   model.Action
	facts    keyID             // the local-side facts compiled for (groupKey)
	policies []model.PolicyKey // the tier's policies compiled, in order
	pols     map[model.PolicyKey]*unionPolicy
	bySet    map[dataplane.SetID][]*unionRule // every set a rule requires → the rules requiring it
	// peers are the rules that match each peer holding grants (in evaluation order), and grants
	// its allowed ports (sorted by protocol and port), each with the first matching rule's reason
	peers  map[netip.Addr][]*unionRule
	grants map[netip.Addr][]protoPort
	def    *Class // the tier's default (or the final allow): every packet no grant accepts
	// refCount counts the policies whose peer sides reference each set (any: the allow set and
	// peers map exist); sizes holds the family's members of each such set that work counted.
	refCount map[dataplane.SetID]int
	sizes    map[dataplane.SetID]int
	// work bounds what the plan would spend on this group (plan.spend): a rule visited, the
	// referenced sets' members indexed and looked up, and per peer and matching rule its
	// candidates, painted ports, segments and the class kept. Above the budget the plan compiles
	// the group (and answers the budget as it does).
	work int64
	// dirty lists, per address whose membership of a set changed, the sets; touched are the
	// policies changed since the compile (or whose sets were sent whole)
	dirty   map[netip.Addr][]dataplane.SetID
	touched map[model.PolicyKey]struct{}
	// changed holds the peers whose grants a compile changed with their previous grants: what
	// putUnionGroup changes in the table
	changed map[netip.Addr][]protoPort
}

// unionPolicy is one policy of a union: its rules as compiled, the sets its peer sides
// reference, its part of the work bound and its place in the tier.
type unionPolicy struct {
	order int64
	rules []dataplane.Rule // the State's rules it was compiled from
	union []*unionRule     // those that can match here
	refs  []dataplane.SetID
	work  int64
}

// unionRule is one rule of a union: the sets its peer must be in, the ports it allows, and the
// peers it matches; gone once its policy is dropped.
type unionRule struct {
	pol   *unionPolicy
	index int
	sets  []dataplane.SetID
	ports []protoPort
	peers []netip.Addr
	gone  bool
}

// before orders rules by evaluation order.
func (x *unionRule) before(y *unionRule) int {
	return cmp.Or(cmp.Compare(x.pol.order, y.pol.order), cmp.Compare(x.index, y.index))
}

// unionWorkSlack is what the plan spends beyond a union's work bound, at most: the sweep and the
// class of the addresses no rule names.
const unionWorkSlack = 100

// orderGap spaces the order keys of a union's policies, so that policies inserted between two
// take keys between theirs.
const orderGap = 1 << 20

// compileUnion compiles a group into the union shape, or reports that it is not one (or that
// its map-shaped compile might exceed the budget, which only the plan answers). The caller has
// ruled out the listed shape. facts are the group's local-side facts (groupKey). With prev, the
// union laid out in the table under the group's name, of the same tier and facts, it is
// incremental: only the policies that differ between the tier lists (by their common head and
// tail) or changed meanwhile (touched) are compiled again, and only the peers of their rules, and
// of sets whose membership changed, are granted anew — prev itself is brought up to date and
// returned, with the peers it changed. It reads the State and writes nothing but prev.
func (s *State) compileUnion(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool, facts keyID, prev *union) (*union, bool) {
	if len(tiers) != 1 {
		return nil, false
	}
	t := tiers[0]
	u := prev
	var gone, added, mid []model.PolicyKey
	var head int
	if u != nil && u.tier == t.Tier && u.action == t.DefaultAction && u.facts == facts {
		head, gone, mid = keysDiffAt(u.policies, t.Policies)
		added = slices.Clone(mid)
		for k := range u.touched {
			if _, ok := u.pols[k]; ok && !slices.Contains(gone, k) {
				gone = append(gone, k)
			}
			if slices.Contains(t.Policies, k) && !slices.Contains(added, k) {
				added = append(added, k)
			}
		}
	} else {
		prev = nil
		u = &union{tier: t.Tier, action: t.DefaultAction, facts: facts, pols: map[model.PolicyKey]*unionPolicy{},
			bySet: map[dataplane.SetID][]*unionRule{}, peers: map[netip.Addr][]*unionRule{},
			grants: map[netip.Addr][]protoPort{}, refCount: map[dataplane.SetID]int{}, sizes: map[dataplane.SetID]int{},
			dirty: map[netip.Addr][]dataplane.SetID{}}
		added = t.Policies
	}
	u.changed = map[netip.Addr][]protoPort{}
	affected := map[netip.Addr][]*unionRule{}
	u.resize(s, is4, affected)
	// order keys: a policy kept in place keeps its own (touched ones too: a policy that moves
	// is in the middle of the diff), the middle of the diff takes keys spaced between its
	// neighbours', a full compile spaces them all
	orders := map[model.PolicyKey]int64{}
	for _, k := range gone {
		orders[k] = u.pols[k].order
		u.drop(k, affected)
	}
	if prev == u {
		orderOf := func(k model.PolicyKey) int64 {
			if p, ok := u.pols[k]; ok {
				return p.order
			}
			return orders[k]
		}
		lo, hi := int64(0), int64(0)
		if head > 0 {
			lo = orderOf(t.Policies[head-1])
		}
		if end := head + len(mid); end < len(t.Policies) {
			hi = orderOf(t.Policies[end])
		} else {
			hi = lo + int64(len(mid)+1)*orderGap
		}
		step := (hi - lo) / int64(len(mid)+1)
		if len(mid) > 0 && step < 1 {
			return s.compileUnion(dir, tiers, local, is4, facts, nil) // no room: number them anew
		}
		for i, k := range mid {
			orders[k] = lo + step*int64(i+1)
		}
	} else {
		for i, k := range t.Policies {
			orders[k] = int64(i+1) * orderGap
		}
	}
	var fresh []*unionRule
	for _, k := range added {
		up, ok := s.unionPolicyOf(dir, k, local, is4, orders[k])
		if !ok {
			return nil, false
		}
		u.add(s, is4, k, up)
		fresh = append(fresh, up.union...)
	}
	u.policies, u.touched = t.Policies, map[model.PolicyKey]struct{}{}
	if u.work+unionWorkSlack > s.compileBudget {
		return nil, false
	}
	def := tierDefault(t)
	if def.Verdict == 0 {
		def = Outcome{Verdict: Allow, Reason: "no tier decided: allow"}
	}
	u.def = &Class{Other: def, Protos: map[model.Protocol]Outcome{}}
	u.def.Key = classKey(u.def)
	if prev == nil {
		// a full compile: the rules, in evaluation order, file their peers directly, and every
		// peer's grants are laid out whole
		u.changed = nil
		for _, ur := range fresh {
			for a := range s.ruleMembers(ur, is4) {
				u.peers[a] = append(u.peers[a], ur)
				ur.peers = append(ur.peers, a)
			}
		}
		for a, rs := range u.peers {
			ps, ok := u.grant(rs)
			if !ok {
				return nil, false
			}
			u.grants[a] = ps
		}
		return u, true
	}
	for _, ur := range fresh {
		for a := range s.ruleMembers(ur, is4) {
			affected[a] = append(affected[a], ur)
		}
	}
	for a, cand := range affected {
		if !s.regrant(u, a, cand) {
			return nil, false
		}
	}
	return u, true
}

// ruleMembers yields the addresses of family is4 in every set the rule requires.
func (s *State) ruleMembers(ur *unionRule, is4 bool) iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		first := s.Sets[ur.sets[0]]
		if first == nil {
			return
		}
		for a := range first.addresses(is4) {
			if s.holdsAll(ur.sets[1:], a) && !yield(a) {
				return
			}
		}
	}
}

// keysDiffAt is keysDiff with the index where the middles start.
func keysDiffAt(a, b []model.PolicyKey) (head int, gone, added []model.PolicyKey) {
	gone, added = keysDiff(a, b)
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	return head, slices.Clone(gone), slices.Clone(added)
}

// unionPolicyOf compiles one policy's rules for a union, or reports that one of them is not
// the union's kind (or cannot be told from it: ICMP, source ports, named ports of the peer).
func (s *State) unionPolicyOf(dir model.Direction, key model.PolicyKey, local netip.Addr, is4 bool, order int64) (*unionPolicy, bool) {
	up := &unionPolicy{order: order, rules: s.policyRules(key, dir)}
	for i := range up.rules {
		r := policyRule{Rule: &up.rules[i], policy: key, dir: dir, index: i}
		up.work++
		peer, localSide := &r.Src, &r.Dst
		if dir == model.Egress {
			peer, localSide = &r.Dst, &r.Src
			if len(r.Dst.NamedPortSets)+len(r.Dst.NotNamedPortSets) > 0 {
				return nil, false // named ports of the peer
			}
		}
		for _, id := range slices.Concat(peer.Sets, peer.NotSets) {
			if !slices.Contains(up.refs, id) {
				up.refs = append(up.refs, id)
			}
		}
		if r.ICMP != nil || r.NotICMP != nil || len(r.Src.Ports)+len(r.Src.NamedPortSets)+len(r.Src.NotPorts)+len(r.Src.NotNamedPortSets) > 0 {
			return nil, false
		}
		if r.IPVersion == 4 && !is4 || r.IPVersion == 6 && is4 || !s.addrMatch(localSide, local) {
			continue // matches nothing here
		}
		ur, ok := unionRuleOf(r)
		if !ok {
			return nil, false
		}
		ur.pol = up
		up.union = append(up.union, &ur)
		if first := s.Sets[ur.sets[0]]; first != nil {
			up.work += int64(first.len(is4)) * int64(3+17*len(ur.ports))
		}
	}
	return up, true
}

// add files a compiled policy: its rules by set, its referenced sets, its work.
func (u *union) add(s *State, is4 bool, k model.PolicyKey, up *unionPolicy) {
	u.pols[k] = up
	for _, ur := range up.union {
		for _, id := range ur.sets {
			u.bySet[id] = append(u.bySet[id], ur)
		}
	}
	for _, id := range up.refs {
		if u.refCount[id]++; u.refCount[id] == 1 {
			n := 0
			if set := s.Sets[id]; set != nil {
				n = set.len(is4)
			}
			u.sizes[id] = n
			u.work += 16 * int64(n)
		}
	}
	u.work += up.work
}

// drop forgets a policy: its rules are gone, and their peers are granted anew (affected).
func (u *union) drop(k model.PolicyKey, affected map[netip.Addr][]*unionRule) {
	up := u.pols[k]
	delete(u.pols, k)
	for _, ur := range up.union {
		ur.gone = true
		for _, a := range ur.peers {
			if _, ok := affected[a]; !ok {
				affected[a] = nil
			}
		}
		for _, id := range ur.sets {
			if rs := slices.DeleteFunc(u.bySet[id], func(x *unionRule) bool { return x == ur }); len(rs) > 0 {
				u.bySet[id] = rs
			} else {
				delete(u.bySet, id)
			}
		}
	}
	for _, id := range up.refs {
		if u.refCount[id]--; u.refCount[id] == 0 {
			u.work -= 16 * int64(u.sizes[id])
			delete(u.refCount, id)
			delete(u.sizes, id)
		}
	}
	u.work -= up.work
}

// resize takes the membership changes of u.dirty: the work bound follows the sets' sizes, and
// each dirty address is to be granted anew with the rules requiring a set it changed in.
func (u *union) resize(s *State, is4 bool, affected map[netip.Addr][]*unionRule) {
	ids := map[dataplane.SetID]struct{}{}
	for a, dids := range u.dirty {
		for _, id := range dids {
			ids[id] = struct{}{}
			affected[a] = append(affected[a], u.bySet[id]...)
		}
		if _, ok := affected[a]; !ok {
			affected[a] = nil
		}
	}
	clear(u.dirty)
	for id := range ids {
		old, ok := u.sizes[id]
		if !ok {
			continue
		}
		n := 0
		if set := s.Sets[id]; set != nil {
			n = set.len(is4)
		}
		d := int64(n - old)
		u.sizes[id] = n
		u.work += 16 * d
		for _, ur := range u.bySet[id] {
			if ur.sets[0] == id {
				w := d * int64(3+17*len(ur.ports))
				ur.pol.work += w
				u.work += w
			}
		}
	}
}

// regrant finds the rules of u matching peer a — among the rules it matched that are not gone
// and the candidates cand — and its grants, recording a peer whose grants change in u.changed
// (with its previous grants, once). It reports false when the union cannot represent the peer.
func (s *State) regrant(u *union, a netip.Addr, cand []*unionRule) bool {
	old := u.peers[a]
	for _, ur := range old {
		if !ur.gone {
			cand = append(cand, ur)
		}
	}
	slices.SortFunc(cand, (*unionRule).before)
	cand = slices.Compact(cand)
	rs := cand[:0]
	for _, ur := range cand {
		if !ur.gone && s.holdsAll(ur.sets, a) {
			rs = append(rs, ur)
		}
	}
	ps, ok := u.grant(rs)
	if !ok {
		return false
	}
	for _, ur := range old {
		if !ur.gone && !slices.Contains(rs, ur) {
			if i := slices.Index(ur.peers, a); i >= 0 {
				ur.peers = slices.Delete(ur.peers, i, i+1)
			}
		}
	}
	for _, ur := range rs {
		if !slices.Contains(old, ur) {
			ur.peers = append(ur.peers, a)
		}
	}
	if prior := u.grants[a]; !slices.Equal(prior, ps) {
		if u.changed == nil {
			u.changed = map[netip.Addr][]protoPort{}
		}
		if _, seen := u.changed[a]; !seen {
			u.changed[a] = prior
		}
	}
	if len(rs) == 0 {
		delete(u.peers, a)
		delete(u.grants, a)
		return true
	}
	u.peers[a], u.grants[a] = slices.Clip(rs), ps
	return true
}

// unionRuleOf is an allow rule of selector peers and single destination ports of a port
// protocol, or false.
func unionRuleOf(r policyRule) (unionRule, bool) {
	peer := &r.Src
	if r.dir == model.Egress {
		peer = &r.Dst
	}
	d := &r.Dst
	if r.Action != model.ActionAllow || len(peer.Sets) == 0 || len(peer.NotSets)+len(peer.Nets)+len(peer.NotNets) > 0 ||
		!hasPorts(r.Protocol) || r.NotProtocol != model.ProtocolAny || len(d.Ports) == 0 ||
		len(d.NamedPortSets)+len(d.NotPorts)+len(d.NotNamedPortSets) > 0 {
		return unionRule{}, false
	}
	ur := unionRule{index: r.index, sets: peer.Sets}
	reason := r.reason() + " (allow)"
	for _, p := range d.Ports {
		if p.Name != "" || p.First != p.Last {
			return unionRule{}, false
		}
		pp := protoPort{proto: r.Protocol, port: p.First, reason: reason}
		if !slices.Contains(ur.ports, pp) {
			ur.ports = append(ur.ports, pp)
		}
	}
	return ur, true
}

// holdsAll reports whether every set of ids holds address a.
func (s *State) holdsAll(ids []dataplane.SetID, a netip.Addr) bool {
	for _, id := range ids {
		if !s.member(id, a) {
			return false
		}
	}
	return true
}

// grant is the allowed ports of a peer that rules rs (sorted) match: each port with the first
// rule's reason. It reports false when the map shape would not make the peer a fast one: more
// than maxFastPorts ports, or two adjacent ports of one protocol and reason (one segment).
func (u *union) grant(rs []*unionRule) ([]protoPort, bool) {
	var out []protoPort
	for _, ur := range rs {
		for _, p := range ur.ports {
			if !slices.ContainsFunc(out, func(q protoPort) bool { return q.proto == p.proto && q.port == p.port }) {
				out = append(out, p)
			}
		}
	}
	if len(out) > maxFastPorts {
		return nil, false
	}
	slices.SortFunc(out, func(x, y protoPort) int {
		return cmp.Or(cmp.Compare(x.proto, y.proto), cmp.Compare(x.port, y.port))
	})
	for i := 1; i < len(out); i++ {
		if out[i].proto == out[i-1].proto && out[i].port == out[i-1].port+1 && out[i].reason == out[i-1].reason {
			return nil, false
		}
	}
	return out, true
}

// putUnionGroup lays a union out: the chain, the allow set (changed in place, by the peers
// the compile changed, when the union is the one laid out before: an incremental compile), an
// empty peers map, the default's class chain.
func (b *Builder) putUnionGroup(g *group, u *union, domain []listRule) {
	inPlace := g.union == u
	g.compiled, g.union = nil, u
	b.setClassUse(g, map[string]int{u.def.chain(): 1}, map[string]*Class{u.def.Key: u.def})
	chain := b.domainChain(g, domain) // and the shared sets of the group when it was listed
	g.listed = false

	key, addrPort := peerKeys(g.dir, g.is4)
	allow, peers := b.table.Sets[g.name+"_allow"], b.table.Sets[g.name+"_peers"]
	switch {
	case len(u.refCount) == 0:
		b.dropSet(g.name + "_allow")
		b.dropSet(g.name + "_peers")
	case inPlace && allow != nil && peers != nil:
		for _, a := range slices.SortedFunc(maps.Keys(u.changed), netip.Addr.Compare) {
			syncAllow(allow, a, u.changed[a], u.grants[a])
		}
		chain.Rules = append(chain.Rules, allowRule(addrPort, allow.Name),
			peerMapRule(key, peers.Name, "peers that selectors of these policies name"))
	default:
		var elements []ruleset.Element
		for a, ps := range u.grants {
			elements = append(elements, allowElements(a, ps)...)
		}
		b.putAllowSet(chain, g, true, elements)
		b.putPeerMap(chain, g.name+"_peers", key, false, true, nil,
			"known peer address → its peer class", "peers that selectors of these policies name")
	}
	clear(u.changed)
	b.dropSet(g.name + "_nets")
	chain.Rules = append(chain.Rules, ruleset.Rule{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: u.def.chain()},
		Comment: g.finalComment("any other peer")})
	if old := b.table.Chains[g.name]; old == nil || !sameChain(old, chain) {
		b.putChain(chain)
	}
}

// syncAllow changes a peer's elements of an allow set from the ports old to cur.
func syncAllow(allow *ruleset.Set, a netip.Addr, old, cur []protoPort) {
	for _, e := range allowElements(a, old) {
		if !slices.ContainsFunc(cur, func(p protoPort) bool { return uint8(p.proto) == e.Proto && p.port == e.Port }) {
			allow.Delete(e.ElementKey)
		}
	}
	for _, e := range allowElements(a, cur) {
		allow.Put(e)
	}
}

// compileUnionPeers re-grants the peers whose membership of a set changed: the rules that
// matched each, and those requiring a set it changed in, are tested again. A peer the union can
// no longer represent (too many ports), or sets grown past the budget's bound, make the group
// compile again in full.
func (b *Builder) compileUnionPeers(g *group) {
	u := g.union
	allow := b.table.Sets[g.name+"_allow"]
	affected := map[netip.Addr][]*unionRule{}
	u.resize(b.state, g.is4, affected)
	if allow == nil || u.work+unionWorkSlack > b.state.compileBudget {
		g.union = nil
		b.compileGroup(g, nil)
		return
	}
	for _, a := range slices.SortedFunc(maps.Keys(affected), netip.Addr.Compare) {
		if !b.state.regrant(u, a, affected[a]) {
			g.union = nil // its elements are written whole
			b.compileGroup(g, nil)
			return
		}
	}
	for _, a := range slices.SortedFunc(maps.Keys(u.changed), netip.Addr.Compare) {
		syncAllow(allow, a, u.changed[a], u.grants[a])
	}
	clear(u.changed)
}
