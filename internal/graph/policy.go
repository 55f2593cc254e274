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
	// pickers: some peer of its rules picks network sets (selector or notSelector)
	pickers bool
	// capped are the problems of its last compile: peers whose network sets expand to more
	// than MaxPeerNets nets
	capped []Problem

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
	src, dst side
	bad      bool
	index    int
}

// side is what one peer of a rule picks, parsed. The peer matches an address that one of its
// alternatives matches — an endpoint eps picks (unless noEps), or a net of a network set nets
// picks — and that neither an endpoint not picks nor a net of a network set notNets picks
// holds.
type side struct {
	// eps are the endpoints the peer picks; nil: every address, unless noEps.
	eps *spec
	// noEps: the peer picks no endpoint (global()): only network sets, if any.
	noEps bool
	// nets are the network sets it picks (nil: none).
	nets *netPick
	// not and notNets are what its notSelector picks: endpoints and network sets (nil: none).
	not     *spec
	notNets *netPick
}

// picksNets reports whether the side picks network sets, positively or by its notSelector.
func (sd *side) picksNets() bool { return sd.nets != nil || sd.notNets != nil }

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
	// pickers are the policies some peer of which picks network sets (policy.pickers)
	pickers map[*policy]struct{}
}

// policyIndex is what the active policies ask the label index.
type policyIndex interface {
	acquireMatcher(spec) *matcher
	releaseMatcher(*matcher)
	membersOf(*matcher) members
	appendPickedNets(dst []netip.Prefix, p *netPick) []netip.Prefix
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
		policies: map[model.PolicyKey]*policy{}, tiers: map[string]model.Tier{}, pickers: map[*policy]struct{}{}}
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

// onNetSet recompiles the active policies a peer of which picks the network set as it was or
// as it is now: their rules hold its nets. The cost is a test of each peer that picks network
// sets against the set, and a compile of each policy that picks it (network sets change
// rarely); its nets reach the dataplane in those policies' PolicyUpdated.
func (ap *activePolicies) onNetSet(old, now *netSet) {
	for p := range ap.pickers {
		if p.active && !p.stale && (p.picksNetSet(old) || p.picksNetSet(now)) {
			ap.restale(p)
		}
	}
}

// onNetSetNamespace recompiles the active policies a peer of which picks network sets by
// namespace selector: the namespace's labels changed, and it holds network sets.
func (ap *activePolicies) onNetSetNamespace(*namespace) {
	for p := range ap.pickers {
		if p.active && !p.stale && p.picksByNamespace() {
			ap.restale(p)
		}
	}
}

// restale queues p to be compiled again.
func (ap *activePolicies) restale(p *policy) {
	p.stale = true
	ap.enqueue(p)
}

// picksNetSet reports whether a peer of p's rules picks n (nil: none does).
func (p *policy) picksNetSet(n *netSet) bool {
	return n != nil && p.anySide(func(sd *side) bool {
		return (sd.nets != nil && sd.nets.picks(n)) || (sd.notNets != nil && sd.notNets.picks(n))
	})
}

// picksByNamespace reports whether a peer of p's rules picks network sets by namespace
// selector.
func (p *policy) picksByNamespace() bool {
	return p.anySide(func(sd *side) bool { return sd.nets != nil && sd.nets.namespaced })
}

