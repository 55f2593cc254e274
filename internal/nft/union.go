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
	rules []unionRule
	bySet map[dataplane.SetID][]int32 // every set a rule requires → the rules requiring it
	// peers are the rules that match each peer holding grants (sorted), and grants its allowed
	// ports (sorted by protocol and port), each with the first matching rule's reason
	peers  map[netip.Addr][]int32
	grants map[netip.Addr][]protoPort
	def    *Class // the tier's default (or the final allow): every packet no grant accepts
	refs   bool   // the rules' peer sides reference sets: the allow set and peers map exist
	// dirty lists, per address whose membership of a set changed, the sets (compilePeers)
	dirty map[netip.Addr][]dataplane.SetID
}

// unionRule is one rule of a union: the sets its peer must be in, the ports it allows.
type unionRule struct {
	sets  []dataplane.SetID
	ports []protoPort
}

// compileUnion compiles a group into the union shape, or reports that it is not one (or that
// its map-shaped compile might exceed the budget, which only the plan answers). It only reads
// the State. The caller has ruled out the listed shape.
func (s *State) compileUnion(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool) (*union, bool) {
	if len(tiers) != 1 {
		return nil, false
	}
	u := &union{bySet: map[dataplane.SetID][]int32{}, peers: map[netip.Addr][]int32{},
		grants: map[netip.Addr][]protoPort{}, dirty: map[netip.Addr][]dataplane.SetID{}}
	refs := map[dataplane.SetID]struct{}{}
	// work bounds what the plan would spend on this group (plan.spend): a rule visited, the
	// referenced sets' members indexed and looked up, and per peer and matching rule its
	// candidates, painted ports, segments and the class kept
	var work int64
	for r := range s.tierRules(dir, tiers[0]) {
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
		ur, ok := unionRuleOf(r)
		if !ok {
			return nil, false
		}
		pos := int32(len(u.rules))
		u.rules = append(u.rules, ur)
		for _, id := range ur.sets {
			u.bySet[id] = append(u.bySet[id], pos)
		}
	}
	u.refs = len(refs) > 0
	for id := range refs {
		if set := s.Sets[id]; set != nil {
			work += 16 * int64(set.len(is4))
		}
	}
	for i, ur := range u.rules {
		first := s.Sets[ur.sets[0]]
		if first == nil {
			continue
		}
		work += int64(first.len(is4)) * int64(3+17*len(ur.ports))
		if work > s.compileBudget {
			return nil, false
		}
		for a := range first.addresses(is4) {
			if s.holdsAll(ur.sets[1:], a) {
				u.peers[a] = append(u.peers[a], int32(i))
			}
		}
	}
	for a, rs := range u.peers {
		g, ok := u.grant(a, rs)
		if !ok {
			return nil, false
		}
		u.grants[a] = g
	}
	def := tierDefault(tiers[0])
	if def.Verdict == 0 {
		def = Outcome{Allow, "no tier decided: allow"}
	}
	u.def = &Class{Other: def, Protos: map[model.Protocol]Outcome{}}
	u.def.Key = classKey(u.def)
	return u, true
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
	ur := unionRule{sets: peer.Sets}
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
func (u *union) grant(a netip.Addr, rs []int32) ([]protoPort, bool) {
	var out []protoPort
	for _, i := range rs {
		for _, p := range u.rules[i].ports {
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

// putUnionGroup lays a union out: the chain, the allow set (changed in place when the group's
// placement holds one from a previous union, so that a commit sends the elements that differ),
// an empty peers map, the default's class chain.
func (b *Builder) putUnionGroup(g *group, u *union) {
	prev := g.union
	g.compiled, g.union = nil, u
	b.setClassUse(g, map[string]int{u.def.chain(): 1}, map[string]*Class{u.def.Key: u.def})
	b.releaseShared(g, nil) // when the group was listed
	g.listed = false

	key, addrPort := peerKeys(g.dir, g.is4)
	chain := &ruleset.Chain{Name: g.name, Comment: ruleset.Comment(g.describe())}
	if u.refs {
		allow := b.table.Sets[g.name+"_allow"]
		if prev == nil || !prev.refs || allow == nil {
			var elements []ruleset.Element
			for a, ps := range u.grants {
				elements = append(elements, allowElements(a, ps)...)
			}
			b.putAllowSet(chain, g, true, elements)
		} else {
			for a, ps := range prev.grants {
				if _, ok := u.grants[a]; !ok {
					for _, e := range allowElements(a, ps) {
						allow.Delete(e.ElementKey)
					}
				}
			}
			for a, ps := range u.grants {
				if old, ok := prev.grants[a]; !ok || !slices.Equal(old, ps) {
					syncAllow(allow, a, old, ps)
				}
			}
			chain.Rules = append(chain.Rules, allowRule(addrPort, allow.Name))
		}
		if peers := b.table.Sets[g.name+"_peers"]; prev == nil || !prev.refs || peers == nil {
			b.putPeerMap(chain, g.name+"_peers", key, false, true, nil,
				"known peer address → its peer class", "peers that selectors of these policies name")
		} else {
			chain.Rules = append(chain.Rules, peerMapRule(key, peers.Name, "peers that selectors of these policies name"))
		}
	} else {
		b.dropSet(g.name + "_allow")
		b.dropSet(g.name + "_peers")
	}
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

// compileUnionPeers re-grants the peers whose membership of a set changed: the rules that matched
// each, and those requiring a set it changed in, are tested again. A peer the union can no
// longer represent (too many ports) makes the group compile again, as a plan.
func (b *Builder) compileUnionPeers(g *group) {
	u := g.union
	defer clear(u.dirty)
	allow := b.table.Sets[g.name+"_allow"]
	if allow == nil {
		b.compileGroup(g, nil)
		return
	}
	for _, a := range slices.SortedFunc(maps.Keys(u.dirty), netip.Addr.Compare) {
		cand := slices.Clone(u.peers[a])
		for _, id := range u.dirty[a] {
			cand = append(cand, u.bySet[id]...)
		}
		slices.Sort(cand)
		cand = slices.Compact(cand)
		rs := cand[:0]
		for _, i := range cand {
			if b.state.holdsAll(u.rules[i].sets, a) {
				rs = append(rs, i)
			}
		}
		ps, ok := u.grant(a, rs)
		if !ok {
			g.stale = true
			b.compileGroup(g, nil)
			return
		}
		syncAllow(allow, a, u.grants[a], ps)
		if len(rs) == 0 {
			delete(u.peers, a)
			delete(u.grants, a)
			continue
		}
		u.peers[a], u.grants[a] = rs, ps
	}
}
