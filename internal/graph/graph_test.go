package graph_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

const node = "node-a"

func pod(ns, name, nodeName, addr string, labels map[string]string, ports ...model.NamedPort) model.Update {
	return model.EndpointSet{Endpoint: model.Endpoint{
		Key: model.EndpointKey{Namespace: ns, Name: name}, Node: nodeName, Labels: model.LabelsOf(labels),
		Addrs: []netip.Addr{netip.MustParseAddr(addr)}, NamedPorts: ports,
	}}
}

func nsU(name string, labels map[string]string) model.Update {
	return model.NamespaceSet{Namespace: model.Namespace{Name: name, Labels: labels}}
}

func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func tcp(port uint16) []model.Port { return []model.Port{{First: port, Last: port}} }

// run feeds updates then InSync, flushes, and returns the dataplane state.
func run(t *testing.T, ups ...model.Update) (*graph.Graph, *graphtest.State) {
	t.Helper()
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	if msgs := g.Flush(); len(msgs) != 0 {
		t.Fatalf("flush before in-sync emitted %d messages", len(msgs))
	}
	g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
	st := graphtest.NewState()
	if err := st.ApplyAll(g.Flush()); err != nil {
		t.Fatal(err)
	}
	if !st.InSync {
		t.Fatal("no InSync after first in-sync flush")
	}
	return g, st
}

func apply(t *testing.T, g *graph.Graph, st *graphtest.State, ups ...model.Update) {
	t.Helper()
	for _, u := range ups {
		g.OnUpdate(u)
	}
	if err := st.ApplyAll(g.Flush()); err != nil {
		t.Fatal(err)
	}
}

