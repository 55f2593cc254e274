package graph_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

func pk(kind, ns, name string) model.PolicyKey {
	return model.PolicyKey{Kind: kind, Namespace: ns, Name: name}
}

func pol(key model.PolicyKey, tier string, order float64, sel string, in, eg bool, rules ...model.Rule) model.Update {
	return model.PolicySet{Policy: model.Policy{Key: key, Tier: tier, Order: order, Namespace: key.Namespace,
		Selector: sel, ApplyIngress: in, ApplyEgress: eg, IngressRules: rules}}
}

// Resolver: tiers in order, policies in (Order, then name, namespace, kind as Felix), only tiers
// with an applying policy.
func TestResolverTiers(t *testing.T) {
	a := model.EndpointKey{Namespace: "x", Name: "a"}
	np1, np2 := pk("NetworkPolicy", "x", "np1"), pk("NetworkPolicy", "x", "np2")
	adm, base := pk("ClusterNetworkPolicy", "", "adm"), pk("ClusterNetworkPolicy", "", "base")
	tests := []struct {
		name        string
		ups         []model.Update
		wantIngress string
		wantEgress  string
	}{
		{"no policy", nil, "", ""},
		{"one NetworkPolicy, ingress only",
			[]model.Update{pol(np1, model.TierNetworkPolicy, 0, "app == 'a'", true, false)},
			"default(deny): NetworkPolicy/x/np1", ""},
		{"order then name within a tier",
			[]model.Update{pol(np2, model.TierNetworkPolicy, 0, "", true, true), pol(np1, model.TierNetworkPolicy, 5, "", true, false)},
			"default(deny): NetworkPolicy/x/np2 NetworkPolicy/x/np1", "default(deny): NetworkPolicy/x/np2"},
		{"equal orders by name, then namespace, then kind (Felix's sorter)",
			[]model.Update{pol(pk("GlobalNetworkPolicy", "", "b"), "sec", 10, "", true, false),
				pol(pk("CalicoNetworkPolicy", "x", "c"), "sec", 10, "", true, false),
				pol(pk("CalicoNetworkPolicy", "x", "a"), "sec", 10, "", true, false),
				pol(pk("GlobalNetworkPolicy", "", "a"), "sec", 10, "", true, false),
				model.TierSet{Tier: model.Tier{Name: "sec", Order: 100, DefaultAction: model.ActionDeny}}},
			"sec(deny): GlobalNetworkPolicy/a CalicoNetworkPolicy/x/a GlobalNetworkPolicy/b CalicoNetworkPolicy/x/c", ""},
		{"admin, default, baseline in tier order",
			[]model.Update{pol(base, model.TierBaseline, 0, "", true, true), pol(np1, model.TierNetworkPolicy, 0, "", true, false), pol(adm, model.TierAdmin, 0, "", true, false)},
			"admin(pass): ClusterNetworkPolicy/adm | default(deny): NetworkPolicy/x/np1 | baseline(pass): ClusterNetworkPolicy/base",
			"baseline(pass): ClusterNetworkPolicy/base"},
		{"policy not selecting the endpoint is not listed",
			[]model.Update{pol(np1, model.TierNetworkPolicy, 0, "app == 'b'", true, true), pol(np2, model.TierNetworkPolicy, 0, "app == 'a'", true, false)},
			"default(deny): NetworkPolicy/x/np2", ""},
		{"unknown tier: not applied",
			[]model.Update{pol(adm, "nope", 0, "", true, true)}, "", ""},
		{"custom tier between admin and default, then reordered",
			[]model.Update{model.TierSet{Tier: model.Tier{Name: "mid", Order: 500_000, DefaultAction: model.ActionPass}},
				pol(adm, "mid", 0, "", true, false), pol(np1, model.TierNetworkPolicy, 0, "", true, false),
				model.TierSet{Tier: model.Tier{Name: "mid", Order: 5_000_000, DefaultAction: model.ActionDeny}}},
			"default(deny): NetworkPolicy/x/np1 | mid(deny): ClusterNetworkPolicy/adm", ""},
		{"namespaced policy does not select other namespaces",
			[]model.Update{pol(pk("NetworkPolicy", "y", "np"), model.TierNetworkPolicy, 0, "", true, true)}, "", ""},
		{"deleted policy is gone",
			[]model.Update{pol(np1, model.TierNetworkPolicy, 0, "", true, true), model.PolicyDeleted{Key: np1}}, "", ""},
		{"cluster policy whose namespace selector matches the endpoint's namespace",
			[]model.Update{nsLabels("x", "team", "a"), nsPol(adm, "team == 'a'", "app == 'a'")},
			"admin(pass): ClusterNetworkPolicy/adm", ""},
		{"cluster policy whose namespace selector does not match",
			[]model.Update{nsLabels("x", "team", "a"), nsPol(adm, "team == 'b'", "")}, "", ""},
		{"namespace relabelled out of a cluster policy's namespace selector",
			[]model.Update{nsLabels("x", "team", "a"), nsPol(adm, "team == 'a'", ""), nsLabels("x", "team", "b")}, "", ""},
		{"namespace relabelled into a cluster policy's namespace selector",
			[]model.Update{nsPol(adm, "team == 'b'", ""), nsLabels("x", "team", "b")}, "admin(pass): ClusterNetworkPolicy/adm", ""},
		{"invalid namespace selector: the policy selects nothing",
			[]model.Update{nsLabels("x", "team", "a"), nsPol(adm, "team == ", "")}, "", ""},
	}
	render := func(tps []dataplane.TierPolicies) string {
		var parts []string
		for _, tp := range tps {
			s := tp.Tier + "(" + tp.DefaultAction.String() + "):"
			for _, k := range tp.Policies {
				s += " " + k.String()
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, " | ")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ups := append([]model.Update{pod("x", "a", node, "10.0.0.1", lbl("app", "a"))}, tt.ups...)
			_, st := run(t, ups...)
			e, ok := st.Endpoints[a]
			if !ok {
				t.Fatal("local endpoint missing")
			}
			if got := render(e.Ingress); got != tt.wantIngress {
				t.Errorf("ingress = %q, want %q", got, tt.wantIngress)
			}
			if got := render(e.Egress); got != tt.wantEgress {
				t.Errorf("egress = %q, want %q", got, tt.wantEgress)
			}
		})
	}
}

