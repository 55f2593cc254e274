package sync_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	api "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// cnp is an Admin-tier ClusterNetworkPolicy "p" of priority 3 on the pods of namespace x, with
// the given rules.
func cnp(ingress []api.ClusterNetworkPolicyIngressRule, egress []api.ClusterNetworkPolicyEgressRule) *api.ClusterNetworkPolicy {
	return &api.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: api.ClusterNetworkPolicySpec{
		Tier: api.AdminTier, Priority: 3, Subject: api.ClusterNetworkPolicySubject{Namespaces: labels("kubernetes.io/metadata.name", "x")},
		Ingress: ingress, Egress: egress}}
}

// cnpPolicy is the expected model of cnp(...): cluster-wide, admin tier, order 3, every pod of
// namespace x.
func cnpPolicy(ingress, egress []model.Rule) model.Policy {
	return model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "p"}, Tier: model.TierAdmin, Order: 3,
		Selector: "all()", NamespaceSelector: `kubernetes.io/metadata.name == "x"`,
		ApplyIngress: len(ingress) > 0, ApplyEgress: len(egress) > 0, IngressRules: ingress, EgressRules: egress}
}

// from and to are ingress and egress rules of one action, peers and protocols.
func from(action api.ClusterNetworkPolicyRuleAction, name string, protocols []api.ClusterNetworkPolicyProtocol,
	peers ...api.ClusterNetworkPolicyIngressPeer) api.ClusterNetworkPolicyIngressRule {
	return api.ClusterNetworkPolicyIngressRule{Name: name, Action: action, From: peers, Protocols: protocols}
}

func to(action api.ClusterNetworkPolicyRuleAction, name string, protocols []api.ClusterNetworkPolicyProtocol,
	peers ...api.ClusterNetworkPolicyEgressPeer) api.ClusterNetworkPolicyEgressRule {
	return api.ClusterNetworkPolicyEgressRule{Name: name, Action: action, To: peers, Protocols: protocols}
}

const (
	accept = api.ClusterNetworkPolicyRuleActionAccept
	deny   = api.ClusterNetworkPolicyRuleActionDeny
	pass   = api.ClusterNetworkPolicyRuleActionPass
)

func tcpPort(n int32) api.ClusterNetworkPolicyProtocol {
	return api.ClusterNetworkPolicyProtocol{TCP: &api.ClusterNetworkPolicyProtocolTCP{DestinationPort: &api.Port{Number: n}}}
}

func udpRange(start, end int32) api.ClusterNetworkPolicyProtocol {
	return api.ClusterNetworkPolicyProtocol{UDP: &api.ClusterNetworkPolicyProtocolUDP{DestinationPort: &api.Port{Range: &api.PortRange{Start: start, End: end}}}}
}

func sctpPort(n int32) api.ClusterNetworkPolicyProtocol {
	return api.ClusterNetworkPolicyProtocol{SCTP: &api.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &api.Port{Number: n}}}
}

func namedPort(n string) api.ClusterNetworkPolicyProtocol {
	return api.ClusterNetworkPolicyProtocol{DestinationNamedPort: n}
}

func protos(ps ...api.ClusterNetworkPolicyProtocol) []api.ClusterNetworkPolicyProtocol { return ps }

func nsPeer(kv ...string) api.ClusterNetworkPolicyIngressPeer {
	return api.ClusterNetworkPolicyIngressPeer{Namespaces: labels(kv...)}
}

func podPeer(ns, pod *metav1.LabelSelector) api.ClusterNetworkPolicyIngressPeer {
	return api.ClusterNetworkPolicyIngressPeer{Pods: &api.NamespacedPod{NamespaceSelector: *ns, PodSelector: *pod}}
}

// rule is an expected model rule: action, protocol, the peer (source of ingress, destination of
// egress), the destination ports and the label naming the API rule.
func rule(dir model.Direction, act model.Action, proto model.Protocol, peer model.Peer, ports []model.Port, label string) model.Rule {
	r := model.Rule{Action: act, Protocol: proto, Label: label}
	if dir == model.Ingress {
		r.Source = peer
	} else {
		r.Destination = peer
	}
	r.Destination.Ports = ports
	return r
}

