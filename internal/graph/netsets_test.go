package graph_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

func netSet(ns, name string, labels map[string]string, nets ...string) model.Update {
	n := model.NetworkSet{Key: model.NetworkSetKey{Namespace: ns, Name: name}, Labels: model.LabelsOf(labels)}
	for _, s := range nets {
		n.Nets = append(n.Nets, netip.MustParsePrefix(s))
	}
	return model.NetworkSetSet{NetworkSet: n}
}

func withAccount(u model.Update, sa string) model.Update {
	e := u.(model.EndpointSet)
	e.Endpoint.ServiceAccount = sa
	return e
}

// calicoPolicy is a Calico policy in the default tier applying to ingress of the endpoints sel
// selects: a NetworkPolicy of namespace ns, a GlobalNetworkPolicy for ns "".
func calicoPolicy(ns, name, sel string, ingress ...model.Rule) model.Update {
	kind := "GlobalNetworkPolicy"
	if ns != "" {
		kind = "NetworkPolicy"
	}
	return model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: kind, Namespace: ns, Name: name},
		Tier: model.TierNetworkPolicy, Namespace: ns, Selector: sel, ApplyIngress: true, IngressRules: ingress}}
}

func allowFromPeer(p model.Peer) model.Rule { return model.Rule{Action: model.ActionAllow, Source: p} }

// The cluster of TestNetworkSetSemantics: namespaces x (team blue) and y (team red); local
// pods x/a (the one policies protect), x/b (service account sa-b), y/c; remote pod y/d with
// role db; network sets of role ext (cluster-scoped, in x, in y) and of role db (cluster-scoped).
var netSetCluster = []model.Update{
	nsU("x", lbl("team", "blue")),
	nsU("y", lbl("team", "red")),
	model.ServiceAccountSet{ServiceAccount: model.ServiceAccount{Namespace: "x", Name: "sa-b"}},
	pod("x", "a", node, "10.0.0.1", lbl("app", "a")),
	withAccount(pod("x", "b", node, "10.0.0.2", lbl("app", "b")), "sa-b"),
	pod("y", "c", node, "10.0.0.3", lbl("app", "c")),
	pod("y", "d", "node-b", "10.0.1.4", lbl("app", "d", "role", "db")),
	netSet("", "gext", lbl("role", "ext"), "192.0.2.0/24"),
	netSet("", "gdb", lbl("role", "db"), "198.51.100.0/24"),
	netSet("x", "xnet", lbl("role", "ext"), "203.0.113.0/25"),
	netSet("y", "ynet", lbl("role", "ext"), "203.0.113.128/25"),
}

// netSetAddrs names the sources TestNetworkSetSemantics probes: pods, an address of each
// network set and one of none.
var netSetAddrs = map[string]string{"b": "10.0.0.2", "c": "10.0.0.3", "d": "10.0.1.4",
	"gext": "192.0.2.9", "gdb": "198.51.100.1", "xnet": "203.0.113.5", "ynet": "203.0.113.200", "out": "8.8.8.8"}

// allowedFrom reports, for each source of netSetAddrs, whether st allows its TCP packet to x/a.
func allowedFrom(st *graphtest.State) map[string]bool {
	got := map[string]bool{}
	for name, a := range netSetAddrs {
		got[name] = st.Allowed(graphtest.Packet{Src: netip.MustParseAddr(a), Dst: netip.MustParseAddr("10.0.0.1"),
			Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: 80})
	}
	return got
}

func checkAllowed(t *testing.T, st *graphtest.State, allowed ...string) {
	t.Helper()
	got := allowedFrom(st)
	for name := range netSetAddrs {
		if want := slices.Contains(allowed, name); got[name] != want {
			t.Errorf("%s → x/a allowed %v, want %v", name, got[name], want)
		}
	}
	if t.Failed() {
		t.Log(st.Dump())
	}
}