// nsLabels sets namespace ns's labels to k=v.
func nsLabels(ns, k, v string) model.Update {
	return model.NamespaceSet{Namespace: model.Namespace{Name: ns, Labels: lbl(k, v)}}
}

// nsPol is an admin-tier cluster policy on the endpoints matching sel in the namespaces matching
// nsSel, applying to ingress.
func nsPol(key model.PolicyKey, nsSel, sel string) model.Update {
	return model.PolicySet{Policy: model.Policy{Key: key, Tier: model.TierAdmin, Selector: sel, NamespaceSelector: nsSel,
		ApplyIngress: true}}
}

// Active policies and sets: only policies selecting a local endpoint are emitted, and only
// their rules' selectors become sets; sets hold every matching endpoint cluster-wide.
func TestActivePoliciesAndSets(t *testing.T) {
	allowFrom := func(sel string) model.Rule {
		return model.Rule{Action: model.ActionAllow, Source: model.Peer{Selector: sel}}
	}
	g, st := run(t,
		pod("x", "a", node, "10.0.0.1", lbl("app", "a")),
		pod("x", "b", "node-b", "10.0.0.2", lbl("app", "b")),
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "b6"}, Node: "node-c",
			Labels: model.LabelsOf(lbl("app", "b")), Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("fd00::3")}}},
		pol(pk("NetworkPolicy", "x", "on-a"), model.TierNetworkPolicy, 0, "app == 'a'", true, false, allowFrom("app == 'b'")),
		pol(pk("NetworkPolicy", "x", "on-b"), model.TierNetworkPolicy, 0, "app == 'b'", true, false, allowFrom("app == 'c'")),
	)
	if len(st.Policies) != 1 {
		t.Fatalf("active policies = %v, want only on-a", st.Policies)
	}
	if len(st.Sets) != 1 {
		t.Fatalf("sets:\n%s", st.Dump())
	}
	var set *graphtest.Set
	for _, s := range st.Sets {
		set = s
	}
	want := []string{"10.0.0.2", "10.0.0.3", "fd00::3"}
	if got := members(set); !slices.Equal(got, want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	// b moves to the local node: on-b becomes active; a set for app == 'c' appears (empty).
	apply(t, g, st, pod("x", "b", node, "10.0.0.2", lbl("app", "b")))
	if len(st.Policies) != 2 || len(st.Sets) != 2 {
		t.Fatalf("after b became local:\n%s", st.Dump())
	}
	// Relabel b to c: on-b no longer selects a local endpoint (inactive, its app == 'c' set
	// removed); the app == 'b' set loses 10.0.0.2 as a delta.
	msgs := flushAfter(t, g, st, pod("x", "b", node, "10.0.0.2", lbl("app", "c")))
	if len(st.Policies) != 1 || len(st.Sets) != 1 {
		t.Fatalf("after relabel:\n%s", st.Dump())
	}
	var changed *dataplane.SetMembersChanged
	for _, m := range msgs {
		if c, ok := m.(dataplane.SetMembersChanged); ok {
			changed = &c
		}
	}
	if changed == nil || len(changed.Added) != 0 || len(changed.Removed) != 1 || changed.Removed[0].Addr != netip.MustParseAddr("10.0.0.2") {
		t.Fatalf("want a SetMembersChanged removing 10.0.0.2, got %#v", msgs)
	}
}