func TestConvertClusterNetworkPolicy(t *testing.T) {
	in, eg := model.Ingress, model.Egress
	ns := func(name string) model.Peer {
		return model.Peer{NamespaceSelector: `kubernetes.io/metadata.name == "` + name + `"`}
	}
	const l0, l1 = "admin priority 3 ingress rule 0", "admin priority 3 ingress rule 1"
	const e0, e1 = "admin priority 3 egress rule 0", "admin priority 3 egress rule 1"
	tests := []struct {
		name    string
		cnp     *api.ClusterNetworkPolicy
		want    model.Policy
		ignored []string // substrings of the explanations, in order
	}{
		// Tier, priority, subject.
		{"no rules: applies to neither direction",
			cnp(nil, nil), cnpPolicy(nil, nil), nil},
		{"Baseline tier at priority 1000",
			func() *api.ClusterNetworkPolicy {
				c := cnp(nil, nil)
				c.Spec.Tier, c.Spec.Priority = api.BaselineTier, 1000
				return c
			}(),
			func() model.Policy { p := cnpPolicy(nil, nil); p.Tier, p.Order = model.TierBaseline, 1000; return p }(), nil},
		{"subject pods: podSelector AND namespaceSelector",
			func() *api.ClusterNetworkPolicy {
				c := cnp(nil, nil)
				c.Spec.Subject = api.ClusterNetworkPolicySubject{Pods: &api.NamespacedPod{NamespaceSelector: *labels("team", "a"), PodSelector: *labels("app", "web")}}
				return c
			}(),
			func() model.Policy {
				p := cnpPolicy(nil, nil)
				p.Selector, p.NamespaceSelector = `app == "web"`, `team == "a"`
				return p
			}(), nil},
		{"subject namespaces {}: every pod of every namespace",
			func() *api.ClusterNetworkPolicy {
				c := cnp(nil, nil)
				c.Spec.Subject = api.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}
				return c
			}(),
			func() model.Policy { p := cnpPolicy(nil, nil); p.NamespaceSelector = "all()"; return p }(), nil},

		{"subject pods with matchExpressions: the LabelSelector semantics as for NetworkPolicy",
			func() *api.ClusterNetworkPolicy {
				c := cnp(nil, nil)
				c.Spec.Subject = api.ClusterNetworkPolicySubject{Pods: &api.NamespacedPod{
					NamespaceSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "stage"}}}},
					PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
						{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}},
						{Key: "debug", Operator: metav1.LabelSelectorOpDoesNotExist}}}}}
				return c
			}(),
			func() model.Policy {
				p := cnpPolicy(nil, nil)
				p.Selector, p.NamespaceSelector = `tier not in {"db"} && !has(debug)`, `env in {"prod", "stage"}`
				return p
			}(), nil},

		// Actions, rule order and labels.
		{"Accept, Deny, Pass in order, each one model rule named by its API rule",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "a", nil, nsPeer("kubernetes.io/metadata.name", "y")),
				from(deny, "", nil, nsPeer("kubernetes.io/metadata.name", "y")), from(pass, "p", nil, nsPeer("kubernetes.io/metadata.name", "z"))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionAllow, 0, ns("y"), nil, l0+" (a)"), rule(in, model.ActionDeny, 0, ns("y"), nil, l1),
				rule(in, model.ActionPass, 0, ns("z"), nil, "admin priority 3 ingress rule 2 (p)")}, nil), nil},

		// Peers.
		{"ingress pods peer: podSelector AND namespaceSelector; empty namespaceSelector: every namespace",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "", nil, podPeer(labels("team", "a"), labels("app", "db")),
				podPeer(&metav1.LabelSelector{}, labels("app", "web")))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionAllow, 0, model.Peer{Selector: `app == "db"`, NamespaceSelector: `team == "a"`}, nil, l0),
				rule(in, model.ActionAllow, 0, model.Peer{Selector: `app == "web"`, NamespaceSelector: "all()"}, nil, l0)}, nil), nil},
		{"egress networks: both families in one peer, canonical",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"0.0.0.0/0", "::/0", "10.1.2.3/8"}})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionDeny, 0, model.Peer{Nets: prefixes("0.0.0.0/0", "::/0", "10.0.0.0/8")}, nil, e0)}), nil},
		{"egress namespaces and pods peers",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(pass, "", nil, api.ClusterNetworkPolicyEgressPeer{Namespaces: labels("team", "b")},
				api.ClusterNetworkPolicyEgressPeer{Pods: &api.NamespacedPod{NamespaceSelector: *labels("team", "c"), PodSelector: *labels("app", "x")}})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionPass, 0, model.Peer{NamespaceSelector: `team == "b"`}, nil, e0),
				rule(eg, model.ActionPass, 0, model.Peer{Selector: `app == "x"`, NamespaceSelector: `team == "c"`}, nil, e0)}), nil},
		{"egress nodes: the IP addresses of the selected nodes (see TestNodePeers)",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(accept, "", protos(tcpPort(22)), api.ClusterNetworkPolicyEgressPeer{Nodes: labels("role", "infra")})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionAllow, model.ProtocolTCP, model.Peer{Nets: prefixes("172.31.0.1/32", "fd00::1/128")}, []model.Port{one(22)}, e0)}), nil},

		// Protocols.
		{"no protocols: every protocol and port",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "", nil, nsPeer("kubernetes.io/metadata.name", "y"))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionAllow, model.ProtocolAny, ns("y"), nil, l0)}, nil), nil},
		{"tcp number, udp range, sctp number: one rule per protocol, ports of one protocol OR-ed",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(deny, "", protos(tcpPort(80), udpRange(5000, 5100), tcpPort(8080), sctpPort(9003), tcpPort(80)),
				nsPeer("kubernetes.io/metadata.name", "y"))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionDeny, model.ProtocolTCP, ns("y"), []model.Port{one(80), one(8080)}, l0),
				rule(in, model.ActionDeny, model.ProtocolUDP, ns("y"), []model.Port{{First: 5000, Last: 5100}}, l0),
				rule(in, model.ActionDeny, model.ProtocolSCTP, ns("y"), []model.Port{one(9003)}, l0)}, nil), nil},
		{"udp and sctp without destinationPort, an sctp range: every UDP port, SCTP's range",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(pass, "", protos(api.ClusterNetworkPolicyProtocol{UDP: &api.ClusterNetworkPolicyProtocolUDP{}},
				api.ClusterNetworkPolicyProtocol{SCTP: &api.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &api.Port{Range: &api.PortRange{Start: 9000, End: 9010}}}}),
				api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"fd00::/8"}})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionPass, model.ProtocolUDP, model.Peer{Nets: prefixes("fd00::/8")}, nil, e0),
				rule(eg, model.ActionPass, model.ProtocolSCTP, model.Peer{Nets: prefixes("fd00::/8")}, []model.Port{{First: 9000, Last: 9010}}, e0)}), nil},
		{"tcp without destinationPort: every TCP port, whatever other TCP entries say",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "", protos(tcpPort(80), api.ClusterNetworkPolicyProtocol{TCP: &api.ClusterNetworkPolicyProtocolTCP{}}),
				nsPeer("kubernetes.io/metadata.name", "y"))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionAllow, model.ProtocolTCP, ns("y"), nil, l0)}, nil), nil},
		{"destinationNamedPort: a named port of any protocol, beside numbered ports",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(accept, "", protos(namedPort("web"), tcpPort(8080), namedPort("dns")),
				api.ClusterNetworkPolicyEgressPeer{Namespaces: labels("team", "b")})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionAllow, model.ProtocolAny, model.Peer{NamespaceSelector: `team == "b"`}, []model.Port{{Name: "web"}, {Name: "dns"}}, e0),
				rule(eg, model.ActionAllow, model.ProtocolTCP, model.Peer{NamespaceSelector: `team == "b"`}, []model.Port{one(8080)}, e0)}), nil},
		{"peers × protocols, peer-major, keeping the rule's place",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(deny, "", protos(tcpPort(80), udpRange(53, 54)), nsPeer("kubernetes.io/metadata.name", "y"), nsPeer("kubernetes.io/metadata.name", "z")),
				from(accept, "", nil, nsPeer("kubernetes.io/metadata.name", "y"))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionDeny, model.ProtocolTCP, ns("y"), []model.Port{one(80)}, l0),
				rule(in, model.ActionDeny, model.ProtocolUDP, ns("y"), []model.Port{{First: 53, Last: 54}}, l0),
				rule(in, model.ActionDeny, model.ProtocolTCP, ns("z"), []model.Port{one(80)}, l0),
				rule(in, model.ActionDeny, model.ProtocolUDP, ns("z"), []model.Port{{First: 53, Last: 54}}, l0),
				rule(in, model.ActionAllow, 0, ns("y"), nil, l1)}, nil), nil},

		{"domainNames in an Accept rule: a peer of its patterns, canonical, sorted, distinct; the rule's other peers stay",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(accept, "dns", protos(tcpPort(443)), api.ClusterNetworkPolicyEgressPeer{DomainNames: []api.DomainName{"Kubernetes.IO.", "*.example.com", "kubernetes.io"}},
				api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"192.0.2.0/24"}})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionAllow, model.ProtocolTCP, model.Peer{DomainNames: []string{"*.example.com", "kubernetes.io"}}, []model.Port{one(443)}, e0+" (dns)"),
				rule(eg, model.ActionAllow, model.ProtocolTCP, model.Peer{Nets: prefixes("192.0.2.0/24")}, []model.Port{one(443)}, e0+" (dns)")}),
			nil},
		{"domainNames alone in an Accept rule: the rule allows the names' addresses only",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(accept, "", nil, api.ClusterNetworkPolicyEgressPeer{DomainNames: []api.DomainName{"*.example.com"}}),
				to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"0.0.0.0/0"}})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionAllow, 0, model.Peer{DomainNames: []string{"*.example.com"}}, nil, e0),
				rule(eg, model.ActionDeny, 0, model.Peer{Nets: prefixes("0.0.0.0/0")}, nil, e1)}),
			nil},
		// What is not enforced: never a wider allow.
		{"domainNames in a Deny rule (which the API does not allow): the rule denies everything",
			cnp(nil, []api.ClusterNetworkPolicyEgressRule{to(deny, "", protos(tcpPort(443)), api.ClusterNetworkPolicyEgressPeer{DomainNames: []api.DomainName{"kubernetes.io"}},
				api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"192.0.2.0/24"}})}),
			cnpPolicy(nil, []model.Rule{rule(eg, model.ActionDeny, 0, model.Peer{}, nil, e0)}),
			[]string{"not supported in a Deny rule, which denies everything instead"}},
		{"a peer with no known field (a newer API's) in a Pass rule: the rule denies everything",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(pass, "", nil, api.ClusterNetworkPolicyIngressPeer{})}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionDeny, 0, model.Peer{}, nil, l0)}, nil),
			[]string{"from[0]: a peer without a known field: not supported in a Pass rule"}},
		{"a protocol entry with no known field in an Accept rule: matches nothing, the others stay",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "", protos(api.ClusterNetworkPolicyProtocol{}, tcpPort(80)), nsPeer("kubernetes.io/metadata.name", "y"))}, nil),
			cnpPolicy([]model.Rule{rule(in, model.ActionAllow, model.ProtocolTCP, ns("y"), []model.Port{one(80)}, l0)}, nil),
			[]string{"1 protocol entries without a known field: not supported, matches nothing"}},
		{"only protocol entries with no known field in an Accept rule: the rule matches nothing",
			cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "", protos(api.ClusterNetworkPolicyProtocol{}), nsPeer("kubernetes.io/metadata.name", "y"))}, nil),
			func() model.Policy { p := cnpPolicy(nil, nil); p.ApplyIngress = true; return p }(),
			[]string{"matches nothing"}},
	}
	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"role": "infra"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.31.0.1"},
				{Type: corev1.NodeInternalIP, Address: "fd00::1"}, {Type: corev1.NodeHostName, Address: "n1"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{"role": "worker"}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.31.0.2"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ignored, err := sync.ConvertClusterNetworkPolicy(tt.cnp, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if len(ignored) != len(tt.ignored) {
				t.Fatalf("ignored %q, want %d explanations like %q", ignored, len(tt.ignored), tt.ignored)
			}
			for i, want := range tt.ignored {
				if !strings.Contains(ignored[i], want) {
					t.Errorf("ignored[%d] = %q, want it to say %q", i, ignored[i], want)
				}
			}

			// the same policy written as v1alpha2 converts to the same model
			beta, err := sync.ClusterNetworkPolicyV1beta1(asV1alpha2(t, tt.cnp))
			if err != nil {
				t.Fatal(err)
			}
			gotAlpha, ignoredAlpha, err := sync.ConvertClusterNetworkPolicy(beta, nodes)
			if err != nil {
				t.Fatalf("as v1alpha2: %v", err)
			}
			if !reflect.DeepEqual(gotAlpha, got) || !reflect.DeepEqual(ignoredAlpha, ignored) {
				t.Errorf("as v1alpha2:\ngot  %+v %q\nwant %+v %q", gotAlpha, ignoredAlpha, got, ignored)
			}
		})
	}
}