// TestNetworkSetSemantics: Calico's rule selectors pick network sets and pods as Calico scopes
// them, notSelector excludes what it picks, and automatic labels are seen by selectors.
func TestNetworkSetSemantics(t *testing.T) {
	tests := []struct {
		name    string
		policy  model.Update
		allowed []string // the sources allowed to x/a
	}{
		{"a GlobalNetworkPolicy's selector picks network sets of every scope",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'ext'", NetworkSets: true})),
			[]string{"gext", "xnet", "ynet"}},
		{"a GlobalNetworkPolicy's selector picks pods and network sets alike",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'db'", NetworkSets: true})),
			[]string{"gdb", "d"}},
		{"a Kubernetes peer picks no network set",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'db'"})),
			[]string{"d"}},
		{"a NetworkSet is picked only in its namespace",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'ext'", NetworkSets: true})),
			[]string{"xnet"}},
		{"a namespace selector picks the network sets of matching namespaces",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'ext'", NamespaceSelector: "team == 'red'", NetworkSets: true})),
			[]string{"ynet"}},
		{"namespace selector all() picks every namespaced network set, no cluster-scoped one",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'ext'", NamespaceSelector: "all()", NetworkSets: true})),
			[]string{"xnet", "ynet"}},
		{"global() picks cluster-scoped network sets, no pod",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'db'", Global: true, NetworkSets: true})),
			[]string{"gdb"}},
		{"global() with no selector picks every cluster-scoped network set",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{Global: true, NetworkSets: true})),
			[]string{"gdb", "gext"}},
		{"global() without network sets picks nothing",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'db'", Global: true})),
			nil},
		{"a service-account selector picks no network set",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "has(role) || app == 'b'", ServiceAccountSelector: "all()", NetworkSets: true})),
			[]string{"b", "d"}},
		{"a selector's nets are cut by the peer's nets",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'ext'", NetworkSets: true,
				Nets: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("10.0.0.0/8")}})),
			[]string{"xnet", "ynet"}},
		{"notSelector excludes pods and network sets and lets outside addresses match",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{NotSelector: "app == 'b' || role == 'ext'", NetworkSets: true})),
			[]string{"c", "d", "gdb", "out"}},
		{"notSelector without network sets excludes pods only",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{NotSelector: "app == 'b' || role == 'ext'"})),
			[]string{"c", "d", "gdb", "gext", "xnet", "ynet", "out"}},
		{"notSelector is not scoped: it excludes the pods of other namespaces",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{NamespaceSelector: "all()", NotSelector: "app in {'b', 'c'}"})),
			[]string{"d"}},
		{"a namespaced policy's notSelector alone picks its namespace's pods and network sets",
			calicoPolicy("x", "p", "app == 'a'", allowFromPeer(model.Peer{NotSelector: "app == 'c'", NetworkSets: true})),
			[]string{"b", "xnet"}},
		{"notSelector with a selector",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "has(role)", NotSelector: "projectcalico.org/namespace == 'x'", NetworkSets: true})),
			[]string{"d", "gdb", "gext", "ynet"}},
		{"the automatic namespace label of pods",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "projectcalico.org/namespace == 'y'"})),
			[]string{"c", "d"}},
		{"the automatic namespace label of network sets",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "projectcalico.org/namespace == 'y' && role == 'ext'", NetworkSets: true})),
			[]string{"ynet"}},
		{"the automatic orchestrator label of pods",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "projectcalico.org/orchestrator == 'k8s' && role == 'db'", NetworkSets: true})),
			[]string{"d"}},
		{"the automatic service-account label of pods",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "projectcalico.org/serviceaccount == 'sa-b'"})),
			[]string{"b"}},
		{"the automatic name label of namespaces",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{NamespaceSelector: "projectcalico.org/name == 'y'", NetworkSets: true})),
			[]string{"c", "d", "ynet"}},
		{"the automatic name label of service accounts",
			calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{ServiceAccountSelector: "projectcalico.org/name == 'sa-b'"})),
			[]string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, st := run(t, append(slices.Clone(netSetCluster), tt.policy)...)
			checkAllowed(t, st, tt.allowed...)
		})
	}
}

