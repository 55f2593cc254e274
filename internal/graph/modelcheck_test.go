package graph_test

import (
	"cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// world is the final state of a scenario's objects, read as Calico's semantics read them: the
// oracle of TestIngressMatchesModel. It evaluates the model directly (selectors over labels,
// with the automatic ones, scopes, network sets), independently of the graph's matchers,
// sets and rule alternatives.
type world struct {
	namespaces map[string]model.Namespace
	accounts   map[[2]string]model.ServiceAccount
	endpoints  []model.Endpoint
	netSets    []model.NetworkSet
	policies   []model.Policy
	tiers      map[string]model.Tier
}

func newWorld(ups []model.Update) *world {
	w := &world{namespaces: map[string]model.Namespace{}, accounts: map[[2]string]model.ServiceAccount{}, tiers: map[string]model.Tier{}}
	for _, t := range model.DefaultTiers() {
		w.tiers[t.Name] = t
	}
	for _, u := range ups {
		switch u := u.(type) {
		case model.NamespaceSet:
			w.namespaces[u.Namespace.Name] = u.Namespace
		case model.ServiceAccountSet:
			w.accounts[[2]string{u.ServiceAccount.Namespace, u.ServiceAccount.Name}] = u.ServiceAccount
		case model.EndpointSet:
			w.endpoints = append(w.endpoints, u.Endpoint)
		case model.NetworkSetSet:
			w.netSets = append(w.netSets, u.NetworkSet)
		case model.PolicySet:
			w.policies = append(w.policies, u.Policy)
		case model.TierSet:
			w.tiers[u.Tier.Name] = u.Tier
		}
	}
	return w
}

// labels is a label set with Calico's automatic labels over the stored ones.
type labels struct {
	stored model.Labels
	auto   map[string]string
}

func (l labels) Get(k string) (string, bool) {
	if v, ok := l.auto[k]; ok {
		return v, true
	}
	if k == "projectcalico.org/namespace" || k == "projectcalico.org/orchestrator" || k == "projectcalico.org/serviceaccount" {
		return "", false
	}
	return l.stored.Get(k)
}

func (w *world) endpointLabels(e *model.Endpoint) labels {
	auto := map[string]string{"projectcalico.org/namespace": e.Key.Namespace, "projectcalico.org/orchestrator": "k8s"}
	if e.ServiceAccount != "" {
		auto["projectcalico.org/serviceaccount"] = e.ServiceAccount
	}
	return labels{stored: e.Labels, auto: auto}
}

// namespaceLabels are a namespace's labels, projectcalico.org/name included; none while its
// object is unknown.
func (w *world) namespaceLabels(name string) selector.Labels {
	ns, ok := w.namespaces[name]
	return named(name, ns.Labels, ok)
}

// accountLabels are a service account's labels, projectcalico.org/name included; none while
// its object is unknown.
func (w *world) accountLabels(ns, name string) selector.Labels {
	sa, ok := w.accounts[[2]string{ns, name}]
	return named(name, sa.Labels, ok && name != "")
}

// named is an object's labels with its automatic projectcalico.org/name (none unless exists).
func named(name string, stored map[string]string, exists bool) selector.Map {
	if !exists {
		return selector.Map{}
	}
	m := selector.Map{"projectcalico.org/name": name}
	for k, v := range stored {
		if k != "projectcalico.org/name" {
			m[k] = v
		}
	}
	return m
}

// sel parses s ("" is nil); ok is false for an invalid selector.
func sel(s string) (*selector.Selector, bool) {
	if s == "" {
		return nil, true
	}
	x, err := selector.Parse(s)
	return x, err == nil
}

func evaluates(x *selector.Selector, l selector.Labels) bool { return x == nil || x.Evaluate(l) }

// entity is a pod or a network set, as a peer's selectors see it.
type entity struct {
	pod       bool
	namespace string // "" for a cluster-scoped network set
	labels    selector.Labels
	account   string
}

// peerValid reports whether every selector of the peer parses.
func peerValid(p *model.Peer) bool {
	for _, s := range []string{p.Selector, p.NamespaceSelector, p.ServiceAccountSelector, p.NotSelector} {
		if _, ok := sel(s); !ok {
			return false
		}
	}
	return true
}

// picks reports whether peer p of a rule of pol picks x by its positive selectors (Calico's
// rules.go: a namespaced policy's peer without a namespace selector is scoped to its
// namespace; global() to cluster-scoped objects; a namespace selector to namespaced ones).
func (w *world) picks(pol *model.Policy, p *model.Peer, x entity) bool {
	s, _ := sel(p.Selector)
	ns, _ := sel(p.NamespaceSelector)
	sa, _ := sel(p.ServiceAccountSelector)
	if !x.pod && (!p.NetworkSets || p.ServiceAccountSelector != "") {
		return false
	}
	switch {
	case p.Global:
		if x.namespace != "" {
			return false
		}
	case p.NamespaceSelector != "":
		if x.namespace == "" || !evaluates(ns, w.namespaceLabels(x.namespace)) {
			return false
		}
	case pol.Namespace != "":
		if x.namespace != pol.Namespace {
			return false
		}
	}
	if p.ServiceAccountSelector != "" && !evaluates(sa, w.accountLabels(x.namespace, x.account)) {
		return false
	}
	return evaluates(s, x.labels)
}

// entitiesAt yields the pods holding a and the network sets containing it.
func (w *world) entitiesAt(a netip.Addr) []entity {
	var out []entity
	for i := range w.endpoints {
		e := &w.endpoints[i]
		if slices.Contains(e.Addrs, a) {
			out = append(out, entity{pod: true, namespace: e.Key.Namespace, labels: w.endpointLabels(e), account: e.ServiceAccount})
		}
	}
	for _, n := range w.netSets {
		if slices.ContainsFunc(n.Nets, func(p netip.Prefix) bool { return p.Contains(a) }) {
			l := labels{stored: n.Labels, auto: map[string]string{}}
			if n.Key.Namespace != "" {
				l.auto["projectcalico.org/namespace"] = n.Key.Namespace
			}
			out = append(out, entity{namespace: n.Key.Namespace, labels: l})
		}
	}
	return out
}

// peerMatches reports whether address a matches peer p of a rule of pol, apart from ports.
func (w *world) peerMatches(pol *model.Policy, p *model.Peer, a netip.Addr) bool {
	in := func(ps []netip.Prefix) bool {
		return slices.ContainsFunc(ps, func(q netip.Prefix) bool { return q.Contains(a) })
	}
	if len(p.Nets) > 0 && !in(p.Nets) || in(p.NotNets) {
		return false
	}
	at := w.entitiesAt(a)
	positive := p.Selector != "" || p.NamespaceSelector != "" || p.ServiceAccountSelector != "" || p.Global ||
		(p.NotSelector != "" && pol.Namespace != "")
	if positive && !slices.ContainsFunc(at, func(x entity) bool { return w.picks(pol, p, x) }) {
		return false
	}
	if not, _ := sel(p.NotSelector); not != nil || p.NotSelector != "" {
		for _, x := range at {
			if (x.pod || p.NetworkSets) && evaluates(not, x.labels) {
				return false
			}
		}
	}
	return true
}

// portMatches reports whether the destination port matches a peer's ports on endpoint e (the
// destination); genScenario puts no excluded ports.
func portMatches(r *model.Rule, e *model.Endpoint, proto model.Protocol, port uint16) bool {
	if len(r.Destination.Ports) == 0 {
		return true
	}
	if proto != model.ProtocolTCP && proto != model.ProtocolUDP {
		return false
	}
	for _, p := range r.Destination.Ports {
		if p.Name == "" && p.First <= port && port <= max(p.Last, p.First) {
			return true
		}
		for _, np := range e.NamedPorts {
			if p.Name != "" && np.Name == p.Name && np.Protocol == proto && np.Port == port &&
				(r.Protocol == model.ProtocolAny || r.Protocol == np.Protocol) {
				return true
			}
		}
	}
	return false
}

// selects reports whether pol applies to e's ingress.
func (w *world) selects(pol *model.Policy, e *model.Endpoint) bool {
	s, ok := sel(pol.Selector)
	ns, nsOK := sel(pol.NamespaceSelector)
	sa, saOK := sel(pol.ServiceAccountSelector)
	if !ok || !nsOK || !saOK {
		return false
	}
	if pol.Namespace != "" && e.Key.Namespace != pol.Namespace {
		return false
	}
	if pol.ServiceAccountSelector != "" && !evaluates(sa, w.accountLabels(e.Key.Namespace, e.ServiceAccount)) {
		return false
	}
	return pol.ApplyIngress && evaluates(s, w.endpointLabels(e)) && evaluates(ns, w.namespaceLabels(e.Key.Namespace))
}

// ingressAllows decides a packet from src to local endpoint e as the model says.
func (w *world) ingressAllows(e *model.Endpoint, local, src netip.Addr, proto model.Protocol, port uint16) bool {
	var tiers []model.Tier
	for _, t := range w.tiers {
		tiers = append(tiers, t)
	}
	slices.SortFunc(tiers, func(a, b model.Tier) int { return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Name, b.Name)) })