// asV1alpha2 is p written as v1alpha2: the same JSON under the other apiVersion, decoded
// strictly (a field v1alpha2 lacks fails the test).
func asV1alpha2(t *testing.T, p *api.ClusterNetworkPolicy) *apiv1alpha2.ClusterNetworkPolicy {
	t.Helper()
	p = p.DeepCopy()
	p.APIVersion, p.Kind = "policy.networking.k8s.io/v1alpha2", "ClusterNetworkPolicy"
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	out := &apiv1alpha2.ClusterNetworkPolicy{}
	if err := yaml.UnmarshalStrict(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestClusterNetworkPolicyV1beta1: a v1alpha2 ClusterNetworkPolicy using every field of the
// schema comes out as the same policy written as v1beta1, field for field.
func TestClusterNetworkPolicyV1beta1(t *testing.T) {
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: k + "-x", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}
	}
	alpha := &apiv1alpha2.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1alpha2", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "every-field", ResourceVersion: "42", Labels: map[string]string{"team": "net"}},
		Spec: apiv1alpha2.ClusterNetworkPolicySpec{
			Tier: apiv1alpha2.BaselineTier, Priority: 7,
			Subject: apiv1alpha2.ClusterNetworkPolicySubject{Pods: &apiv1alpha2.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("app", "web")}},
			Ingress: []apiv1alpha2.ClusterNetworkPolicyIngressRule{{
				Name: "in", Action: apiv1alpha2.ClusterNetworkPolicyRuleActionDeny,
				From: []apiv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("ns", "y")},
					{Pods: &apiv1alpha2.NamespacedPod{NamespaceSelector: *sel("ns", "z"), PodSelector: *sel("app", "db")}}},
				Protocols: []apiv1alpha2.ClusterNetworkPolicyProtocol{
					{TCP: &apiv1alpha2.ClusterNetworkPolicyProtocolTCP{DestinationPort: &apiv1alpha2.Port{Number: 80}}},
					{UDP: &apiv1alpha2.ClusterNetworkPolicyProtocolUDP{DestinationPort: &apiv1alpha2.Port{Range: &apiv1alpha2.PortRange{Start: 53, End: 54}}}},
					{SCTP: &apiv1alpha2.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &apiv1alpha2.Port{Number: 9003}}},
					{DestinationNamedPort: "web"}},
			}},
			Egress: []apiv1alpha2.ClusterNetworkPolicyEgressRule{{
				Name: "out", Action: apiv1alpha2.ClusterNetworkPolicyRuleActionAccept,
				To: []apiv1alpha2.ClusterNetworkPolicyEgressPeer{{Namespaces: sel("ns", "y")},
					{Pods: &apiv1alpha2.NamespacedPod{NamespaceSelector: *sel("ns", "z"), PodSelector: *sel("app", "db")}},
					{Nodes: sel("role", "infra")}, {Networks: []apiv1alpha2.CIDR{"10.0.0.0/8", "fd00::/8"}},
					{DomainNames: []apiv1alpha2.DomainName{"kubernetes.io", "*.example.com"}}},
				Protocols: []apiv1alpha2.ClusterNetworkPolicyProtocol{{TCP: &apiv1alpha2.ClusterNetworkPolicyProtocolTCP{}}},
			}, {Name: "pass", Action: apiv1alpha2.ClusterNetworkPolicyRuleActionPass,
				To: []apiv1alpha2.ClusterNetworkPolicyEgressPeer{{Namespaces: &metav1.LabelSelector{}}}}},
		},
	}
	want := &api.ClusterNetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy.networking.k8s.io/v1beta1", Kind: "ClusterNetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: "every-field", ResourceVersion: "42", Labels: map[string]string{"team": "net"}},
		Spec: api.ClusterNetworkPolicySpec{
			Tier: api.BaselineTier, Priority: 7,
			Subject: api.ClusterNetworkPolicySubject{Pods: &api.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("app", "web")}},
			Ingress: []api.ClusterNetworkPolicyIngressRule{{
				Name: "in", Action: api.ClusterNetworkPolicyRuleActionDeny,
				From: []api.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("ns", "y")},
					{Pods: &api.NamespacedPod{NamespaceSelector: *sel("ns", "z"), PodSelector: *sel("app", "db")}}},
				Protocols: []api.ClusterNetworkPolicyProtocol{
					{TCP: &api.ClusterNetworkPolicyProtocolTCP{DestinationPort: &api.Port{Number: 80}}},
					{UDP: &api.ClusterNetworkPolicyProtocolUDP{DestinationPort: &api.Port{Range: &api.PortRange{Start: 53, End: 54}}}},
					{SCTP: &api.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &api.Port{Number: 9003}}},
					{DestinationNamedPort: "web"}},
			}},
			Egress: []api.ClusterNetworkPolicyEgressRule{{
				Name: "out", Action: api.ClusterNetworkPolicyRuleActionAccept,
				To: []api.ClusterNetworkPolicyEgressPeer{{Namespaces: sel("ns", "y")},
					{Pods: &api.NamespacedPod{NamespaceSelector: *sel("ns", "z"), PodSelector: *sel("app", "db")}},
					{Nodes: sel("role", "infra")}, {Networks: []api.CIDR{"10.0.0.0/8", "fd00::/8"}},
					{DomainNames: []api.DomainName{"kubernetes.io", "*.example.com"}}},
				Protocols: []api.ClusterNetworkPolicyProtocol{{TCP: &api.ClusterNetworkPolicyProtocolTCP{}}},
			}, {Name: "pass", Action: api.ClusterNetworkPolicyRuleActionPass,
				To: []api.ClusterNetworkPolicyEgressPeer{{Namespaces: &metav1.LabelSelector{}}}}},
		},
	}
	got, err := sync.ClusterNetworkPolicyV1beta1(alpha)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	mAlpha, ignAlpha, errAlpha := sync.ConvertClusterNetworkPolicy(got, nil)
	mBeta, ignBeta, errBeta := sync.ConvertClusterNetworkPolicy(want, nil)
	if errAlpha != nil || errBeta != nil || !reflect.DeepEqual(mAlpha, mBeta) || !reflect.DeepEqual(ignAlpha, ignBeta) {
		t.Errorf("models differ:\nv1alpha2 %+v %q %v\nv1beta1  %+v %q %v", mAlpha, ignAlpha, errAlpha, mBeta, ignBeta, errBeta)
	}
}