// TestNetworkSetChanges: a network set's change reaches the dataplane as a PolicyUpdated of
// each policy picking it (as it was or as it is), and of no other.
func TestNetworkSetChanges(t *testing.T) {
	picker := calicoPolicy("", "picker", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'ext'", NetworkSets: true}))
	other := calicoPolicy("", "other", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'none'", NetworkSets: true}))
	byNs := calicoPolicy("x", "by-ns", "app == 'a'", allowFromPeer(model.Peer{NamespaceSelector: "team == 'green'", NetworkSets: true}))
	g, st := run(t, append(slices.Clone(netSetCluster), picker, other, byNs)...)
	checkAllowed(t, st, "gext", "xnet", "ynet")
	steps := []struct {
		name    string
		update  model.Update
		updated []string // the policies updated
		allowed []string
	}{
		{"nets change", netSet("", "gext", lbl("role", "ext"), "192.0.2.0/28"), []string{"picker"}, []string{"gext", "xnet", "ynet"}},
		{"nets move away", netSet("", "gext", lbl("role", "ext"), "192.0.2.128/25"), []string{"picker"}, []string{"xnet", "ynet"}},
		{"relabelled out", netSet("x", "xnet", lbl("role", "int"), "203.0.113.0/25"), []string{"picker"}, []string{"ynet"}},
		{"relabelled in", netSet("x", "xnet", lbl("role", "ext"), "203.0.113.0/25"), []string{"picker"}, []string{"xnet", "ynet"}},
		{"unchanged", netSet("x", "xnet", lbl("role", "ext"), "203.0.113.0/25"), nil, []string{"xnet", "ynet"}},
		{"picked by no policy", netSet("", "gdb", lbl("role", "db"), "198.51.100.0/25"), nil, []string{"xnet", "ynet"}},
		{"deleted", model.NetworkSetDeleted{Key: model.NetworkSetKey{Namespace: "y", Name: "ynet"}}, []string{"picker"}, []string{"xnet"}},
		{"its namespace relabelled", nsU("x", lbl("team", "green")), []string{"by-ns"}, []string{"xnet", "b"}},
		{"a new one", netSet("y", "ynet2", lbl("role", "ext"), "203.0.113.192/26"), []string{"picker"}, []string{"xnet", "b", "ynet"}},
	}
	for _, s := range steps {
		msgs := flushAfter(t, g, st, s.update)
		var updated []string
		for _, m := range msgs {
			if pu, ok := m.(dataplane.PolicyUpdated); ok {
				updated = append(updated, pu.Key.Name)
			}
		}
		slices.Sort(updated)
		if !slices.Equal(updated, s.updated) {
			t.Errorf("%s: policies updated %v, want %v", s.name, updated, s.updated)
		}
		t.Run(s.name, func(t *testing.T) { checkAllowed(t, st, s.allowed...) })
	}
}

// TestNetworkSetAlternatives: a rule whose peer picks network sets is one dataplane rule per
// alternative, with the API rule's action, index and comment; a rule picking none is one; a
// rule that matches nothing is left out and holds no set.
func TestNetworkSetAlternatives(t *testing.T) {
	rule := model.Rule{Action: model.ActionDeny, Label: "rule deny-ext", Source: model.Peer{Selector: "role == 'ext'", NetworkSets: true},
		Destination: model.Peer{Ports: tcp(443)}, Protocol: model.ProtocolTCP}
	nothing := model.Rule{Action: model.ActionAllow, Source: model.Peer{Global: true, NotSelector: "app == 'x'"},
		Destination: model.Peer{Ports: []model.Port{{Name: "http"}}}}
	_, st := run(t, append(slices.Clone(netSetCluster),
		calicoPolicy("", "p", "app == 'a'", allowFromPeer(model.Peer{Selector: "role == 'none'", NetworkSets: true}), rule, nothing))...)
	for _, set := range st.Sets {
		if strings.Contains(set.Description, "app == \"x\"") || strings.Contains(set.Description, "port http") {
			t.Errorf("set %q of a rule left out", set.Description)
		}
	}
	rules := st.Policies[model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "p"}].Ingress
	if len(rules) != 3 {
		t.Fatalf("%d rules, want 3 (one for the rule picking no network set, two alternatives, none for the rule picking nothing):\n%s", len(rules), st.Dump())
	}
	if len(rules[0].Src.Sets) != 1 || rules[0].Src.Nets != nil || rules[0].Index != 0 {
		t.Errorf("rule 0 is not the endpoint match alone: %+v", rules[0])
	}
	endpoints, nets := rules[1], rules[2]
	wantNets := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("203.0.113.0/25"), netip.MustParsePrefix("203.0.113.128/25")}
	if len(endpoints.Src.Sets) != 1 || endpoints.Src.Nets != nil || nets.Src.Sets != nil || !slices.Equal(nets.Src.Nets, wantNets) {
		t.Errorf("alternatives: endpoints %+v, nets %+v (want nets %v)", endpoints.Src, nets.Src, wantNets)
	}
	for _, r := range []dataplane.Rule{endpoints, nets} {
		if r.Action != model.ActionDeny || r.Index != 1 || r.Comment != "GlobalNetworkPolicy/p rule deny-ext" || !slices.Equal(r.Dst.Ports, tcp(443)) {
			t.Errorf("alternative does not keep the API rule: %+v", r)
		}
	}
}

