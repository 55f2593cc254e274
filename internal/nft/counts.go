package nft

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Counting what policies allow and deny. Every drop of a policy decision is counted by its deny
// chain. With Config.CountAllowed every accept is counted where it is taken, with nothing added
// to the packet's path: the accepting rules of listed groups and of class chains carry a
// counter, and the sets and maps whose elements accept (a group's allow set, a class's protocol
// and port maps) are made with Set.Counter, so the element a lookup finds counts the packet. A
// scrape reads those counters (ruleset.ReadCounts) and sums them per what decided: each
// counter's comment is the reason of its outcome, which ReasonOrigin reads.

// policyTier is a policy's key and tier, for ReasonOrigin.
type policyTier struct {
	key  model.PolicyKey
	tier string
}

// ReasonOrigin reads what a reason the compiler wrote names, without the endpoint's tiers at
// hand: a policy's rule ("<policy> <direction> rule <i>[ (<rule name>)] (<action>)", or for a
// rule labelled by its converter "<policy> <tier> priority <p> <direction> rule <i>[ (<rule
// name>)] (<action>)", whose index is then the API rule's; the tier from the policies the
// dataplane holds), a tier default ("tier <tier> default <verdict>: …"), a
// rejected policy, or nothing known (OriginUnknown: no tier decided, the anti-spoofing and
// fail-closed drops, a policy the dataplane no longer holds). Policies lists none. Safe for
// concurrent use.
func (d *Dataplane) ReasonOrigin(reason string) Origin {
	unknown := Origin{Kind: OriginUnknown}
	if rest, ok := strings.CutPrefix(reason, "tier "); ok {
		tier, rest, ok := strings.Cut(rest, " default ")
		v, _, _ := strings.Cut(rest, ":")
		if !ok {
			return unknown
		}
		o := Origin{Kind: OriginTierDefault, Tier: tier, Action: model.ActionDeny}
		if v == Allow.String() {
			o.Action = model.ActionAllow
		}
		return o
	}
	name, rest, _ := strings.Cut(reason, " ")
	v, ok := d.policyTiers.Load(name)
	if !ok {
		return unknown
	}
	pt := v.(policyTier)
	o := Origin{Kind: OriginRule, Tier: pt.tier, Policy: pt.key}
	if strings.HasPrefix(rest, "not enforced as written") {
		o.Kind, o.Action = OriginRejected, model.ActionDeny
		return o
	}
	dir, rest, _ := strings.Cut(rest, " rule ")
	if i := strings.LastIndexByte(dir, ' '); i >= 0 { // a ClusterNetworkPolicy's "<tier> priority <p> <direction>"
		dir = dir[i+1:]
	}
	index, rest, _ := strings.Cut(rest, " ")
	switch dir {
	case model.Ingress.String():
		o.Direction = model.Ingress
	case model.Egress.String():
		o.Direction = model.Egress
	default:
		return unknown
	}
	var err error
	if o.Rule, err = strconv.Atoi(index); err != nil {
		return unknown
	}
	switch {
	case strings.HasSuffix(rest, "(allow)"):
		o.Action = model.ActionAllow
	case strings.HasSuffix(rest, "(deny)"):
		o.Action = model.ActionDeny
	default:
		return unknown
	}
	return o
}

// PolicyCount is what a count is of: the policy (or tier default) that decided, and the verdict
// — the labels of nftpolicy_policy_packets_total. Tier defaults have no policy and no direction
// (one deny chain serves both directions); Verdict is "allow" or "deny".
type PolicyCount struct {
	Tier, Policy, Direction, Verdict string
}

// PolicyPackets reads the kernel's counters of the committed table — the deny chains' and, with
// CountAllowed, the accepting rules' and elements' — summed per PolicyCount. It may be called
// from any goroutine, during an apply too, on a netlink connection of its own.
func (d *Dataplane) PolicyPackets() (map[PolicyCount]uint64, error) {
	dc := d.denied.Load()
	if d.conn == nil || dc == nil {
		return nil, nil
	}
	denies := make([]string, 0, len(dc.full))
	for name := range dc.full {
		denies = append(denies, name)
	}
	counts, err := ruleset.ReadCounts(d.netnsFD, dc.table, append(denies, dc.countChains...), dc.countSets)
	if err != nil {
		return nil, fmt.Errorf("reading counters: %w", err)
	}
	full := map[string]string{} // a deny chain's comment → its reason, whole
	for name, c := range dc.reasons {
		full[c] = dc.full[name]
	}
	out := map[PolicyCount]uint64{}
	for _, c := range counts {
		var verdict, reason string
		switch c.Verdict {
		case ruleset.Drop:
			verdict, reason = "deny", full[c.Comment]
		case ruleset.Accept, ruleset.VerdictNone: // an accepting rule or element, an allow set's element
			verdict, reason = "allow", c.Comment
		default:
			continue // a map element leading to a deny chain, which counts the drop
		}
		o := d.ReasonOrigin(reason)
		k := PolicyCount{Tier: o.Tier, Verdict: verdict}
		if o.Kind == OriginRule || o.Kind == OriginRejected {
			k.Policy = o.Policy.String()
		}
		if o.Kind == OriginRule {
			k.Direction = o.Direction.String()
		}
		out[k] += c.Packets
	}
	return out, nil
}

// counting lists the table's chains with counting accept rules and its counting sets.
func (d *Dataplane) counting() (chains, sets []string) {
	for name, c := range d.table.Chains {
		if slices.ContainsFunc(c.Rules, func(r ruleset.Rule) bool { return r.Counter && r.Verdict.Kind == ruleset.Accept }) {
			chains = append(chains, name)
		}
	}
	for name, s := range d.table.Sets {
		if s.Counter {
			sets = append(sets, name)
		}
	}
	return chains, sets
}