// TestNodePeers: a nodes peer is the IP addresses (every family, host names skipped) of the
// nodes its selector selects; a peer that selects no address leaves its rule out — a rule
// without Nets would match every address.
func TestNodePeers(t *testing.T) {
	node := func(name, role string, addrs ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"role": role}}}
		for _, a := range addrs {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name + ".example"})
		return n
	}
	c := cnp(nil, []api.ClusterNetworkPolicyEgressRule{
		to(accept, "", nil, api.ClusterNetworkPolicyEgressPeer{Nodes: labels("role", "infra")}, api.ClusterNetworkPolicyEgressPeer{Nodes: &metav1.LabelSelector{}}),
		to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Nodes: labels("role", "none")}, api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"0.0.0.0/0"}}),
	})
	tests := []struct {
		name  string
		nodes []*corev1.Node
		want  [][]string // the Nets of each egress rule
	}{
		{"no nodes: only the networks rule", nil, [][]string{{"0.0.0.0/0"}}},
		{"one infra node, dual stack, an IPv4-mapped address unmapped",
			[]*corev1.Node{node("a", "infra", "172.31.0.1", "fd00:172:31::1", "::ffff:172.31.0.9")},
			[][]string{{"172.31.0.1/32", "172.31.0.9/32", "fd00:172:31::1/128"}, {"172.31.0.1/32", "172.31.0.9/32", "fd00:172:31::1/128"}, {"0.0.0.0/0"}}},
		{"two nodes, sorted, the worker only in the empty selector's peer",
			[]*corev1.Node{node("b", "worker", "172.31.0.2"), node("a", "infra", "172.31.0.1")},
			[][]string{{"172.31.0.1/32"}, {"172.31.0.1/32", "172.31.0.2/32"}, {"0.0.0.0/0"}}},
		{"a node without an IP address", []*corev1.Node{node("a", "infra")}, [][]string{{"0.0.0.0/0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := sync.ConvertClusterNetworkPolicy(c, tt.nodes)
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, r := range p.EgressRules {
				var nets []string
				for _, n := range r.Destination.Nets {
					nets = append(nets, n.String())
				}
				got = append(got, nets)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("nets %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConvertClusterNetworkPolicyInvalid(t *testing.T) {
	y := nsPeer("kubernetes.io/metadata.name", "y")
	spec := func(f func(*api.ClusterNetworkPolicy)) *api.ClusterNetworkPolicy {
		c := cnp([]api.ClusterNetworkPolicyIngressRule{from(accept, "", nil, y)}, nil)
		f(c)
		return c
	}
	many := func(n int) []api.ClusterNetworkPolicyIngressRule {
		rs := make([]api.ClusterNetworkPolicyIngressRule, n)
		for i := range rs {
			rs[i] = from(deny, "", nil, y)
		}
		return rs
	}
	tests := []struct {
		name, wantErr string
		cnp           *api.ClusterNetworkPolicy
	}{
		{"no name", "metadata.name", spec(func(c *api.ClusterNetworkPolicy) { c.Name = "" })},
		{"unknown tier", "spec.tier", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Tier = "Developer" })},
		{"priority below 0", "spec.priority", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Priority = -1 })},
		{"priority above 1000", "spec.priority", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Priority = 1001 })},
		{"no subject", "spec.subject", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Subject = api.ClusterNetworkPolicySubject{} })},
		{"both subjects", "spec.subject", spec(func(c *api.ClusterNetworkPolicy) {
			c.Spec.Subject.Pods = &api.NamespacedPod{}
		})},
		{"a bad subject selector", "spec.subject.namespaces", spec(func(c *api.ClusterNetworkPolicy) {
			c.Spec.Subject.Namespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
		})},
		{"unknown action", "spec.ingress[0].action", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Ingress[0].Action = "Allow" })},
		{"no peers", "spec.ingress[0].from", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Ingress[0].From = nil })},
		{"a peer with two fields", "spec.ingress[0].from[0]", spec(func(c *api.ClusterNetworkPolicy) {
			c.Spec.Ingress[0].From[0].Pods = &api.NamespacedPod{}
		})},
		{"a bad CIDR", "spec.egress[0].to[0].networks[0]", spec(func(c *api.ClusterNetworkPolicy) {
			c.Spec.Egress = []api.ClusterNetworkPolicyEgressRule{to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"10.0.0.0/33"}})}
		})},
		{"a bad node selector", "spec.egress[0].to[0].nodes", spec(func(c *api.ClusterNetworkPolicy) {
			c.Spec.Egress = []api.ClusterNetworkPolicyEgressRule{to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{
				Nodes: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn}}}})}
		})},
		{"port 0", "protocols[0].tcp.destinationPort.number", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Ingress[0].Protocols = protos(tcpPort(0)) })},
		{"port 65536", "protocols[0].tcp.destinationPort.number", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Ingress[0].Protocols = protos(tcpPort(65536)) })},
		{"a range whose start is not below its end", "protocols[0].udp.destinationPort.range", spec(func(c *api.ClusterNetworkPolicy) {
			c.Spec.Ingress[0].Protocols = protos(udpRange(53, 53))
		})},
		{"a port with number and range", "protocols[0].sctp.destinationPort", spec(func(c *api.ClusterNetworkPolicy) {
			p := sctpPort(9003)
			p.SCTP.DestinationPort.Range = &api.PortRange{Start: 1, End: 2}
			c.Spec.Ingress[0].Protocols = protos(p)
		})},
		{"a protocol entry with two fields", "protocols[0]", spec(func(c *api.ClusterNetworkPolicy) {
			p := tcpPort(80)
			p.DestinationNamedPort = "web"
			c.Spec.Ingress[0].Protocols = protos(p)
		})},
		{"26 rules", "at most 25", spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Ingress = many(26) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := sync.ConvertClusterNetworkPolicy(tt.cnp, nil)
			if err == nil {
				t.Fatalf("no error; policy %+v", p)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not name %q", err, tt.wantErr)
			}
		})
	}
	// 25 rules are fine
	if _, _, err := sync.ConvertClusterNetworkPolicy(spec(func(c *api.ClusterNetworkPolicy) { c.Spec.Ingress = many(25) }), nil); err != nil {
		t.Errorf("25 rules: %v", err)
	}
}

