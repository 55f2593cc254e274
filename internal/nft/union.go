package nft

import (
	"cmp"
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
// grants their ports, O(rules + Σ members of the rules' selectors). It keeps the grants, so a
// pod joining or leaving a selector re-grants that one peer (its rules, found by set), and a
// later compile of the group under the same name changes only the allow elements of the peers
// whose grants differ. Any group outside that case — or whose map-shaped compile could exceed
// the budget — takes the plan (decide.go, plan.go).

// union is a union-shaped group's compiled form.
type union struct {
	rules map[*dataplane.Rule]*unionRule   // by the State's rule (a policy version's)
	bySet map[dataplane.SetID][]*unionRule // every set a rule requires → the rules requiring it
	// peers are the rules that match each peer holding grants (in evaluation order), and grants
	// its allowed ports (sorted by protocol and port), each with the first matching rule's reason
	peers  map[netip.Addr][]*unionRule
	grants map[netip.Addr][]protoPort
	def    *Class // the tier's default (or the final allow): every packet no grant accepts
	refs   bool   // the rules' peer sides reference sets: the allow set and peers map exist
	// dirty lists, per address whose membership of a set changed, the sets (compilePeers);
	// replaced are the sets sent whole since the compile, whose rules' peers are found anew
	dirty    map[netip.Addr][]dataplane.SetID
	replaced map[dataplane.SetID]struct{}
	// changed holds, after an incremental compile, the peers whose grants it changed with their
	// previous grants: what putUnionGroup changes in the table
	changed map[netip.Addr][]protoPort
}

// unionRule is one rule of a union: the sets its peer must be in, the ports it allows, its
// place in evaluation order, and the peers it matches.
type unionRule struct {
	src   *dataplane.Rule // the State's rule it compiles
	sets  []dataplane.SetID
	ports []protoPort
	order int
	peers []netip.Addr
}

// compileUnion compiles a group into the union shape, or reports that it is not one (or that
// its map-shaped compile might exceed the budget, which only the plan answers). The caller has
// ruled out the listed shape. With prev, the union laid out in the table under the group's
// name, it is incremental: prev's rules whose policy version and local-side match are unchanged
// keep their peers, and only the peers of rules added or gone (and of dirty or replaced sets)
// are granted anew — prev itself is brought up to date and returned, with the peers it changed.
// It reads the State and writes nothing but prev.
func (s *State) compileUnion(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool, prev *union) (*union, bool) {
	if len(tiers) != 1 {
		return nil, false
	}
	rules := map[*dataplane.Rule]*unionRule{}
	bySet := map[dataplane.SetID][]*unionRule{}
	var fresh []*unionRule
	refs := map[dataplane.SetID]struct{}{}
	// work bounds what the plan would spend on this group (plan.spend): a rule visited, the
	// referenced sets' members indexed and looked up, and per peer and matching rule its
	// candidates, painted ports, segments and the class kept
	var work int64
	n := 0
	for r := range s.tierRules(dir, tiers[0]) {
		n++
		work++
		peer, localSide := &r.Src, &r.Dst
		if dir == model.Egress {
			peer, localSide = &r.Dst, &r.Src
			if len(r.Dst.NamedPortSets)+len(r.Dst.NotNamedPortSets) > 0 {
				return nil, false // named ports of the peer
			}
		}
		addRefs(refs, peer.Sets, peer.NotSets)
		if r.ICMP != nil || r.NotICMP != nil || len(r.Src.Ports)+len(r.Src.NamedPortSets)+len(r.Src.NotPorts)+len(r.Src.NotNamedPortSets) > 0 {
			return nil, false
		}
		if r.IPVersion == 4 && !is4 || r.IPVersion == 6 && is4 || !s.addrMatch(localSide, local) {
			continue // matches nothing here
		}
		var ur *unionRule
		if prev != nil {
			if o := prev.rules[r.Rule]; o != nil && !o.requires(prev.replaced) {
				ur = o
			}
		}
		if ur == nil {
			nr, ok := unionRuleOf(r)
			if !ok {
				return nil, false
			}
			ur = &nr
			fresh = append(fresh, ur)
		}
		ur.order = n
		rules[r.Rule] = ur
		for _, id := range ur.sets {
			bySet[id] = append(bySet[id], ur)
		}
		if first := s.Sets[ur.sets[0]]; first != nil {
			work += int64(first.len(is4)) * int64(3+17*len(ur.ports))
		}
	}
	for id := range refs {
		if set := s.Sets[id]; set != nil {
			work += 16 * int64(set.len(is4))
		}
	}
	if work > s.compileBudget {
		return nil, false
	}
	def := tierDefault(tiers[0])
	if def.Verdict == 0 {
		def = Outcome{Allow, "no tier decided: allow"}
	}
	u := prev
	if u == nil {
		u = &union{peers: map[netip.Addr][]*unionRule{}, grants: map[netip.Addr][]protoPort{}}
	}
	// the peers to grant anew, each with its candidate rules (besides the rules it had)
	affected := map[netip.Addr][]*unionRule{}
	if prev != nil {
		for src, o := range prev.rules {
			if rules[src] != o {
				for _, a := range o.peers {
					if _, ok := affected[a]; !ok {
						affected[a] = nil
					}
				}
			}
		}
		for a, ids := range prev.dirty {
			for _, id := range ids {
				affected[a] = append(affected[a], bySet[id]...)
			}
		}
	}
	for _, ur := range fresh {
		if first := s.Sets[ur.sets[0]]; first != nil {
			for a := range first.addresses(is4) {
				if s.holdsAll(ur.sets[1:], a) {
					affected[a] = append(affected[a], ur)
				}
			}
		}
	}
	u.rules, u.bySet, u.refs = rules, bySet, len(refs) > 0
	u.def = &Class{Other: def, Protos: map[model.Protocol]Outcome{}}
	u.def.Key = classKey(u.def)
	u.dirty, u.replaced = map[netip.Addr][]dataplane.SetID{}, map[dataplane.SetID]struct{}{}
	u.changed = map[netip.Addr][]protoPort{}
	for a, cand := range affected {
		if !s.regrant(u, a, cand) {
			return nil, false
		}
	}
	return u, true
}

// requires reports whether the rule requires one of the sets ids.
func (ur *unionRule) requires(ids map[dataplane.SetID]struct{}) bool {
	for _, id := range ur.sets {
		if _, ok := ids[id]; ok {
			return true
		}
	}
	return false
}

// regrant finds the rules of u matching peer a — among the rules it matched that are still u's
// and the candidates cand — and its grants, recording a peer whose grants change in u.changed
// (with its previous grants, once). It reports false when the union cannot represent the peer.
func (s *State) regrant(u *union, a netip.Addr, cand []*unionRule) bool {
	old := u.peers[a]
	for _, ur := range old {
		if u.rules[ur.src] == ur {
			cand = append(cand, ur)
		}
	}
	slices.SortFunc(cand, func(x, y *unionRule) int { return x.order - y.order })
	cand = slices.Compact(cand)
	rs := cand[:0]
	for _, ur := range cand {
		if s.holdsAll(ur.sets, a) {
			rs = append(rs, ur)
		}
	}
	ps, ok := u.grant(rs)
	if !ok {
		return false
	}
	for _, ur := range old {
		if u.rules[ur.src] == ur && !slices.Contains(rs, ur) {
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
	ur := unionRule{src: r.Rule, sets: peer.Sets}
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
func (b *Builder) putUnionGroup(g *group, u *union) {
	inPlace := g.union == u
	g.compiled, g.union = nil, u
	b.setClassUse(g, map[string]int{u.def.chain(): 1}, map[string]*Class{u.def.Key: u.def})
	b.releaseShared(g, nil) // when the group was listed
	g.listed = false

	key, addrPort := peerKeys(g.dir, g.is4)
	chain := &ruleset.Chain{Name: g.name, Comment: g.comment()}
	allow, peers := b.table.Sets[g.name+"_allow"], b.table.Sets[g.name+"_peers"]
	switch {
	case !u.refs:
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
		Comment: "any other peer"})
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
// no longer represent (too many ports) makes the group compile again, as a plan.
func (b *Builder) compileUnionPeers(g *group) {
	u := g.union
	allow := b.table.Sets[g.name+"_allow"]
	if allow == nil {
		b.compileGroup(g, nil)
		return
	}
	for _, a := range slices.SortedFunc(maps.Keys(u.dirty), netip.Addr.Compare) {
		var cand []*unionRule
		for _, id := range u.dirty[a] {
			cand = append(cand, u.bySet[id]...)
		}
		if !b.state.regrant(u, a, cand) {
			clear(u.dirty)
			g.union = nil // its elements are rewritten whole
			b.compileGroup(g, nil)
			return
		}
	}
	clear(u.dirty)
	for _, a := range slices.SortedFunc(maps.Keys(u.changed), netip.Addr.Compare) {
		syncAllow(allow, a, u.changed[a], u.grants[a])
	}
	clear(u.changed)
}
