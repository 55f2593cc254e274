package nft

import (
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The ordered shape of a group whose local side is the packet's. A host endpoint stage's group
// dispatched by interface (hoststage.go: forwarded traffic, and the packets neither to nor from
// a node address before DNAT or conntrack) has no local address to compile against: the
// packet's destination (ingress) or source (egress) is its local side, and a rule's local-side
// selectors, nets and named ports are matched against it, as Felix matches them. When the
// group's rules reference the local side, the group is compiled into its rules in evaluation
// order, each a list rule (list.go) whose local-side matches are lookups of the packet's local
// address in the same shared sets the peers use (sel_… for a selector, nets_… for nets, np_…
// for a named port, keyed by destination . protocol . port), so a match costs one lookup
// whatever the number of members: an Allow accepts, a Deny goes to its outcome's class chain,
// and a tier's default (or the final allow) ends the chain as in the listed shape.
//
// The ordered shape takes at most maxOrderedRules rules and no rule it cannot evaluate in
// order: a Pass, a Log rule that logs, a rule that is no list rule (a negated port or protocol,
// ICMP type or code, source ports). A group with one of these keeps the other shapes, compiled
// against the unspecified address, where a local-side match (but a /0 net) matches nothing.
// A group whose rules do not reference the local side keeps them too: its outcome does not
// depend on the local address.

// maxOrderedRules bounds the rules of an ordered group's chain, hence the rules a first packet
// meets.
const maxOrderedRules = 4 * maxListRules

// compileOrdered compiles the tiers of a group whose local side is the packet's into its
// ordered rules, or reports that the group keeps the other shapes (see above).
func (s *State) compileOrdered(dir model.Direction, tiers []dataplane.TierPolicies, is4 bool) (*ruleList, bool) {
	if !s.readsLocalSide(dir, tiers, is4) {
		return nil, false
	}
	rl := &ruleList{final: Outcome{Verdict: Allow, Reason: "no tier decided: allow"}}
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			if neverMatches(r.Rule, is4) || r.Action == model.ActionLog && !s.logs {
				continue
			}
			var out *Outcome
			switch r.Action {
			case model.ActionAllow:
			case model.ActionDeny:
				out = &Outcome{Verdict: Deny, Reason: r.reason() + " (deny)"}
			default:
				return nil, false // a Pass, or a Log rule that logs
			}
			lrs, ok := s.listRules(dir, r.Rule, netip.Addr{}, is4, r.reason()+" ("+r.Action.String()+")")
			if !ok {
				return nil, false
			}
			for _, lr := range lrs {
				lr.outcome = out
				if rl.rules = append(rl.rules, lr); len(rl.rules) > maxOrderedRules {
					return nil, false
				}
				if lr.matchesAll() {
					return rl, true // later rules and defaults are never reached
				}
			}
		}
		if o := tierDefault(t); o.Verdict != 0 {
			rl.final = o
			break
		}
	}
	return rl, true
}

// readsLocalSide reports whether a rule of the tiers that can match a packet of the family
// has a local-side selector, named port or net other than a /0.
func (s *State) readsLocalSide(dir model.Direction, tiers []dataplane.TierPolicies, is4 bool) bool {
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			if neverMatches(r.Rule, is4) {
				continue
			}
			m := &r.Dst
			if dir == model.Egress {
				m = &r.Src
			}
			if len(m.Sets) > 0 || len(m.NotSets) > 0 || dir == model.Ingress && (len(m.NamedPortSets) > 0 || len(m.NotNamedPortSets) > 0) {
				return true
			}
			for _, n := range append(m.Nets[:len(m.Nets):len(m.Nets)], m.NotNets...) {
				if n.Bits() > 0 {
					return true
				}
			}
		}
	}
	return false
}

// listOf is the rule list of listed group g: ordered when its local side is the packet's and
// its rules read it, else the listed shape's.
func (s *State) listOf(g *group) *ruleList {
	local := g.sample()
	if local.IsUnspecified() {
		if rl, ok := s.compileOrdered(g.dir, g.tiers, g.is4); ok {
			return rl
		}
	}
	rl, _ := s.compileList(g.dir, g.tiers, local, g.is4)
	return rl
}
