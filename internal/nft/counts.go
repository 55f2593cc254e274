package nft

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

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

// policyTiers holds each policy's key and tier by its key's String: what ReasonOrigin reads on
// any goroutine, while the builder's goroutine stores and deletes.
type policyTiers struct{ m sync.Map }

func (p *policyTiers) store(k model.PolicyKey, tier string) {
	p.m.Store(k.String(), policyTier{k, tier})
}
func (p *policyTiers) delete(k model.PolicyKey) { p.m.Delete(k.String()) }

// ReasonOrigin reads what a reason the compiler wrote names, without the endpoint's tiers at
// hand: a policy's rule ("<policy> <direction> rule <i>[ (<rule name>)] (<action>)", or for a
// rule labelled by its converter "<policy> <tier> priority <p> <direction> rule <i>[ (<rule
// name>)] (<action>)", whose index is then the API rule's; the tier from the policies the
// dataplane holds), a tier default ("tier <tier> default <verdict>: …"), a
// rejected policy, or nothing known (OriginUnknown: no tier decided, the anti-spoofing and
// fail-closed drops, a policy the dataplane no longer holds). Policies lists none. Safe for
// concurrent use.
func (b *Builder) ReasonOrigin(reason string) Origin { return b.policyTiers.reasonOrigin(reason) }

