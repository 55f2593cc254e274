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
// (neverMatches), and the group's chain evaluates the domain-name rules in front of the shape,
// in the policy's order, as a prefix of list rules (domainRules):
//
//   - an Allow with a domain name accepts its pattern's addresses of the family, with the
//     rule's protocol and ports as a listed group's rules have them;
//   - an Allow, a Deny or a Pass without one, once a Deny or a Pass has come before, is written
//     out too: the Allow accepts; the Deny and the Pass return, leaving the packet to the shape,
//     which denies or passes it as its rule is the first that matches it there too. Allows
//     before the first Deny or Pass are left out: a packet they match the shape accepts anyway.
//
// A packet the prefix accepts is one the order allows: every rule before the accepting one
// that matched it would have decided first in the prefix as well. A packet the prefix leaves
// to the shape matched no domain-name rule before the rule that decides or passes it (or none
// at all), so the shape, in which domain-name rules match nothing, decides it as written — and
// a Pass skips the rest of its tier, domain-name rules included. With no Deny or Pass in front
// the prefix is only accepting rules, in the group chain itself; with one, the prefix is the
// chain <group>_fqdn, which the group chain jumps to first (a return goes on to the shape).
//
// A packet a Pass returned is judged by the later tiers in the shape alone: a domain-name rule
// of a tier after a Pass that matched the packet matches nothing for it (the prefix is one
// chain, which the packet has left). The prefix ends before the first rule it cannot evaluate
// in order: a Log rule that logs, a rule that is no list rule (a negated port or protocol, ICMP
// type or code, source ports), a tier's default, or once it holds maxDomainPrefix rules; a
// domain-name rule after that end matches nothing. Either way it never allows more than
// written. The API allows domainNames in Accept rules only; a domain name on the local side is
// never sent by the graph.

// maxDomainPrefix bounds a group's domain-name prefix, hence the rules a first packet meets in
// front of the shape.
const maxDomainPrefix = 2 * maxListRules

// domainRules is the prefix of a group's domain-name rules (see above), in evaluation order;
// local is an endpoint of the group. A rule with returns set is a Deny's or a Pass's: it
// returns from the prefix's chain. Without a held policy naming a domain it walks nothing.
func (s *State) domainRules(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool) []listRule {
	if s.domainPolicies == 0 {
		return nil
	}
	var out []listRule
	denied := false // a Deny or a Pass is in the prefix: later rules are written out, Allow or not
	last := 0       // the prefix up to the last domain-name rule
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			peer, localSide := r.Dst, r.Src
			if dir == model.Ingress {
				peer, localSide = r.Src, r.Dst
			}
			switch {
			case localSide.DomainName != "" || offFamily(r.Rule, is4) || r.Action == model.ActionLog && !s.logs:
				continue // matches nothing here
			case peer.DomainName != "" && r.Action != model.ActionAllow:
				continue // not in the API: matches nothing (neverMatches)
			case (r.Action == model.ActionDeny || r.Action == model.ActionPass) && peer.DomainName == "":
				denied = true
			case r.Action != model.ActionAllow:
				return out[:last] // a Log rule: the prefix cannot evaluate it in order
			case peer.DomainName == "" && !denied:
				continue // the shape accepts what it matches anyway
			}
			lrs, ok := s.listRules(dir, r.Rule, local, is4, r.reason()+" ("+r.Action.String()+")")
			if !ok || len(out)+len(lrs) > maxDomainPrefix {
				return out[:last]
			}
			for _, lr := range lrs {
				lr.domain = peer.DomainName
				lr.returns = r.Action != model.ActionAllow
				out = append(out, lr)
			}
			if peer.DomainName != "" {
				last = len(out)
			}
		}
		if o := tierDefault(t); o.Verdict != 0 {
			break
		}
	}
	return out[:last]
}

// namesDomain reports whether a policy has a rule with a domain name.
func namesDomain(p *dataplane.PolicyUpdated) bool {
	for _, rules := range [][]dataplane.Rule{p.Ingress, p.Egress} {
		for i := range rules {
			if rules[i].Src.DomainName != "" || rules[i].Dst.DomainName != "" {
				return true
			}
		}
	}
	return false
}

// countDomains keeps State.domainPolicies as policy old (nil: none) becomes new (nil: removed).
func (s *State) countDomains(old, new *dataplane.PolicyUpdated) {
	if old != nil && namesDomain(old) {
		s.domainPolicies--
	}
	if new != nil && namesDomain(new) {
		s.domainPolicies++
	}
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

// DomainSets names the sets of pattern's addresses, IPv4's and IPv6's, as the table declares
// them while a rule uses the pattern.
func DomainSets(pattern string) (v4, v6 string) {
	return dataplane.DomainSetName(pattern, true), dataplane.DomainSetName(pattern, false)
}
