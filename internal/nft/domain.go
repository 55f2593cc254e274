package nft

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Domain-name rules. A rule whose peer is a domainNames pattern (dataplane.Match.DomainName)
// matches the addresses DNS answers gave the pattern, which the agent writes at run time into
// the pattern's two sets (dataplane.DomainSetName: `flags timeout`, elements the agent's): the
// compile knows none of them, so the shapes compiled here take such a rule as matching nothing
// (neverMatches), and the group's chain gets it as an accepting rule of its own in front of the
// shape — a lookup in the pattern's set of the family, with the rule's protocol and ports as a
// listed group's rules have them. Accepting there first is exact only while every rule before
// it in evaluation order allows (or matches nothing here) and no tier before it ends in a
// default: then a packet it accepts is one that the order would allow anyway, by it or by an
// earlier allow. domainRules takes the domain-name rules up to the first rule or tier default
// that could decide otherwise; a later one stays matching nothing, so a domain-name rule never
// allows more than written. The API allows domainNames in Accept rules only, and admins put
// them before the Deny that closes the rest: that is the case this serves.

// domainRules are the accepting rules of a group's domain-name rules that are exact in front of
// its shape (see above), in evaluation order; local is an endpoint of the group.
func (s *State) domainRules(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool) []listRule {
	var out []listRule
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			peer := &r.Src
			if dir == model.Egress {
				peer = &r.Dst
			}
			if r.Src.DomainName != "" && peer != &r.Src || r.Dst.DomainName != "" && peer != &r.Dst {
				return out // a domain name on the local side: never sent, and never exact here
			}
			if peer.DomainName == "" {
				if !neverMatches(r.Rule, is4) && r.Action != model.ActionAllow && (r.Action != model.ActionLog || s.logs) {
					return out // it may decide (or log) before the rules after it
				}
				continue
			}
			if r.Action != model.ActionAllow || neverMatches(&dataplane.Rule{IPVersion: r.IPVersion, Protocol: r.Protocol,
				NotProtocol: r.NotProtocol, ICMP: r.ICMP, NotICMP: r.NotICMP}, is4) {
				continue
			}
			rule := *r.Rule
			if dir == model.Egress {
				rule.Dst.DomainName = ""
			} else {
				rule.Src.DomainName = ""
			}
			lrs, ok := s.listRules(dir, &rule, local, is4, r.reason()+" (allow)")
			if !ok {
				return out // a negated port or protocol: the map shape's, not a list's
			}
			for _, lr := range lrs {
				lr.domain = peer.DomainName
				out = append(out, lr)
			}
		}
		if o := tierDefault(t); o.Verdict != 0 {
			return out
		}
	}
	return out
}

// domainSet is the set of a pattern's addresses of one family; its elements are the agent's.
func domainSet(pattern string, is4 bool) (string, func() *ruleset.Set) {
	name := dataplane.DomainSetName(pattern, is4)
	return name, func() *ruleset.Set {
		return &ruleset.Set{Name: name, Key: addrKey(is4), Timeout: true, Comment: ruleset.Comment("addresses DNS answered for " + pattern)}
	}
}

// DomainNames lists, sorted, the patterns whose sets the table declares: those the agent's DNS
// observer is to fill (it writes both families of each).
func (b *Builder) DomainNames() []string {
	var out []string
	for name, pattern := range b.domains {
		if s := b.table.Sets[name]; s != nil && s.Timeout {
			out = append(out, pattern)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