// TestNetworkSetBound: the nets one peer's network sets expand to are bounded; over the bound
// the policy is a problem, an allow uses none of them (it never allows more than written) and a
// deny as many as the bound lets it.
func TestNetworkSetBound(t *testing.T) {
	addr := func(i int) string { return netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}).String() }
	nets := make([]string, graph.MaxPeerNets+1)
	for i := range nets {
		nets[i] = addr(i) + "/32"
	}
	first, last := addr(0), addr(graph.MaxPeerNets)
	big := netSet("", "big", lbl("role", "big"), nets...)
	from := func(st *graphtest.State, src string) bool {
		return st.Allowed(graphtest.Packet{Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("10.0.0.1"), Proto: model.ProtocolTCP, DstPort: 80})
	}
	tests := []struct {
		name              string
		rules             []model.Rule
		first, last, out  bool // allowed from the first and last net, and from outside them
		problemSubstrings string
	}{
		{"allow from the set: none of its nets", []model.Rule{allowFromPeer(model.Peer{Selector: "role == 'big'", NetworkSets: true})},
			false, false, false, "source selector picks network sets of 10001 nets, more than 10000: the rule uses none of them"},
		{"deny from the set: as many as the bound", []model.Rule{{Action: model.ActionDeny, Source: model.Peer{Selector: "role == 'big'", NetworkSets: true}}, {Action: model.ActionAllow}},
			false, true, true, "the rule uses the first 10000"},
		{"allow from all but the set: nothing", []model.Rule{allowFromPeer(model.Peer{NotSelector: "role == 'big'", NetworkSets: true})},
			false, false, false, "source notSelector picks network sets of 10001 nets"},
		{"deny all but the set: the bound's excluded", []model.Rule{{Action: model.ActionDeny, Source: model.Peer{NotSelector: "role == 'big'", NetworkSets: true}}, {Action: model.ActionAllow}},
			true, false, false, "source notSelector picks network sets of 10001 nets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, st := run(t, append(slices.Clone(netSetCluster), big, calicoPolicy("", "p", "app == 'a'", tt.rules...))...)
			if got := [3]bool{from(st, first), from(st, last), from(st, "8.8.8.8")}; got != [3]bool{tt.first, tt.last, tt.out} {
				t.Errorf("allowed from first, last, outside: %v, want %v", got, [3]bool{tt.first, tt.last, tt.out})
			}
			probs := fmt.Sprint(g.Problems())
			if !strings.Contains(probs, "GlobalNetworkPolicy/p: ingress rule 0 ") || !strings.Contains(probs, tt.problemSubstrings) {
				t.Errorf("problems %s, want one of rule 0 with %q", probs, tt.problemSubstrings)
			}
			// the set shrinks under the bound: the problem goes
			apply(t, g, st, netSet("", "big", lbl("role", "big"), nets[:10]...))
			if probs := g.Problems(); len(probs) != 0 {
				t.Errorf("problems after the set shrank: %v", probs)
			}
		})
	}
}