func flushAfter(t *testing.T, g *graph.Graph, st *graphtest.State, ups ...model.Update) []dataplane.Message {
	t.Helper()
	for _, u := range ups {
		g.OnUpdate(u)
	}
	msgs := g.Flush()
	if err := st.ApplyAll(msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func members(s *graphtest.Set) []string {
	var ms []dataplane.Member
	for m := range s.Members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, graph.CompareMembers)
	var out []string
	for _, m := range ms {
		if m.Port != 0 {
			out = append(out, fmt.Sprintf("%s/%s/%d", m.Addr, m.Protocol, m.Port))
		} else {
			out = append(out, m.Addr.String())
		}
	}
	return out
}

// Named ports: resolved per endpoint, with the rule's protocol; endpoints lacking the name add
// nothing.
func TestNamedPortSets(t *testing.T) {
	http := func(proto model.Protocol, port uint16) model.NamedPort {
		return model.NamedPort{Name: "http", Protocol: proto, Port: port}
	}
	tests := []struct {
		name  string
		proto model.Protocol
		want  []string
	}{
		{"tcp rule", model.ProtocolTCP, []string{"10.0.0.1/tcp/8080", "10.0.0.2/tcp/9090"}},
		{"udp rule", model.ProtocolUDP, []string{"10.0.0.2/udp/5353"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, st := run(t,
				pod("x", "a", node, "10.0.0.1", lbl("app", "web"), http(model.ProtocolTCP, 8080)),
				pod("x", "b", "node-b", "10.0.0.2", lbl("app", "web"), http(model.ProtocolTCP, 9090), http(model.ProtocolUDP, 5353)),
				pod("x", "c", node, "10.0.0.3", lbl("app", "web")),
				pol(pk("NetworkPolicy", "x", "p"), model.TierNetworkPolicy, 0, "app == 'web'", true, false,
					model.Rule{Action: model.ActionAllow, Protocol: tt.proto, Destination: model.Peer{Ports: []model.Port{{Name: "http"}}}}),
			)
			p := st.Policies[pk("NetworkPolicy", "x", "p")]
			if len(p.Ingress) != 1 || len(p.Ingress[0].Dst.NamedPortSets) != 1 {
				t.Fatalf("policy %+v", p)
			}
			set := st.Sets[p.Ingress[0].Dst.NamedPortSets[0]]
			if set.Kind != dataplane.SetNamedPorts {
				t.Fatalf("kind %d", set.Kind)
			}
			if got := members(set); !slices.Equal(got, tt.want) {
				t.Fatalf("members %v, want %v", got, tt.want)
			}
		})
	}
}

// Bad input is reported and fails closed for its own object only.
func TestProblems(t *testing.T) {
	good := pk("NetworkPolicy", "x", "good")
	g, st := run(t,
		pod("x", "a", node, "10.0.0.1", lbl("app", "a")),
		pol(pk("NetworkPolicy", "x", "bad-selector"), model.TierNetworkPolicy, 0, "app ==", true, false),
		pol(pk("ClusterNetworkPolicy", "", "no-tier"), "missing", 0, "", true, false),
		pol(pk("NetworkPolicy", "x", "bad-rule"), model.TierNetworkPolicy, 0, "", true, false,
			model.Rule{Action: model.ActionDeny, Source: model.Peer{Selector: "((("}},
			model.Rule{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'a'"}}),
		pol(good, model.TierNetworkPolicy, 0, "", true, false, model.Rule{Action: model.ActionAllow}),
	)
	probs := g.Problems()
	var objs []string
	for _, p := range probs {
		objs = append(objs, p.Object)
	}
	wantObjs := []string{"ClusterNetworkPolicy/no-tier", "NetworkPolicy/x/bad-rule", "NetworkPolicy/x/bad-selector"}
	if !slices.Equal(objs, wantObjs) {
		t.Fatalf("problems %v, want objects %v", probs, wantObjs)
	}
	if _, ok := st.Policies[good]; !ok {
		t.Fatal("good policy not active")
	}
	br := st.Policies[pk("NetworkPolicy", "x", "bad-rule")]
	if len(br.Ingress) != 1 || br.Ingress[0].Action != model.ActionAllow || !strings.HasSuffix(br.Ingress[0].Comment, "rule 1") {
		t.Fatalf("bad rule not left out: %+v", br)
	}
	if _, ok := st.Policies[pk("NetworkPolicy", "x", "bad-selector")]; ok {
		t.Fatal("policy with invalid selector is active")
	}
}

// Sequencer: nothing before in-sync; unchanged objects are not re-emitted; interface from
// routes.
func TestSequencer(t *testing.T) {
	g := graph.New(graph.Config{NodeName: node})
	g.OnUpdate(pod("x", "a", node, "10.0.0.1", lbl("app", "a")))
	if m := g.Flush(); m != nil {
		t.Fatalf("emitted before in-sync: %v", m)
	}
	g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
	msgs := g.Flush()
	want := []dataplane.Message{dataplane.EndpointUpdated{Key: model.EndpointKey{Namespace: "x", Name: "a"}, Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}, dataplane.InSync{}}
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("first flush %#v, want %#v", msgs, want)
	}
	g.OnUpdate(pod("x", "a", node, "10.0.0.1", lbl("app", "a")))
	if m := g.Flush(); len(m) != 0 {
		t.Fatalf("unchanged endpoint re-emitted: %#v", m)
	}
	g.OnUpdate(model.RouteSet{Dst: netip.MustParsePrefix("10.0.0.1/32"), Interface: "veth1"})
	msgs = g.Flush()
	if len(msgs) != 1 || msgs[0].(dataplane.EndpointUpdated).Interface != "veth1" {
		t.Fatalf("route: %#v", msgs)
	}
	g.OnUpdate(model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: "a"}})
	msgs = g.Flush()
	if !reflect.DeepEqual(msgs, []dataplane.Message{dataplane.EndpointRemoved{Key: model.EndpointKey{Namespace: "x", Name: "a"}}}) {
		t.Fatalf("delete: %#v", msgs)
	}
}