// TestLoadDirClusterNetworkPolicies: manifests of ClusterNetworkPolicies (node peers resolved
// against the Nodes among them), a policy enforced in part reported as such, a bad one skipped.
func TestLoadDirClusterNetworkPolicies(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/os: linux}}
status: {addresses: [{type: InternalIP, address: 172.31.0.1}, {type: Hostname, address: n1}]}
---
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: to-nodes}
spec:
  tier: Admin
  priority: 5
  subject: {namespaces: {}}
  egress:
  - {action: Accept, to: [{nodes: {matchLabels: {kubernetes.io/os: linux}}}], protocols: [{tcp: {destinationPort: {number: 22}}}]}
  - {action: Accept, to: [{domainNames: [kubernetes.io]}]}
---
apiVersion: policy.networking.k8s.io/v1alpha2
kind: ClusterNetworkPolicy
metadata: {name: bad}
spec: {tier: Developer, priority: 5, subject: {namespaces: {}}}
`
	if err := os.WriteFile(filepath.Join(dir, "cnp.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	ups, errs := sync.LoadDir(dir)
	var pols []model.Policy
	for _, u := range ups {
		if ps, ok := u.(model.PolicySet); ok {
			pols = append(pols, ps.Policy)
		}
	}
	want := []model.Policy{{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "to-nodes"}, Tier: model.TierAdmin, Order: 5,
		Selector: "all()", NamespaceSelector: "all()", ApplyEgress: true, EgressRules: []model.Rule{
			rule(model.Egress, model.ActionAllow, model.ProtocolTCP, model.Peer{Nets: prefixes("172.31.0.1/32")}, []model.Port{one(22)},
				"admin priority 5 egress rule 0"),
			rule(model.Egress, model.ActionAllow, 0, model.Peer{DomainNames: []string{"kubernetes.io"}}, nil, "admin priority 5 egress rule 1")}}}
	if !reflect.DeepEqual(pols, want) {
		t.Errorf("policies %+v\nwant %+v", pols, want)
	}
	if len(errs) != 1 {
		t.Fatalf("errors %v, want the bad policy only (domainNames are enforced)", errs)
	}
	var partial *sync.PartlyEnforcedError
	if errors.As(errs[0], &partial) {
		t.Errorf("error %q: to-nodes reported as enforced in part", errs[0])
	}
	if !strings.Contains(errs[0].Error(), "(document 3): ClusterNetworkPolicy bad: spec.tier") {
		t.Errorf("error %q, want the bad policy skipped", errs[0])
	}
}

// TestLoadDirClusterNetworkPolicyVersions: LoadDir reads ClusterNetworkPolicies of both
// versions into the same model; one policy written in both is one object, the second a
// duplicate.
func TestLoadDirClusterNetworkPolicyVersions(t *testing.T) {
	manifest := func(version string) string {
		return `apiVersion: policy.networking.k8s.io/` + version + `
