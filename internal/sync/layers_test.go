package sync_test

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	api "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestLayers: the three layers as ClusterNetworkPolicy defines them — Admin tier, then
// NetworkPolicy, then Baseline tier, then allowed — through the converters, the graph and its
// reference evaluator. Pods x/a, x/b and y/a (namespaces labelled house=x, house=y); the
// policies' subject is every pod of x; probes are TCP.
func TestLayers(t *testing.T) {
	type probe struct {
		from, to string
		port     uint16
		want     bool
	}
	tests := []struct {
		name     string
		policies []runtime.Object
		probes   []probe
	}{
		{"no policy: allowed",
			nil,
			[]probe{{"y/a", "x/a", 80, true}, {"x/b", "x/a", 80, true}}},
		{"Admin Deny over a NetworkPolicy allow",
			objs(adminCNP("deny-y", 10, ingressRule(deny, "y")), npFrom("allow-y", "y")),
			[]probe{{"y/a", "x/a", 80, false}, {"x/b", "x/a", 80, false}}},
		{"Admin Accept over NetworkPolicy isolation",
			objs(adminCNP("accept-y", 10, ingressRule(accept, "y")), npFrom("isolate")),
			[]probe{{"y/a", "x/a", 80, true}, {"x/b", "x/a", 80, false}}},
		{"Admin Pass → NetworkPolicy allows (over a Baseline Deny)",
			objs(adminCNP("pass-y", 10, ingressRule(pass, "y")), npFrom("allow-y", "y"), baselineCNP("deny-y", 10, ingressRule(deny, "y"))),
			[]probe{{"y/a", "x/a", 80, true}, {"x/b", "x/a", 80, false}}},
		{"Admin Pass → NetworkPolicy isolates: no rule of it matches",
			objs(adminCNP("pass-y", 10, ingressRule(pass, "y")), npFrom("allow-x", "x")),
			[]probe{{"y/a", "x/a", 80, false}, {"x/b", "x/a", 80, true}}},
		{"Admin Pass, no NetworkPolicy → Baseline Deny",
			objs(adminCNP("pass-y", 10, ingressRule(pass, "y")), baselineCNP("deny-y", 10, ingressRule(deny, "y"))),
			[]probe{{"y/a", "x/a", 80, false}, {"x/b", "x/a", 80, true}}},
		{"Admin Pass, no NetworkPolicy, no Baseline → allowed",
			objs(adminCNP("pass-y", 10, ingressRule(pass, "y"))),
			[]probe{{"y/a", "x/a", 80, true}}},
		{"Admin rule that matches nothing: on to the next layers",
			objs(adminCNP("deny-z", 10, ingressRule(deny, "z")), baselineCNP("deny-y", 10, ingressRule(deny, "y"))),
			[]probe{{"y/a", "x/a", 80, false}, {"x/b", "x/a", 80, true}}},
		{"Baseline Deny under no NetworkPolicy",
			objs(baselineCNP("deny-y", 10, ingressRule(deny, "y"))),
			[]probe{{"y/a", "x/a", 80, false}, {"x/b", "x/a", 80, true}}},
		{"a NetworkPolicy allow over a Baseline Deny",
			objs(baselineCNP("deny-y", 10, ingressRule(deny, "y")), npFrom("allow-y", "y")),
			[]probe{{"y/a", "x/a", 80, true}, {"x/b", "x/a", 80, false}}},
		{"NetworkPolicy isolation over a Baseline Accept",
			objs(baselineCNP("accept-y", 10, ingressRule(accept, "y")), npFrom("isolate")),
			[]probe{{"y/a", "x/a", 80, false}}},
		{"Baseline Pass: nothing after it, allowed",
			objs(baselineCNP("pass-y", 10, ingressRule(pass, "y"))),
			[]probe{{"y/a", "x/a", 80, true}}},
		{"lower priority value first",
			objs(adminCNP("deny-y", 10, ingressRule(deny, "y")), adminCNP("accept-y", 5, ingressRule(accept, "y"))),
			[]probe{{"y/a", "x/a", 80, true}}},
		{"equal priorities: by name (a-deny before b-accept)",
			objs(adminCNP("b-accept", 5, ingressRule(accept, "y")), adminCNP("a-deny", 5, ingressRule(deny, "y"))),
			[]probe{{"y/a", "x/a", 80, false}}},
		{"equal priorities: by name (a-accept before b-deny)",
			objs(adminCNP("b-deny", 5, ingressRule(deny, "y")), adminCNP("a-accept", 5, ingressRule(accept, "y"))),
			[]probe{{"y/a", "x/a", 80, true}}},
		{"equal priorities in Baseline: by name",
			objs(baselineCNP("b-accept", 7, ingressRule(accept, "y")), baselineCNP("a-deny", 7, ingressRule(deny, "y"))),
			[]probe{{"y/a", "x/a", 80, false}}},
		{"the first matching rule of a policy decides",
			objs(adminCNP("ordered", 1, ingressRule(accept, "y", tcpPort(80)), ingressRule(deny, "y"), ingressRule(accept, "y"))),
			[]probe{{"y/a", "x/a", 80, true}, {"y/a", "x/a", 81, false}}},
		{"Admin egress: Accept to house x, then Deny to 0.0.0.0/0",
			objs(adminEgress("egress", 1, to(accept, "", nil, api.ClusterNetworkPolicyEgressPeer{Namespaces: labels("house", "x")}),
				to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"0.0.0.0/0"}}))),
			[]probe{{"x/a", "x/b", 80, true}, {"x/a", "y/a", 80, false}, {"y/a", "x/a", 80, true}}},
		{"Admin egress Pass → NetworkPolicy egress isolation",
			objs(adminEgress("egress", 1, to(pass, "", nil, api.ClusterNetworkPolicyEgressPeer{Namespaces: labels("house", "y")})),
				&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "no-egress"},
					Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}),
			[]probe{{"x/a", "y/a", 80, false}, {"x/a", "x/b", 80, false}}},
	}
	addr := map[string]string{"x/a": "10.0.0.1", "x/b": "10.0.0.2", "y/a": "10.0.0.3"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			world := []runtime.Object{
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"house": "x"}}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "y", Labels: map[string]string{"house": "y"}}},
			}
			for key, ip := range addr {
				ns, name, _ := strings.Cut(key, "/")
				world = append(world, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: ip}}}})
			}
			ups, errs := sync.ConvertObjects(append(world, tt.policies...))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			g := graph.New(graph.Config{NodeName: "node-1"})
			for _, u := range ups {
				g.OnUpdate(u)
			}
			st := graphtest.NewState()
			if err := st.ApplyAll(g.Flush()); err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.probes {
				got := st.Allowed(graphtest.Packet{Src: netip.MustParseAddr(addr[p.from]), Dst: netip.MustParseAddr(addr[p.to]),
					Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: p.port})
				if got != p.want {
					t.Errorf("%s → %s:%d allowed = %v, want %v\n%s", p.from, p.to, p.port, got, p.want, st.Dump())
				}
			}
		})
	}
}