// Label index: a namespace relabel moves its endpoints in and out of namespace-selector sets.
func TestNamespaceRelabel(t *testing.T) {
	g, st := run(t,
		nsU("x", lbl("team", "a")), nsU("y", lbl("team", "b")),
		pod("x", "a", node, "10.0.0.1", lbl("app", "a")),
		pod("y", "b", "node-b", "10.0.0.2", lbl("app", "b")),
		pol(pk("NetworkPolicy", "x", "p"), model.TierNetworkPolicy, 0, "", true, false,
			model.Rule{Action: model.ActionAllow, Source: model.Peer{NamespaceSelector: "team == 'a'"}}),
	)
	only := func() []string {
		for _, s := range st.Sets {
			return members(s)
		}
		return nil
	}
	if got := only(); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Fatalf("before: %v", got)
	}
	apply(t, g, st, nsU("y", lbl("team", "a")))
	if got := only(); !slices.Equal(got, []string{"10.0.0.1", "10.0.0.2"}) {
		t.Fatalf("after y joined: %v", got)
	}
	apply(t, g, st, nsU("x", lbl("team", "c")))
	if got := only(); !slices.Equal(got, []string{"10.0.0.2"}) {
		t.Fatalf("after x left: %v", got)
	}
}

func TestNormalizePrefixes(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"10.0.0.0/8 10.1.0.0/16", "10.0.0.0/8"},
		{"10.1.2.3/16 10.1.0.0/16", "10.1.0.0/16"},
		{"192.0.2.0/24 10.0.0.0/8 fd00::/8 fd00:1::/32", "10.0.0.0/8 192.0.2.0/24 fd00::/8"},
		{"10.0.0.0/9 10.128.0.0/9", "10.0.0.0/9 10.128.0.0/9"},
	}
	for _, tt := range tests {
		var in []netip.Prefix
		for _, f := range strings.Fields(tt.in) {
			in = append(in, netip.MustParsePrefix(f))
		}
		var got []string
		for _, p := range graph.NormalizePrefixes(in) {
			got = append(got, p.String())
		}
		if s := strings.Join(got, " "); s != tt.want {
			t.Errorf("NormalizePrefixes(%s) = %s, want %s", tt.in, s, tt.want)
		}
	}
}