tiers:
	for _, t := range tiers {
		var pols []*model.Policy
		for i := range w.policies {
			if p := &w.policies[i]; p.Tier == t.Name && w.selects(p, e) {
				pols = append(pols, p)
			}
		}
		if len(pols) == 0 {
			continue
		}
		slices.SortFunc(pols, func(a, b *model.Policy) int {
			return cmp.Or(cmp.Compare(a.Order, b.Order), cmp.Compare(a.Key.String(), b.Key.String()))
		})
		for _, p := range pols {
			for i := range p.IngressRules {
				r := &p.IngressRules[i]
				if !peerValid(&r.Source) || !peerValid(&r.Destination) {
					continue
				}
				if r.Protocol != model.ProtocolAny && r.Protocol != proto {
					continue
				}
				if !w.peerMatches(p, &r.Source, src) || !w.peerMatches(p, &r.Destination, local) || !portMatches(r, e, proto, port) {
					continue
				}
				switch r.Action {
				case model.ActionAllow, model.ActionDeny:
					return r.Action == model.ActionAllow
				case model.ActionPass:
					continue tiers
				}
			}
		}
		if t.DefaultAction == model.ActionAllow || t.DefaultAction == model.ActionDeny {
			return t.DefaultAction == model.ActionAllow
		}
	}
	return true
}