func TestNetworkPolicySemantics(t *testing.T) {
	// Cluster: namespace "x" with pods a (local), b (local), c (remote); namespace "y" with d (local).
	base := []model.Update{
		nsU("x", lbl("kubernetes.io/metadata.name", "x")),
		nsU("y", lbl("kubernetes.io/metadata.name", "y", "team", "blue")),
		pod("x", "a", node, "10.0.0.1", lbl("app", "a")),
		pod("x", "b", node, "10.0.0.2", lbl("app", "b")),
		pod("x", "c", "node-b", "10.0.1.3", lbl("app", "c")),
		pod("y", "d", node, "10.0.0.4", lbl("app", "d")),
	}
	np := func(ns, name, sel string, in, eg bool, ingress, egress []model.Rule) model.Update {
		return model.PolicySet{Policy: model.Policy{
			Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: ns, Name: name}, Tier: model.TierNetworkPolicy,
			Namespace: ns, Selector: sel, ApplyIngress: in, ApplyEgress: eg, IngressRules: ingress, EgressRules: egress}}
	}
	anp := func(tier, name string, order float64, sel string, ingress []model.Rule) model.Update {
		return model.PolicySet{Policy: model.Policy{
			Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: name}, Tier: tier, Order: order,
			Selector: sel, ApplyIngress: true, IngressRules: ingress}}
	}
	allowFrom := func(sel, nsSel string, ports []model.Port) model.Rule {
		return model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source: model.Peer{Selector: sel, NamespaceSelector: nsSel}, Destination: model.Peer{Ports: ports}}
	}
	allowTo := func(sel string, ports []model.Port) model.Rule {
		return model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{Selector: sel, Ports: ports}}
	}
	type probe struct {
		from, to string
		port     uint16
		want     bool
	}
	addr := map[string]string{"a": "10.0.0.1", "b": "10.0.0.2", "c": "10.0.1.3", "d": "10.0.0.4", "ext": "192.0.2.9"}
	tests := []struct {
		name     string
		policies []model.Update
		probes   []probe
	}{
		{"no policy: all allowed", nil, []probe{{"b", "a", 80, true}, {"c", "a", 80, true}, {"a", "ext", 443, true}}},
		{"ingress isolation of a: only b on 80",
			[]model.Update{np("x", "a-in", "app == 'a'", true, false, []model.Rule{allowFrom("app == 'b'", "", tcp(80))}, nil)},
			[]probe{{"b", "a", 80, true}, {"b", "a", 81, false}, {"c", "a", 80, false}, {"d", "a", 80, false},
				{"a", "b", 80, true}, {"a", "ext", 1, true}}},
		{"ingress isolation leaves egress open",
			[]model.Update{np("x", "a-in", "app == 'a'", true, false, nil, nil)},
			[]probe{{"b", "a", 80, false}, {"a", "b", 80, true}, {"a", "c", 80, true}}},
		{"egress isolation of a",
			[]model.Update{np("x", "a-out", "app == 'a'", false, true, nil, []model.Rule{allowTo("app == 'c'", tcp(53))})},
			[]probe{{"a", "c", 53, true}, {"a", "c", 54, false}, {"a", "b", 53, false}, {"b", "a", 80, true}}},
		{"union of two policies",
			[]model.Update{
				np("x", "p1", "app == 'a'", true, false, []model.Rule{allowFrom("app == 'b'", "", tcp(80))}, nil),
				np("x", "p2", "app == 'a'", true, false, []model.Rule{allowFrom("app == 'c'", "", tcp(443))}, nil)},
			[]probe{{"b", "a", 80, true}, {"c", "a", 443, true}, {"b", "a", 443, false}, {"c", "a", 80, false}}},
		{"namespace selector peer",
			[]model.Update{np("x", "p", "app == 'a'", true, false, []model.Rule{allowFrom("", "team == 'blue'", nil)}, nil)},
			[]probe{{"d", "a", 80, true}, {"b", "a", 80, false}}},
		{"same-node traffic needs source egress and destination ingress",
			[]model.Update{
				np("x", "a-out", "app == 'a'", false, true, nil, []model.Rule{allowTo("app == 'b'", tcp(80))}),
				np("x", "b-in", "app == 'b'", true, false, []model.Rule{allowFrom("app == 'c'", "", tcp(80))}, nil)},
			[]probe{{"a", "b", 80, false}, {"c", "b", 80, true}, {"a", "c", 80, false}}},
		{"admin deny beats namespace allow",
			[]model.Update{
				anp(model.TierAdmin, "deny-b", 1, "app == 'a'", []model.Rule{{Action: model.ActionDeny, Source: model.Peer{Selector: "app == 'b'", NamespaceSelector: "all()"}}}),
				np("x", "allow-all", "app == 'a'", true, false, []model.Rule{{Action: model.ActionAllow}}, nil)},
			[]probe{{"b", "a", 80, false}, {"c", "a", 80, true}}},
		{"admin pass defers to NetworkPolicy, baseline unreached when isolated",
			[]model.Update{
				anp(model.TierAdmin, "pass-b", 1, "app == 'a'", []model.Rule{{Action: model.ActionPass, Source: model.Peer{Selector: "app == 'b'", NamespaceSelector: "all()"}}}),
				np("x", "a-in", "app == 'a'", true, false, []model.Rule{allowFrom("app == 'c'", "", nil)}, nil),
				anp(model.TierBaseline, "base-allow-b", 1, "all()", []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'b'", NamespaceSelector: "all()"}}})},
			[]probe{{"b", "a", 80, false}, {"c", "a", 80, true}}},
		{"baseline applies to endpoints no NetworkPolicy isolates",
			[]model.Update{
				np("x", "a-in", "app == 'a'", true, false, []model.Rule{allowFrom("app == 'b'", "", nil)}, nil),
				anp(model.TierBaseline, "base-deny", 1, "all()", []model.Rule{{Action: model.ActionDeny, Source: model.Peer{Selector: "app == 'c'", NamespaceSelector: "all()"}}})},
			[]probe{{"b", "a", 80, true}, {"c", "b", 80, false}, {"c", "d", 80, false}, {"a", "b", 80, true}}},
		{"named port resolves per destination endpoint",
			[]model.Update{np("x", "a-in", "", true, false, []model.Rule{allowFrom("", "", []model.Port{{Name: "http"}})}, nil)},
			[]probe{{"c", "a", 8080, true}, {"c", "a", 80, false}, {"c", "b", 9090, true}, {"c", "b", 8080, false}}},
		{"ipBlock with except",
			[]model.Update{np("x", "a-out", "app == 'a'", false, true, nil, []model.Rule{{Action: model.ActionAllow,
				Destination: model.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, NotNets: []netip.Prefix{netip.MustParsePrefix("192.0.2.8/29")}}}})},
			[]probe{{"a", "ext", 80, false}, {"a", "b", 80, false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ups := append([]model.Update{}, base...)
			// Named ports for the named-port case: a declares http=8080, b http=9090.
			ups[2] = pod("x", "a", node, "10.0.0.1", lbl("app", "a"), model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080})
			ups[3] = pod("x", "b", node, "10.0.0.2", lbl("app", "b"), model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 9090})
			_, st := run(t, append(ups, tt.policies...)...)
			for _, p := range tt.probes {
				got := st.Allowed(graphtest.Packet{Src: netip.MustParseAddr(addr[p.from]), Dst: netip.MustParseAddr(addr[p.to]),
					Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: p.port})
				if got != p.want {
					t.Errorf("%s -> %s:%d allowed=%v, want %v\n%s", p.from, p.to, p.port, got, p.want, st.Dump())
				}
			}
		})
	}
}

