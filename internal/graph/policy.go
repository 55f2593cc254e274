package graph

import (
	"net/netip"
	"slices"
	"sort"
	"strconv"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// policy is the active policies' state of one policy: its applied-to matcher (acquired from
// the label index), its activity and, while active, its compiled rules and the sets they hold
// (acquired from the set calculator).
type policy struct {
	key      model.PolicyKey
	name     string // key.String(): the last criterion of the evaluation order (resolve)
	m        model.Policy
	selSpec  spec
	sel      *matcher // nil when the policy's selector is invalid: it selects nothing
	rules    [2][]prepared
	problems []Problem

	active  bool
	stale   bool // rules changed since compiled
	queued  bool
	deleted bool

	refs    []*set // sets held by the compiled rules
	ingress []dataplane.Rule
	egress  []dataplane.Rule
}

// prepared is a rule with its peer selectors parsed; bad rules (an invalid selector) match
// nothing and are left out of the compiled policy.
type prepared struct {
	r        *model.Rule // in the policy's m (a copy would be 328 bytes a rule)
	src, dst *spec
	bad      bool
	index    int
}

// activePolicies is stage 2: the policies and tiers, which policies are active (their
// selector is valid, their tier known and they select ≥ 1 local endpoint) and, while active,
// their compiled rules, which hold the sets they refer to. It asks the label index for the
// matchers of its selectors, is told of endpoint changes by the label index (and passes them
// on to the set calculator), acquires and releases sets, and tells the resolver of tier changes and the
// sequencer of changed policies and endpoints.
type activePolicies struct {
	index    policyIndex
	sets     policySets
	resolver tierListener
	changes  changes
	next     endpointListener

	policies map[model.PolicyKey]*policy
	tiers    map[string]model.Tier
	queue    []*policy // policies whose activity or rules must be re-settled
}

// policyIndex is what the active policies ask the label index.
type policyIndex interface {
	acquireMatcher(spec) *matcher
	releaseMatcher(*matcher)
	membersOf(*matcher) members
}

// policySets is what the active policies ask the set calculator.
type policySets interface {
	acquireSet(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) *set
	releaseSet(*set)
}

// tierListener is told that a tier changed: its order and default action appear in every
// local endpoint's lists.
type tierListener interface{ onTiers() }

func newActivePolicies(index policyIndex, sets policySets, changes changes) *activePolicies {
	ap := &activePolicies{index: index, sets: sets, changes: changes,
		policies: map[model.PolicyKey]*policy{}, tiers: map[string]model.Tier{}}
	for _, t := range model.DefaultTiers() {
		ap.tiers[t.Name] = t
	}
	return ap
}

func (ap *activePolicies) wire(next endpointListener, resolver tierListener) {
	ap.next, ap.resolver = next, resolver
}

// onEndpoint queues the policies whose selectors a local endpoint left or joined (their
// activity may change; the endpoint's policy lists do), then tells next.
func (ap *activePolicies) onEndpoint(e *endpoint, ch endpointChange) {
	if e.local {
		for _, ms := range [2][]*matcher{ch.left, ch.joined} {
			for _, m := range ms {
				if len(m.policies) == 0 {
					continue
				}
				ap.changes.endpointChanged(e.key())
				for p := range m.policies {
					ap.enqueue(p)
				}
			}
		}
	}
	ap.next.onEndpoint(e, ch)
}

func (ap *activePolicies) enqueue(p *policy) {
	if !p.queued {
		p.queued = true
		ap.queue = append(ap.queue, p)
	}
}

// tier returns the tier named name.
func (ap *activePolicies) tier(name string) (model.Tier, bool) {
	t, ok := ap.tiers[name]
	return t, ok
}

func (ap *activePolicies) setTier(t model.Tier, present bool) {
	if present {
		ap.tiers[t.Name] = t
	} else {
		delete(ap.tiers, t.Name)
	}
	ap.resolver.onTiers()
	for _, p := range ap.policies {
		if p.m.Tier == t.Name {
			ap.enqueue(p)
		}
	}
}

// appendSelecting appends to ps every active policy that selects e.
func (ap *activePolicies) appendSelecting(ps []*policy, e *endpoint) []*policy {
	for _, m := range e.matches.all() {
		for p := range m.policies {
			if p.active {
				ps = append(ps, p)
			}
		}
	}
	return ps
}

// message is the policy's PolicyUpdated; exists is false unless it is active.
func (ap *activePolicies) message(k model.PolicyKey, _ bool) (*dataplane.PolicyUpdated, bool) {
	p := ap.policies[k]
	if p == nil || !p.active {
		return nil, false
	}
	return &dataplane.PolicyUpdated{Key: k, Tier: p.m.Tier, Ingress: p.ingress, Egress: p.egress}, true
}

func (ap *activePolicies) problems() []Problem {
	var out []Problem
	for _, p := range ap.policies {
		out = append(out, p.problems...)
		if _, ok := ap.tiers[p.m.Tier]; !ok {
			out = append(out, Problem{Object: p.key.String(), Message: "unknown tier " + quote(p.m.Tier) + ": policy not applied"})
		}
	}
	return out
}

func parseOpt(s string) (*selector.Selector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := selector.Parse(s)
	if err != nil {
		return nil, err
	}
	return normSel(sel), nil
}

func peerSpec(pol *model.Policy, peer *model.Peer) (*spec, error) {
	if !peer.HasEndpointMatch() {
		return nil, nil
	}
	var sp spec
	var err error
	if sp.ep, err = parseOpt(peer.Selector); err != nil {
		return nil, err
	}
	if sp.ns, err = parseOpt(peer.NamespaceSelector); err != nil {
		return nil, err
	}
	if sp.sa, err = parseOpt(peer.ServiceAccountSelector); err != nil {
		return nil, err
	}
	if pol.Namespace != "" && peer.NamespaceSelector == "" {
		sp.scope = pol.Namespace
	}
	return &sp, nil
}

func (ap *activePolicies) setPolicy(mp model.Policy) {
	p := ap.policies[mp.Key]
	if p == nil {
		p = &policy{key: mp.Key, name: mp.Key.String()}
		ap.policies[mp.Key] = p
	}
	old := p.m
	p.m = mp
	p.problems = nil
	endpointsChanged := old.Tier != mp.Tier || old.Order != mp.Order || old.ApplyIngress != mp.ApplyIngress || old.ApplyEgress != mp.ApplyEgress
	sp, valid := p.appliedTo()
	ap.selectMatcher(p, sp, valid, endpointsChanged)
	p.prepare()
	p.stale = true
	ap.changes.policyChanged(p.key)
	ap.enqueue(p)
}

// appliedTo parses the policy's applied-to selectors: not valid (and a problem) when one is
// invalid.
func (p *policy) appliedTo() (sp spec, valid bool) {
	mp := &p.m
	obj := mp.Key.String()
	sel, err := selector.Parse(mp.Selector)
	if err != nil {
		p.problems = append(p.problems, Problem{Object: obj, Message: "invalid selector " + quote(mp.Selector) + ": " + err.Error() + ": policy selects nothing"})
	}
	nsSel, nsErr := parseOpt(mp.NamespaceSelector)
	if nsErr != nil {
		p.problems = append(p.problems, Problem{Object: obj, Message: "invalid namespace selector " + quote(mp.NamespaceSelector) + ": " + nsErr.Error() + ": policy selects nothing"})
	}
	if err != nil || nsErr != nil {
		return spec{}, false
	}
	return spec{ep: normSel(sel), ns: nsSel, scope: mp.Namespace}, true
}

// selectMatcher points p's selector at the matcher of newSpec (none unless valid). The local
// endpoints of the old and new matchers are re-resolved when the matcher or what their lists
// show of p (endpointsChanged) changed.
func (ap *activePolicies) selectMatcher(p *policy, newSpec spec, valid, endpointsChanged bool) {
	oldSel := p.sel
	switch {
	case !valid:
		p.sel = nil
	case oldSel != nil && oldSel.key == newSpec.key():
		oldSel.refs++ // kept; balanced by the release below
	default:
		p.sel = ap.index.acquireMatcher(newSpec)
		p.selSpec = newSpec
	}
	if oldSel != p.sel || endpointsChanged {
		if oldSel != nil {
			ap.markLocal(oldSel)
		}
		if p.sel != nil {
			ap.markLocal(p.sel)
		}
	}
	if oldSel != nil {
		delete(oldSel.policies, p)
		ap.index.releaseMatcher(oldSel)
	}
	if p.sel != nil {
		if p.sel.policies == nil {
			p.sel.policies = map[*policy]struct{}{}
		}
		p.sel.policies[p] = struct{}{}
	}
}

// prepare parses the peer selectors of p's rules; a rule with an invalid one is bad (and a
// problem).
func (p *policy) prepare() {
	mp := &p.m
	for d := range p.rules {
		p.rules[d] = p.rules[d][:0]
	}
	for d, rules := range [2][]model.Rule{mp.IngressRules, mp.EgressRules} {
		for i := range rules {
			r := &rules[i]
			pr := prepared{r: r, index: i}
			var err error
			if pr.src, err = peerSpec(mp, &r.Source); err == nil {
				pr.dst, err = peerSpec(mp, &r.Destination)
			}
			if err != nil {
				pr.bad = true
				p.problems = append(p.problems, Problem{Object: mp.Key.String(),
					Message: model.Direction(d).String() + " rule " + strconv.Itoa(i) + ": invalid selector: " + err.Error() + ": rule matches nothing"})
			}
			p.rules[d] = append(p.rules[d], pr)
		}
	}
}

func (ap *activePolicies) markLocal(m *matcher) {
	if m.local == 0 {
		return
	}
	for e := range ap.index.membersOf(m).all {
		if e.local {
			ap.changes.endpointChanged(e.key())
		}
	}
}

func (ap *activePolicies) deletePolicy(k model.PolicyKey) {
	p := ap.policies[k]
	if p == nil {
		return
	}
	p.deleted = true
	if p.sel != nil {
		ap.markLocal(p.sel)
		delete(p.sel.policies, p)
		ap.index.releaseMatcher(p.sel)
		p.sel = nil
	}
	if p.active {
		ap.releaseRules(p)
		p.active = false
	}
	delete(ap.policies, k)
	ap.changes.policyChanged(k)
}

// settle brings every queued policy's activity and compiled rules up to date; the graph calls
// it at the end of each update. Compiling before releasing keeps unchanged sets alive (no
// rescans, no remove/re-add).
func (ap *activePolicies) settle() {
	for i := 0; i < len(ap.queue); i++ {
		p := ap.queue[i]
		p.queued = false
		if p.deleted {
			continue
		}
		_, tierOK := ap.tiers[p.m.Tier]
		want := p.sel != nil && p.sel.local > 0 && tierOK
		switch {
		case want && (!p.active || p.stale):
			ap.compile(p)
			p.active = true
			ap.changes.policyChanged(p.key)
		case !want && p.active:
			ap.releaseRules(p)
			p.active = false
			ap.changes.policyChanged(p.key)
		}
		p.stale = false
	}
	clear(ap.queue)
	ap.queue = ap.queue[:0]
}

func (ap *activePolicies) releaseRules(p *policy) {
	for _, s := range p.refs {
		ap.sets.releaseSet(s)
	}
	p.refs, p.ingress, p.egress = nil, nil, nil
}

// acquireFunc acquires a set for a compiled rule.
type acquireFunc func(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) dataplane.SetID

func (ap *activePolicies) compile(p *policy) {
	var refs []*set
	acquire := func(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) dataplane.SetID {
		s := ap.sets.acquireSet(sp, kind, port, proto, pol)
		refs = append(refs, s)
		return s.id
	}
	var out [2][]dataplane.Rule
	for d := range p.rules {
		dir := model.Direction(d)
		if (dir == model.Ingress && !p.m.ApplyIngress) || (dir == model.Egress && !p.m.ApplyEgress) {
			continue
		}
		for i := range p.rules[d] {
			if pr := &p.rules[d][i]; !pr.bad {
				out[d] = append(out[d], p.compileRule(dir, pr, acquire))
			}
		}
	}
	old := p.refs
	p.refs = refs
	p.ingress, p.egress = out[model.Ingress], out[model.Egress]
	for _, s := range old {
		ap.sets.releaseSet(s)
	}
}

func (p *policy) compileRule(dir model.Direction, pr *prepared, acquire acquireFunc) dataplane.Rule {
	r := pr.r
	cr := dataplane.Rule{
		Action:      r.Action,
		Protocol:    r.Protocol,
		NotProtocol: r.NotProtocol,
		IPVersion:   r.IPVersion,
		ICMP:        copyICMP(r.ICMP),
		NotICMP:     copyICMP(r.NotICMP),
		Comment:     p.key.String() + " " + dir.String() + " rule " + strconv.Itoa(pr.index),
		Index:       pr.index,
	}
	switch {
	case r.Label != "":
		cr.Comment = p.key.String() + " " + r.Label
	case r.Name != "":
		cr.Comment += " (" + r.Name + ")"
	}
	// The local side of a rule is the destination of ingress, the source of egress:
	// named ports there resolve on the endpoints the policy selects.
	cr.Src = p.compileMatch(&r.Source, pr.src, dir == model.Egress, r.Protocol, r.Action, acquire)
	cr.Dst = p.compileMatch(&r.Destination, pr.dst, dir == model.Ingress, r.Protocol, r.Action, acquire)
	return cr
}

// compileMatch compiles one side of a rule with action. Each set it refers to has the polarity
// of its use (setPolarity): Sets and NamedPortSets are used positively, NotNamedPortSets
// negated.
func (p *policy) compileMatch(peer *model.Peer, sp *spec, localSide bool, proto model.Protocol, action model.Action, acquire acquireFunc) dataplane.Match {
	var m dataplane.Match
	if sp != nil {
		m.Sets = []dataplane.SetID{acquire(*sp, dataplane.SetAddrs, "", 0, setPolarity(action, false))}
	}
	m.Nets = NormalizePrefixes(peer.Nets)
	m.NotNets = NormalizePrefixes(peer.NotNets)
	portSpec := spec{} // a peer with no endpoint match: named ports of every endpoint
	if localSide {
		portSpec = p.selSpec
	} else if sp != nil {
		portSpec = *sp
	}
	ports := func(in []model.Port, pol polarity) ([]model.Port, []dataplane.SetID) {
		var nums []model.Port
		var named []dataplane.SetID
		for _, pt := range in {
			if pt.Name == "" {
				if pt.Last < pt.First {
					pt.Last = pt.First
				}
				nums = append(nums, pt)
				continue
			}
			named = append(named, acquire(portSpec, dataplane.SetNamedPorts, pt.Name, proto, pol))
		}
		sort.Slice(nums, func(i, j int) bool {
			if nums[i].First != nums[j].First {
				return nums[i].First < nums[j].First
			}
			return nums[i].Last < nums[j].Last
		})
		nums = slices.Compact(nums)
		slices.Sort(named)
		named = slices.Compact(named)
		return nums, named
	}
	m.Ports, m.NamedPortSets = ports(peer.Ports, setPolarity(action, false))
	m.NotPorts, m.NotNamedPortSets = ports(peer.NotPorts, setPolarity(action, true))
	return m
}

func copyICMP(m *model.ICMPMatch) *model.ICMPMatch {
	if m == nil {
		return nil
	}
	c := *m
	if m.Code != nil {
		code := *m.Code
		c.Code = &code
	}
	return &c
}

// NormalizePrefixes masks, sorts and de-duplicates prefixes and drops every prefix inside
// another; invalid prefixes are dropped. It returns nil for an empty result.
func NormalizePrefixes(in []netip.Prefix) []netip.Prefix {
	if len(in) == 0 {
		return nil
	}
	ps := make([]netip.Prefix, 0, len(in))
	for _, p := range in {
		if !p.IsValid() {
			continue
		}
		ps = append(ps, model.CanonicalPrefix(p))
	}
	sort.Slice(ps, func(i, j int) bool {
		if c := ps[i].Addr().Compare(ps[j].Addr()); c != 0 {
			return c < 0
		}
		return ps[i].Bits() < ps[j].Bits()
	})
	out := ps[:0]
	for _, p := range ps {
		if n := len(out); n > 0 {
			last := out[n-1]
			if last.Addr().BitLen() == p.Addr().BitLen() && last.Bits() <= p.Bits() && last.Contains(p.Addr()) {
				continue
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