// TestIngressMatchesModel: for genScenario's final states, the graph's output judged by the
// reference evaluator (graphtest.Evaluate) gives every packet to a local endpoint the verdict
// Calico's semantics give it over the model's objects — pods, network sets, notSelector,
// global(), automatic labels — for every source address that no two pods hold (a contested
// address is judged by the set polarities, TestSharedAddress).
func TestIngressMatchesModel(t *testing.T) {
	probes := []netip.Addr{netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("8.8.8.8"),
		netip.MustParseAddr("10.0.0.200"), netip.MustParseAddr("fd00::5"), netip.MustParseAddr("fd00::99")}
	for i := range 12 {
		probes = append(probes, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
	}
	checked := 0
	for seed := range 60 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		sc := genScenario(r)
		final := sc.squashed()
		st := replay(t, final, 0, 1<<30)
		w := newWorld(final)
		holders := func(a netip.Addr) int {
			n := 0
			for _, e := range w.endpoints {
				if slices.Contains(e.Addrs, a) {
					n++
				}
			}
			return n
		}
		for i := range w.endpoints {
			e := &w.endpoints[i]
			if e.Node != node {
				continue
			}
			msg, ok := st.Endpoints[e.Key]
			if !ok {
				t.Fatalf("seed %d: local endpoint %v not in the state", seed, e.Key)
			}
			for _, local := range msg.Addrs {
				if holders(local) != 1 {
					continue
				}
				for _, src := range probes {
					if holders(src) > 1 || src.Is4() != local.Is4() {
						continue
					}
					for _, pp := range []struct {
						proto model.Protocol
						port  uint16
					}{{model.ProtocolTCP, 8001}, {model.ProtocolTCP, 9}, {model.ProtocolUDP, 53}} {
						want := w.ingressAllows(e, local, src, pp.proto, pp.port)
						got := st.Decide(model.Ingress, msg.Ingress, graphtest.Packet{Src: src, Dst: local, Proto: pp.proto, DstPort: pp.port})
						if got != want {
							t.Fatalf("seed %d: %v → %v (%v) %v:%d: graph allows %v, the model %v\nstate:\n%s", seed, src, e.Key, local, pp.proto, pp.port, got, want, st.Dump())
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d packets checked", checked)
	}
}