// A peer's service account selector follows the account's labels: relabelling or deleting the
// account re-evaluates its endpoints, and only its own namespace's (accounts are namespaced).
func TestServiceAccountSelector(t *testing.T) {
	account := func(ns, name string, labels map[string]string) model.Update {
		return model.ServiceAccountSet{ServiceAccount: model.ServiceAccount{Namespace: ns, Name: name, Labels: labels}}
	}
	g, st := run(t,
		nsU("x", nil), nsU("y", nil),
		pod("x", "a", node, "10.0.0.1", lbl("app", "a")),
		withAccount(pod("x", "b", "node-b", "10.0.1.2", nil), "builder"),
		withAccount(pod("y", "c", "node-b", "10.0.1.3", nil), "builder"),
		account("x", "builder", lbl("team", "red")),
		account("y", "builder", lbl("team", "blue")),
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "red"}, Tier: model.TierAdmin,
			Selector: "app == 'a'", ApplyIngress: true, IngressRules: []model.Rule{
				{Action: model.ActionAllow, Source: model.Peer{NamespaceSelector: "all()", ServiceAccountSelector: "team == 'red'"}},
				{Action: model.ActionDeny}}}},
	)
	allowed := func(from string) bool {
		return st.Allowed(graphtest.Packet{Src: netip.MustParseAddr(from), Dst: netip.MustParseAddr("10.0.0.1"),
			Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: 80})
	}
	steps := []struct {
		name   string
		update model.Update
		b, c   bool // x/b's and y/c's traffic to a allowed
	}{
		{"x/builder is red", nil, true, false},
		{"y/builder turns red", account("y", "builder", lbl("team", "red")), true, true},
		{"x/builder turns blue", account("x", "builder", lbl("team", "blue")), false, true},
		{"y/builder is deleted", model.ServiceAccountDeleted{Namespace: "y", Name: "builder"}, false, false},
		{"x/builder is red again", account("x", "builder", lbl("team", "red")), true, false},
	}
	for _, s := range steps {
		if s.update != nil {
			apply(t, g, st, s.update)
		}
		if got := allowed("10.0.1.2"); got != s.b {
			t.Errorf("%s: x/b → a allowed %v, want %v\n%s", s.name, got, s.b, st.Dump())
		}
		if got := allowed("10.0.1.3"); got != s.c {
			t.Errorf("%s: y/c → a allowed %v, want %v\n%s", s.name, got, s.c, st.Dump())
		}
	}
}

// A policy's service account selector (Calico's policy serviceAccountSelector) restricts the
// endpoints it applies to, ANDed with its selector, and follows the accounts' labels: an
// endpoint comes under the policy when its account is relabelled to match and leaves it when
// the account no longer matches or is deleted; an endpoint without an account is never under it.
func TestPolicyServiceAccountSelector(t *testing.T) {
	account := func(ns, name string, labels map[string]string) model.Update {
		return model.ServiceAccountSet{ServiceAccount: model.ServiceAccount{Namespace: ns, Name: name, Labels: labels}}
	}
	g, st := run(t,
		nsU("x", nil), nsU("y", nil),
		account("x", "web", lbl("role", "front")),
		account("x", "db", lbl("role", "back")),
		account("y", "web", lbl("role", "back")),
		withAccount(pod("x", "a", node, "10.0.0.1", lbl("app", "a")), "web"),
		withAccount(pod("x", "b", node, "10.0.0.2", lbl("app", "a")), "db"),
		withAccount(pod("y", "c", node, "10.0.0.3", lbl("app", "a")), "web"),
		pod("x", "d", node, "10.0.0.4", lbl("app", "a")),
		withAccount(pod("x", "e", node, "10.0.0.5", lbl("app", "e")), "web"),
		pod("y", "src", "node-b", "10.0.1.9", nil),
		// deny-all for the endpoints of app a whose account is role front
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "front"}, Tier: model.TierNetworkPolicy,
			Selector: "app == 'a'", ServiceAccountSelector: "role == 'front'", ApplyIngress: true}},
	)
	isolated := func(to string) bool {
		return !st.Allowed(graphtest.Packet{Src: netip.MustParseAddr("10.0.1.9"), Dst: netip.MustParseAddr(to),
			Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: 80})
	}
	pods := []struct{ name, addr string }{{"x/a", "10.0.0.1"}, {"x/b", "10.0.0.2"}, {"y/c", "10.0.0.3"}, {"x/d", "10.0.0.4"}, {"x/e", "10.0.0.5"}}
	steps := []struct {
		name     string
		update   model.Update
		isolated []string
	}{
		{"x/web is front: x/a only (x/e is not app a, x/d has no account)", nil, []string{"x/a"}},
		{"y/web turns front", account("y", "web", lbl("role", "front")), []string{"x/a", "y/c"}},
		{"x/web turns back", account("x", "web", lbl("role", "back")), []string{"y/c"}},
		{"y/web is deleted", model.ServiceAccountDeleted{Namespace: "y", Name: "web"}, nil},
		{"the selector names the account", model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "front"},
			Tier: model.TierNetworkPolicy, Selector: "app == 'a'", ServiceAccountSelector: "projectcalico.org/name == 'db'", ApplyIngress: true}},
			[]string{"x/b"}},
		{"x/b's account changes to web", withAccount(pod("x", "b", node, "10.0.0.2", lbl("app", "a")), "web"), nil},
	}
	for _, s := range steps {
		if s.update != nil {
			apply(t, g, st, s.update)
		}
		for _, p := range pods {
			if got, want := isolated(p.addr), slices.Contains(s.isolated, p.name); got != want {
				t.Errorf("%s: %s isolated %v, want %v\n%s", s.name, p.name, got, want, st.Dump())
			}
		}
	}
}