kind: ClusterNetworkPolicy
metadata: {name: web}
spec:
  tier: Baseline
  priority: 9
  subject: {pods: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: x}}, podSelector: {matchLabels: {app: web}}}}
  ingress:
  - {name: from-y, action: Accept, from: [{namespaces: {matchLabels: {kubernetes.io/metadata.name: "y"}}}], protocols: [{tcp: {destinationPort: {range: {start: 80, end: 89}}}}, {destinationNamedPort: http}]}
  - {action: Deny, from: [{namespaces: {}}]}
  egress:
  - {action: Deny, to: [{networks: [10.0.0.0/8]}]}
`
	}
	load := func(docs ...string) ([]model.Update, []error) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "cnp.yaml"), []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return sync.LoadDir(dir)
	}
	beta, errs := load(manifest("v1beta1"))
	if len(errs) != 0 {
		t.Fatalf("v1beta1: %v", errs)
	}
	alpha, errs := load(manifest("v1alpha2"))
	if len(errs) != 0 {
		t.Fatalf("v1alpha2: %v", errs)
	}
	if !reflect.DeepEqual(alpha, beta) {
		t.Errorf("v1alpha2 %+v\nv1beta1  %+v", alpha, beta)
	}
	n := 0
	for _, u := range beta {
		if ps, ok := u.(model.PolicySet); ok && ps.Policy.Key.Name == "web" && len(ps.Policy.IngressRules) == 3 {
			n++
		}
	}
	if n != 1 {
		t.Errorf("updates %+v, want the policy web with 3 ingress rules", beta)
	}
	both, errs := load(manifest("v1beta1"), manifest("v1alpha2"))
	if !reflect.DeepEqual(both, beta) || len(errs) != 1 || !strings.Contains(errs[0].Error(), "duplicate") {
		t.Errorf("both versions: updates %+v, errors %v; want the first, the second a duplicate", both, errs)
	}
}
