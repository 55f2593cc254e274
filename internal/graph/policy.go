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

// policy is the graph's state of one policy: its applied-to matcher (label index), its
// activity (active rules calculator) and, while active, its compiled rules and the sets they
// hold (rule scanner).
type policy struct {
	key      model.PolicyKey
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

func (g *Graph) enqueue(p *policy) {
	if !p.queued {
		p.queued = true
		g.queue = append(g.queue, p)
	}
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

func (g *Graph) setPolicy(mp model.Policy) {
	p := g.policies[mp.Key]
	if p == nil {
		p = &policy{key: mp.Key}
		g.policies[mp.Key] = p
	}
	old := p.m
	p.m = mp
	p.problems = nil
	obj := mp.Key.String()

	// Applied-to selector.
	var newSpec *spec
	sel, err := selector.Parse(mp.Selector)
	if err != nil {
		p.problems = append(p.problems, Problem{Object: obj, Message: "invalid selector " + quote(mp.Selector) + ": " + err.Error() + ": policy selects nothing"})
	}
	nsSel, nsErr := parseOpt(mp.NamespaceSelector)
	if nsErr != nil {
		p.problems = append(p.problems, Problem{Object: obj, Message: "invalid namespace selector " + quote(mp.NamespaceSelector) + ": " + nsErr.Error() + ": policy selects nothing"})
	}
	if err == nil && nsErr == nil {
		newSpec = &spec{ep: normSel(sel), ns: nsSel, scope: mp.Namespace}
	}
	endpointsChanged := old.Tier != mp.Tier || old.Order != mp.Order || old.ApplyIngress != mp.ApplyIngress || old.ApplyEgress != mp.ApplyEgress
	oldSel := p.sel
	switch {
	case newSpec == nil:
		p.sel = nil
	case oldSel != nil && oldSel.key == newSpec.key():
		oldSel.refs++ // kept; balanced by the release below
	default:
		p.sel = g.acquireMatcher(*newSpec)
		p.selSpec = *newSpec
	}
	if oldSel != p.sel || endpointsChanged {
		if oldSel != nil {
			g.markLocal(oldSel)
		}
		if p.sel != nil {
			g.markLocal(p.sel)
		}
	}
	if oldSel != nil {
		delete(oldSel.policies, p)
		g.releaseMatcher(oldSel)
	}
	if p.sel != nil {
		p.sel.policies[p] = struct{}{}
	}

	// Rules.
	for d := range p.rules {
		p.rules[d] = p.rules[d][:0]
	}
	for d, rules := range [2][]model.Rule{mp.IngressRules, mp.EgressRules} {
		for i := range rules {
			r := &rules[i]
			pr := prepared{r: r, index: i}
			var err error
			if pr.src, err = peerSpec(&mp, &r.Source); err == nil {
				pr.dst, err = peerSpec(&mp, &r.Destination)
			}
			if err != nil {
				pr.bad = true
				p.problems = append(p.problems, Problem{Object: obj,
					Message: model.Direction(d).String() + " rule " + strconv.Itoa(i) + ": invalid selector: " + err.Error() + ": rule matches nothing"})
			}
			p.rules[d] = append(p.rules[d], pr)
		}
	}
	p.stale = true
	g.dirtyPolicies[p.key] = struct{}{}
	g.enqueue(p)
}

func (g *Graph) markLocal(m *matcher) {
	if m.local == 0 {
		return
	}
	for e := range g.membersOf(m) {
		if e.local {
			g.dirtyEndpoints[e.key()] = struct{}{}
		}
	}
}

func (g *Graph) deletePolicy(k model.PolicyKey) {
	p := g.policies[k]
	if p == nil {
		return
	}
	p.deleted = true
	if p.sel != nil {
		g.markLocal(p.sel)
		delete(p.sel.policies, p)
		g.releaseMatcher(p.sel)
		p.sel = nil
	}
	if p.active {
		g.releaseRules(p)
		p.active = false
	}
	delete(g.policies, k)
	g.dirtyPolicies[k] = struct{}{}
}

// settle brings every queued policy's activity and compiled rules up to date. Compiling before
// releasing keeps unchanged sets alive (no rescans, no remove/re-add).
func (g *Graph) settle() {
	for i := 0; i < len(g.queue); i++ {
		p := g.queue[i]
		p.queued = false
		if p.deleted {
			continue
		}
		_, tierOK := g.tiers[p.m.Tier]
		want := p.sel != nil && p.sel.local > 0 && tierOK
		switch {
		case want && (!p.active || p.stale):
			g.compile(p)
			p.active = true
			g.dirtyPolicies[p.key] = struct{}{}
		case !want && p.active:
			g.releaseRules(p)
			p.active = false
			g.dirtyPolicies[p.key] = struct{}{}
		}
		p.stale = false
	}
	clear(g.queue)
	g.queue = g.queue[:0]
}

func (g *Graph) releaseRules(p *policy) {
	for _, s := range p.refs {
		g.releaseSet(s)
	}
	p.refs, p.ingress, p.egress = nil, nil, nil
}

func (g *Graph) compile(p *policy) {
	var refs []*set
	acquire := func(sp spec, kind dataplane.SetKind, port string, proto model.Protocol) dataplane.SetID {
		s := g.acquireSet(sp, kind, port, proto)
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
			pr := &p.rules[d][i]
			if pr.bad {
				continue
			}
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
			cr.Src = g.compileMatch(p, &r.Source, pr.src, dir == model.Egress, r.Protocol, acquire)
			cr.Dst = g.compileMatch(p, &r.Destination, pr.dst, dir == model.Ingress, r.Protocol, acquire)
			out[d] = append(out[d], cr)
		}
	}
	old := p.refs
	p.refs = refs
	p.ingress, p.egress = out[model.Ingress], out[model.Egress]
	for _, s := range old {
		g.releaseSet(s)
	}
}

func (g *Graph) compileMatch(p *policy, peer *model.Peer, sp *spec, localSide bool, proto model.Protocol,
	acquire func(spec, dataplane.SetKind, string, model.Protocol) dataplane.SetID) dataplane.Match {
	var m dataplane.Match
	if sp != nil {
		m.Sets = []dataplane.SetID{acquire(*sp, dataplane.SetAddrs, "", 0)}
	}
	m.Nets = NormalizePrefixes(peer.Nets)
	m.NotNets = NormalizePrefixes(peer.NotNets)
	portSpec := spec{} // a peer with no endpoint match: named ports of every endpoint
	if localSide {
		portSpec = p.selSpec
	} else if sp != nil {
		portSpec = *sp
	}
	ports := func(in []model.Port) ([]model.Port, []dataplane.SetID) {
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
			named = append(named, acquire(portSpec, dataplane.SetNamedPorts, pt.Name, proto))
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
	m.Ports, m.NamedPortSets = ports(peer.Ports)
	m.NotPorts, m.NotNamedPortSets = ports(peer.NotPorts)
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