func objs(o ...runtime.Object) []runtime.Object { return o }

// ingressRule is a rule from every pod of namespace house=<house>.
func ingressRule(action api.ClusterNetworkPolicyRuleAction, house string, ps ...api.ClusterNetworkPolicyProtocol) api.ClusterNetworkPolicyIngressRule {
	return from(action, "", ps, api.ClusterNetworkPolicyIngressPeer{Namespaces: labels("house", house)})
}

// adminCNP and baselineCNP apply their ingress rules to every pod of namespace x.
func adminCNP(name string, priority int32, rules ...api.ClusterNetworkPolicyIngressRule) *api.ClusterNetworkPolicy {
	return tierCNP(api.AdminTier, name, priority, rules, nil)
}

func baselineCNP(name string, priority int32, rules ...api.ClusterNetworkPolicyIngressRule) *api.ClusterNetworkPolicy {
	return tierCNP(api.BaselineTier, name, priority, rules, nil)
}

func adminEgress(name string, priority int32, rules ...api.ClusterNetworkPolicyEgressRule) *api.ClusterNetworkPolicy {
	return tierCNP(api.AdminTier, name, priority, nil, rules)
}

func tierCNP(tier api.Tier, name string, priority int32, in []api.ClusterNetworkPolicyIngressRule, eg []api.ClusterNetworkPolicyEgressRule) *api.ClusterNetworkPolicy {
	return &api.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: api.ClusterNetworkPolicySpec{
		Tier: tier, Priority: priority, Subject: api.ClusterNetworkPolicySubject{Namespaces: labels("house", "x")},
		Ingress: in, Egress: eg}}
}

// npFrom is a NetworkPolicy on every pod of x allowing ingress from the namespaces house=<h>
// given; none: isolation.
func npFrom(name string, houses ...string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	for _, h := range houses {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labels("house", h)}}})
	}
	return np
}