func (p *policyTiers) reasonOrigin(reason string) Origin {
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
	v, ok := p.m.Load(name)
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
	case strings.HasSuffix(rest, "(log)"):
		o.Action = model.ActionLog
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

// Counted names what the kernel counts in a committed table: its deny chains and the reason
// each counts and, with CountAllowed, the chains with counting accept rules and the counting
// sets. Builder.Counted takes it from the desired table once it is committed; it does not change
// after, so a reader of the kernel's counters uses it on any goroutine, during later applies too.
type Counted struct {
	table     string
	reasons   map[string]string   // deny chain → reason (its comment)
	full      map[string]string   // deny chain → reason, whole
	logged    map[string]string   // log prefix of a log chain's rule → the Log rule's reason
	logChains map[string]struct{} // the log chains whose rules' prefixes logged holds
	// the chains with counting accept rules and the counting sets (with CountAllowed)
	countChains, countSets []string
	counting               map[string]struct{} // countChains and countSets by name
	tiers                  *policyTiers        // what the reasons name
}

// Counted names the deny chains and counting objects of the desired table: call it once the
// table is committed. It returns the snapshot it returned last unless a chain or set put or
// dropped since is one that snapshot names or one it would name now (countedStale): a commit
// that changes no deny, log or counting object costs O(chains and sets it put or dropped), a
// walk of the table only the others. The snapshot equals a walk's (countAll) either way.
func (b *Builder) Counted() *Counted {
	since := b.pending.sinceCounted
	if b.counted == nil || b.countedStale(b.counted, since) {
		b.counted = b.countAll()
	}
	clear(since.Chains)
	clear(since.Sets)
	return b.counted
}

// countedStale reports whether a chain or set of since bears on c: c names it, or the table now
// holds it as a deny, log or counting object.
func (b *Builder) countedStale(c *Counted, since *ruleset.Changes) bool {
	for name := range since.Chains {
		_, deny := c.full[name]
		_, log := c.logChains[name]
		_, counting := c.counting[name]
		if deny || log || counting || b.objects.denies.held(name) || b.objects.logs.held(name) {
			return true
		}
		if ch := b.table.Chains[name]; b.opts.countAllowed && ch != nil && countsAccepts(ch) {
			return true
		}
	}
	if !b.opts.countAllowed {
		return false
	}
	for name := range since.Sets {
		_, counting := c.counting[name]
		if s := b.table.Sets[name]; counting || s != nil && s.Counter {
			return true
		}
	}
	return false
}

// countAll walks the desired table for its deny chains and counting objects.
func (b *Builder) countAll() *Counted {
	c := &Counted{table: b.table.Name, reasons: map[string]string{}, full: map[string]string{},
		logged: map[string]string{}, logChains: map[string]struct{}{}, counting: map[string]struct{}{},
		tiers: &b.policyTiers}
	for name := range b.objects.logs.keys {
		c.logChains[name] = struct{}{}
		for i, reason := range b.objects.logReasons[name] {
			c.logged[logPrefix(name, i)] = reason
		}
	}
	for name := range b.objects.denies.keys {
		if ch, ok := b.table.Chains[name]; ok {
			c.reasons[name] = ch.Comment
			c.full[name] = b.objects.denyReasons[name]
		}
	}
	if b.opts.countAllowed {
		c.countChains, c.countSets = b.counting()
		for _, name := range slices.Concat(c.countChains, c.countSets) {
			c.counting[name] = struct{}{}
		}
	}
	return c
}

// Table is the name of the committed table.
func (c *Counted) Table() string { return c.table }

// Denied sums the deny chains' counts among counts (ruleset.ReadCounts of CountingChains and
// CountingSets) per reason: packets dropped per reason, every reason of the table present.
func (c *Counted) Denied(counts []ruleset.Count) map[string]uint64 {
	out := make(map[string]uint64, len(c.reasons))
	for _, reason := range c.reasons {
		out[reason] = 0
	}
	for _, n := range counts {
		if reason, ok := c.reasons[n.Chain]; ok {
			out[reason] += n.Packets
		}
	}
	return out
}

// CountingChains are the chains whose counters Denied and PolicyPackets read: the deny chains
// and the chains with counting accept rules.
func (c *Counted) CountingChains() []string {
	return append(slices.Collect(maps.Keys(c.full)), c.countChains...)
}

// CountingSets are the sets whose elements count what they accept.
func (c *Counted) CountingSets() []string { return c.countSets }

// PolicyPackets sums the kernel's counts of the committed table (ruleset.ReadCounts of
// CountingChains and CountingSets) per PolicyCount.
func (c *Counted) PolicyPackets(counts []ruleset.Count) map[PolicyCount]uint64 {
	full := map[string]string{} // a deny chain's comment → its reason, whole
	for name, comment := range c.reasons {
		full[comment] = c.full[name]
	}
	out := map[PolicyCount]uint64{}
	for _, n := range counts {
		var verdict, reason string
		switch n.Verdict {
		case ruleset.Drop:
			verdict, reason = "deny", full[n.Comment]
		case ruleset.Accept, ruleset.VerdictNone: // an accepting rule or element, an allow set's element
			verdict, reason = "allow", n.Comment
		default:
			continue // a map element leading to a deny chain, which counts the drop
		}
		o := c.tiers.reasonOrigin(reason)
		k := PolicyCount{Tier: o.Tier, Verdict: verdict}
		if o.Kind == OriginRule || o.Kind == OriginRejected {
			k.Policy = o.Policy.String()
		}
		if o.Kind == OriginRule {
			k.Direction = o.Direction.String()
		}
		out[k] += n.Packets
	}
	return out
}

// DenyChain says what the committed table's deny chain name stands for, or, for the prefix of a
// log chain's rule, which Log rule logged (DenyInfo.Logged).
func (c *Counted) DenyChain(name string) (DenyInfo, bool) {
	reason, ok := c.full[name]
	if !ok {
		if reason, ok = c.logged[name]; ok {
			return DenyInfo{Reason: reason, Origin: c.tiers.reasonOrigin(reason), Logged: true}, true
		}
		return DenyInfo{}, false
	}
	return DenyInfo{Reason: reason, Origin: c.tiers.reasonOrigin(reason)}, true
}

// counting lists the table's chains with counting accept rules and its counting sets.
func (b *Builder) counting() (chains, sets []string) {
	for name, c := range b.table.Chains {
		if countsAccepts(c) {
			chains = append(chains, name)
		}
	}
	for name, s := range b.table.Sets {
		if s.Counter {
			sets = append(sets, name)
		}
	}
	return chains, sets
}

// countsAccepts reports whether a chain has a counting accept rule.
func countsAccepts(c *ruleset.Chain) bool {
	return slices.ContainsFunc(c.Rules, func(r ruleset.Rule) bool { return r.Counter && r.Verdict.Kind == ruleset.Accept })
}