// anySide reports whether f holds for a side of one of p's rules.
func (p *policy) anySide(f func(*side) bool) bool {
	for d := range p.rules {
		for i := range p.rules[d] {
			if pr := &p.rules[d][i]; f(&pr.src) || f(&pr.dst) {
				return true
			}
		}
	}
	return false
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
		out = append(out, p.capped...)
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

// preparePeer parses a peer's selectors into what it picks (see side and the package
// comment for the scopes):
//   - a peer with a selector, namespace selector or service-account selector picks endpoints;
//     a namespaced policy's peer without a namespace selector picks only its namespace's, and
//     so does one with only a notSelector (Felix scopes the positive part of such a peer to
//     the policy's namespace, libcalico-go's updateprocessors/rules.go); a global() peer picks
//     none;
//   - with NetworkSets and no service-account selector, the same selectors pick network sets
//     (netPick);
//   - a notSelector is not scoped: it excludes the endpoints (and, with NetworkSets, network
//     sets) of every namespace, cluster-scoped sets included, that its labels pick.
func preparePeer(pol *model.Policy, peer *model.Peer) (side, error) {
	var sd side
	sel, err := parseOpt(peer.Selector)
	if err != nil {
		return sd, err
	}
	nsSel, err := parseOpt(peer.NamespaceSelector)
	if err != nil {
		return sd, err
	}
	saSel, err := parseOpt(peer.ServiceAccountSelector)
	if err != nil {
		return sd, err
	}
	netSets := peer.NetworkSets && peer.ServiceAccountSelector == ""
	switch {
	case peer.Global:
		sd.noEps = true
		if netSets {
			sd.nets = &netPick{ep: sel, global: true}
		}
	case peer.HasEndpointMatch() || (peer.NotSelector != "" && pol.Namespace != ""):
		sp := spec{ep: sel, ns: nsSel, sa: saSel}
		if pol.Namespace != "" && peer.NamespaceSelector == "" {
			sp.scope = pol.Namespace
		}
		sp.hosts = peer.NetworkSets && sp.scope == "" && peer.NamespaceSelector == "" && peer.ServiceAccountSelector == ""
		sd.eps = &sp
		if netSets {
			sd.nets = &netPick{ep: sel, ns: nsSel, scope: sp.scope, namespaced: peer.NamespaceSelector != ""}
		}
	}
	if peer.NotSelector != "" {
		notSel, err := parseOpt(peer.NotSelector)
		if err != nil {
			return sd, err
		}
		sd.not = &spec{ep: notSel, hosts: peer.NetworkSets}
		if peer.NetworkSets {
			sd.notNets = &netPick{ep: notSel}
		}
	}
	return sd, nil
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
	endpointsChanged := old.Tier != mp.Tier || old.Order != mp.Order || old.ApplyIngress != mp.ApplyIngress || old.ApplyEgress != mp.ApplyEgress ||
		old.ApplyOnForward != mp.ApplyOnForward || old.PreDNAT != mp.PreDNAT || old.DoNotTrack != mp.DoNotTrack
	sp, valid := p.appliedTo()
	ap.selectMatcher(p, sp, valid, endpointsChanged)
	p.prepare()
	if p.pickers {
		ap.pickers[p] = struct{}{}
	} else {
		delete(ap.pickers, p)
	}
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
	saSel, saErr := parseOpt(mp.ServiceAccountSelector)
	if saErr != nil {
		p.problems = append(p.problems, Problem{Object: obj, Message: "invalid service account selector " + quote(mp.ServiceAccountSelector) + ": " + saErr.Error() + ": policy selects nothing"})
	}
	if err != nil || nsErr != nil || saErr != nil {
		return spec{}, false
	}
	return spec{ep: normSel(sel), ns: nsSel, sa: saSel, scope: mp.Namespace,
		hosts: mp.Hosts && mp.Namespace == "" && mp.NamespaceSelector == "" && mp.ServiceAccountSelector == ""}, true
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
	p.pickers = false
	for d, rules := range [2][]model.Rule{mp.IngressRules, mp.EgressRules} {
		for i := range rules {
			r := &rules[i]
			pr := prepared{r: r, index: i}
			var err error
			if pr.src, err = preparePeer(mp, &r.Source); err == nil {
				pr.dst, err = preparePeer(mp, &r.Destination)
			}
			p.pickers = p.pickers || pr.src.picksNets() || pr.dst.picksNets()
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
	delete(ap.pickers, p)
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
	p.refs, p.ingress, p.egress, p.capped = nil, nil, nil, nil
}

// acquireFunc acquires a set for a compiled rule.
type acquireFunc func(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) dataplane.SetID

// MaxPeerNets bounds the nets that the network sets one peer picks expand to, in one rule
// alternative (its Nets) and in its NotNets: a compiled rule holds at most that many (plus
// the peer's own) per side, whatever the network sets hold. Over it, the peer is a problem
// and its rule fails safe (capNets).
const MaxPeerNets = 10000

func (ap *activePolicies) compile(p *policy) {
	var refs []*set
	acquire := func(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) dataplane.SetID {
		s := ap.sets.acquireSet(sp, kind, port, proto, pol)
		refs = append(refs, s)
		return s.id
	}
	c := ruleCompiler{p: p, acquire: acquire, index: ap.index}
	p.capped = nil
	var out [2][]dataplane.Rule
	for d := range p.rules {
		dir := model.Direction(d)
		if (dir == model.Ingress && !p.m.ApplyIngress) || (dir == model.Egress && !p.m.ApplyEgress) {
			continue
		}
		for i := range p.rules[d] {
			if pr := &p.rules[d][i]; !pr.bad {
				out[d] = c.rule(out[d], dir, pr)
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

// ruleCompiler compiles the rules of one policy: it acquires the sets they refer to and
// picks the nets of the network sets their peers pick.
type ruleCompiler struct {
	p       *policy
	acquire acquireFunc
	index   policyIndex
}

// rule appends the compiled alternatives of pr to out. A rule is one dataplane rule, but for
// a peer that picks network sets: its rule is one rule per alternative of each side (the
// endpoints its selectors pick; the nets of the network sets they pick), all with the rule's
// action, Index and Comment, consecutive, so that the rule matches iff one of them does and
// first-match order is kept. A side with no alternative (a global() peer that picks no
// network set) makes the rule match nothing: it is left out.
func (c *ruleCompiler) rule(out []dataplane.Rule, dir model.Direction, pr *prepared) []dataplane.Rule {
	p := c.p
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
	what := dir.String() + " rule " + strconv.Itoa(pr.index)
	srcPlan, srcOK := c.plan(&r.Source, &pr.src, dir == model.Egress, r, what+" source")
	dstPlan, dstOK := c.plan(&r.Destination, &pr.dst, dir == model.Ingress, r, what+" destination")
	if !srcOK || !dstOK {
		return out
	}
	srcs, ns := c.side(&r.Source, &pr.src, &srcPlan, dir == model.Egress, r)
	dsts, nd := c.side(&r.Destination, &pr.dst, &dstPlan, dir == model.Ingress, r)
	for _, src := range byDomainName(srcs[:ns], r.Source.DomainNames) {
		for _, dst := range byDomainName(dsts[:nd], r.Destination.DomainNames) {
			alt := cr
			alt.ICMP, alt.NotICMP = copyICMP(r.ICMP), copyICMP(r.NotICMP)
			alt.Src, alt.Dst = src, dst
			out = append(out, alt)
		}
	}
	return out
}

// byDomainName is a side's alternatives for a peer's domainNames patterns (sorted and distinct,
// as model.Peer.DomainNames holds them): each alternative once per pattern, restricted to it,
// so that the side matches an address of any pattern; alts as they are when there is none.
func byDomainName(alts []dataplane.Match, patterns []string) []dataplane.Match {
	if len(patterns) == 0 {
		return alts
	}
	out := make([]dataplane.Match, 0, len(alts)*len(patterns))
	for _, a := range alts {
		for _, p := range patterns {
			a.DomainName = p
			out = append(out, a)
		}
	}
	return out
}

// sidePlan is what one side of a rule matches, before any set is acquired: whether it has
// the endpoints' alternative, the nets of its network sets' alternative (nil: none) and its
// NotNets.
type sidePlan struct {
	eps     bool
	picked  []netip.Prefix
	notNets []netip.Prefix
}

// plan picks the network sets of one side of a rule (see rule); ok is false when the side
// matches nothing, so that no set is acquired for a rule left out.
func (c *ruleCompiler) plan(peer *model.Peer, sd *side, localSide bool, r *model.Rule, what string) (pl sidePlan, ok bool) {
	restricts := r.Action == model.ActionDeny || r.Action == model.ActionPass
	pl.eps = !sd.noEps
	pl.notNets = NormalizePrefixes(peer.NotNets)
	if sd.notNets != nil {
		notNets, ok := c.capNets(c.index.appendPickedNets(nil, sd.notNets), restricts, what+" notSelector")
		if !ok {
			return pl, false // an allow whose exclusions cannot all be compiled matches nothing
		}
		if len(notNets) > 0 {
			pl.notNets = NormalizePrefixes(append(notNets, pl.notNets...))
		}
	}
	if sd.noEps && !localSide && len(peer.Ports) > 0 && !slices.ContainsFunc(peer.Ports, func(pt model.Port) bool { return pt.Name == "" }) {
		return pl, false // only named ports, of endpoints the peer does not pick
	}
	if sd.nets != nil {
		picked, ok := c.capNets(c.index.appendPickedNets(nil, sd.nets), restricts, what+" selector")
		if ok && len(peer.Nets) > 0 {
			picked = IntersectPrefixes(picked, NormalizePrefixes(peer.Nets))
		}
		if ok {
			pl.picked = picked
		}
	}
	return pl, pl.eps || len(pl.picked) > 0
}

// side compiles one side of a rule, as planned, into its n alternatives (see rule). Each set it
// refers to has the polarity of its use (setPolarity): Sets and NamedPortSets are used
// positively, NotSets and NotNamedPortSets negated.
func (c *ruleCompiler) side(peer *model.Peer, sd *side, pl *sidePlan, localSide bool, r *model.Rule) (alts [2]dataplane.Match, n int) {
	var base dataplane.Match
	if sd.not != nil {
		base.NotSets = []dataplane.SetID{c.acquire(*sd.not, dataplane.SetAddrs, "", 0, setPolarity(r.Action, true))}
	}
	base.NotNets = pl.notNets
	portSpec := spec{} // a peer with no endpoint match: named ports of every endpoint
	switch {
	case localSide:
		portSpec = c.p.selSpec
	case sd.eps != nil:
		portSpec = *sd.eps
	}
	noPorts := sd.noEps && !localSide // named ports of the peer's endpoints: there are none
	ports := func(in []model.Port, pol polarity) (nums []model.Port, named []dataplane.SetID) {
		for _, pt := range in {
			switch {
			case pt.Name == "":
				if pt.Last < pt.First {
					pt.Last = pt.First
				}
				nums = append(nums, pt)
			case !noPorts:
				named = append(named, c.acquire(portSpec, dataplane.SetNamedPorts, pt.Name, r.Protocol, pol))
			}
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
	base.Ports, base.NamedPortSets = ports(peer.Ports, setPolarity(r.Action, false))
	base.NotPorts, base.NotNamedPortSets = ports(peer.NotPorts, setPolarity(r.Action, true))

	if pl.eps {
		alts[n] = base
		if sd.eps != nil {
			alts[n].Sets = []dataplane.SetID{c.acquire(*sd.eps, dataplane.SetAddrs, "", 0, setPolarity(r.Action, false))}
		}
		alts[n].Nets = NormalizePrefixes(peer.Nets)
		n++
	}
	if len(pl.picked) > 0 {
		alts[n] = base
		alts[n].Nets = pl.picked
		n++
	}
	return alts, n
}

// capNets normalises the nets of the network sets a peer picks and bounds them by
// MaxPeerNets. Over the bound the peer is a problem of the policy, and the nets fail safe by
// the rule's action: a Deny or Pass rule (restricts) keeps the first MaxPeerNets, so it
// restricts as much as it can; an Allow or Log rule gets ok false, and the caller makes the
// use match nothing, so it never allows more than written.
func (c *ruleCompiler) capNets(nets []netip.Prefix, restricts bool, what string) ([]netip.Prefix, bool) {
	if len(nets) <= MaxPeerNets {
		return NormalizePrefixes(nets), true
	}
	nets = NormalizePrefixes(nets)
	if len(nets) <= MaxPeerNets {
		return nets, true
	}
	outcome := "the rule uses none of them"
	if restricts {
		outcome = "the rule uses the first " + strconv.Itoa(MaxPeerNets)
	}
	c.p.capped = append(c.p.capped, Problem{Object: c.p.key.String(),
		Message: what + " picks network sets of " + strconv.Itoa(len(nets)) + " nets, more than " + strconv.Itoa(MaxPeerNets) + ": " + outcome})
	if restricts {
		return nets[:MaxPeerNets], true
	}
	return nil, false
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

// IntersectPrefixes returns the addresses in both a and b as prefixes; a and b must be
// normalised (NormalizePrefixes), and so is the result. Two prefixes overlap only when one
// holds the other, so one merge of the two sorted lists finds every overlap: O(len(a) + len(b)).
func IntersectPrefixes(a, b []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for i, j := 0, 0; i < len(a) && j < len(b); {
		x, y := a[i], b[j]
		switch {
		case x.Overlaps(y) && x.Bits() >= y.Bits():
			out = append(out, x)
			i++
		case x.Overlaps(y):
			out = append(out, y)
			j++
		case x.Addr().Compare(y.Addr()) < 0:
			i++
		default:
			j++
		}
	}
	return out
}