// Two endpoints sharing an address (a pod's IP reused before the old pod's delete arrives): the
// address, and a named port, are members only while every holder contributes them, whichever
// endpoint came first.
func TestSharedAddress(t *testing.T) {
	web := func(name, addr, app string, port uint16) model.Update {
		return pod("x", name, "node-b", addr, lbl("app", app), model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: port})
	}
	del := func(name string) model.Update {
		return model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: name}}
	}
	for _, names := range [][2]string{{"a", "b"}, {"b", "a"}} {
		first, second := names[0], names[1]
		t.Run(first+" first", func(t *testing.T) {
			g, st := run(t,
				pod("x", "l", node, "10.0.0.1", lbl("app", "l")),
				model.PolicySet{Policy: model.Policy{Key: pk("NetworkPolicy", "x", "p"), Tier: model.TierNetworkPolicy,
					Namespace: "x", Selector: "app == 'l'", ApplyEgress: true,
					EgressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
						Destination: model.Peer{Selector: "app == 'web'", Ports: []model.Port{{Name: "http"}}}}}}},
			)
			rule := st.Policies[pk("NetworkPolicy", "x", "p")].Egress[0]
			addrSet, portSet := rule.Dst.Sets[0], rule.Dst.NamedPortSets[0]
			steps := []struct {
				name        string
				up          model.Update
				addrs, port string
				changed     bool // whether a set message is expected
			}{
				{"first added", web(first, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"second added", web(second, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"first relabelled out", web(first, "10.0.0.9", "other", 8080), "", "", true},
				{"first relabelled in", web(first, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"second's port changed", web(second, "10.0.0.9", "web", 9090), "10.0.0.9", "", true},
				{"first relabelled out again", web(first, "10.0.0.9", "other", 8080), "", "", true},
				{"second deleted", del(second), "", "", true},
				{"first relabelled in again", web(first, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"second added again", web(second, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"second's address changed", web(second, "10.0.0.10", "web", 8080), "10.0.0.9 10.0.0.10", "10.0.0.9/tcp/8080 10.0.0.10/tcp/8080", true},
				{"second's address changed back", web(second, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"first deleted", del(first), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"second relabelled out", web(second, "10.0.0.9", "other", 8080), "", "", true},
				{"second relabelled in", web(second, "10.0.0.9", "web", 8080), "10.0.0.9", "10.0.0.9/tcp/8080", true},
				{"second deleted at last", del(second), "", "", true},
			}
			for _, s := range steps {
				msgs := flushAfter(t, g, st, s.up)
				changed := slices.ContainsFunc(msgs, func(m dataplane.Message) bool {
					switch m.(type) {
					case dataplane.SetReplaced, dataplane.SetMembersChanged, dataplane.SetRemoved:
						return true
					}
					return false
				})
				if changed != s.changed {
					t.Errorf("%s: set messages %v, want %v: %#v", s.name, changed, s.changed, msgs)
				}
				if got := strings.Join(members(st.Sets[addrSet]), " "); got != s.addrs {
					t.Errorf("%s: address set %q, want %q", s.name, got, s.addrs)
				}
				if got := strings.Join(members(st.Sets[portSet]), " "); got != s.port {
					t.Errorf("%s: named-port set %q, want %q", s.name, got, s.port)
				}
			}
		})
	}
}

// An address reused by a pod of another namespace and labels, on the node of its old pod: the
// address leaves the allow set of the old pod's peers in the flush of the update that makes its
// owner doubtful (the new pod known before the old one's delete, the new one in no set at all),
// and in the flush of the old pod's delete when that comes first; it comes back only when every
// holder is selected again.
func TestReusedAddressLeavesAllowSet(t *testing.T) {
	old := pod("x", "old", "node-b", "10.0.0.9", lbl("app", "client"))
	reused := pod("y", "new", "node-b", "10.0.0.9", lbl("app", "other"))
	del := func(ns, name string) model.Update {
		return model.EndpointDeleted{Key: model.EndpointKey{Namespace: ns, Name: name}}
	}
	for _, tt := range []struct {
		name  string
		steps []model.Update
		want  []string // the allow set's members after each step
	}{
		{"new pod first", []model.Update{reused, del("x", "old"), del("y", "new")}, []string{"", "", ""}},
		{"delete first", []model.Update{del("x", "old"), reused, del("y", "new")}, []string{"", "", ""}},
		{"new pod relabelled into the peers", []model.Update{reused,
			pod("y", "new", "node-b", "10.0.0.9", lbl("app", "client")), // another namespace: still not a peer
			pod("x", "new2", "node-b", "10.0.0.9", lbl("app", "client")), del("y", "new")},
			[]string{"", "", "", "10.0.0.9"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, st := run(t, old, pod("x", "web", node, "10.0.0.1", lbl("app", "web")),
				pol(pk("NetworkPolicy", "x", "in"), model.TierNetworkPolicy, 0, "app == 'web'", true, false,
					model.Rule{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'client'"}}))
			set := st.Policies[pk("NetworkPolicy", "x", "in")].Ingress[0].Src.Sets[0]
			if got := strings.Join(members(st.Sets[set]), " "); got != "10.0.0.9" {
				t.Fatalf("before: allow set %q, want 10.0.0.9", got)
			}
			for i, up := range tt.steps {
				flushAfter(t, g, st, up)
				if got := strings.Join(members(st.Sets[set]), " "); got != tt.want[i] {
					t.Errorf("step %d (%#v): allow set %q, want %q", i, up, got, tt.want[i])
				}
			}
		})
	}
}
