package sync_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

func ptr[T any](v T) *T { return &v }

var (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
)

func portNum(p int32) *intstr.IntOrString   { return ptr(intstr.FromInt32(p)) }
func portName(n string) *intstr.IntOrString { return ptr(intstr.FromString(n)) }

func labels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func netpol(spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "np"}, Spec: spec}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func allow(proto model.Protocol, src, dst model.Peer) model.Rule {
	return model.Rule{Action: model.ActionAllow, Protocol: proto, Source: src, Destination: dst}
}

func one(p uint16) model.Port { return model.Port{First: p, Last: p} }

// policy is the expected model of netpol(...) with the given selector, directions and rules.
func policy(sel string, in, eg bool, ingress, egress []model.Rule) model.Policy {
	return model.Policy{
		Key:  model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "np"},
		Tier: model.TierNetworkPolicy, Order: 1000, Namespace: "x", Selector: sel,
		ApplyIngress: in, ApplyEgress: eg, IngressRules: ingress, EgressRules: egress,
	}
}

// everyone is a peer that matches every endpoint and address.
var everyone = model.Peer{}

// convertCases are NetworkPolicy specs (of netpol) and their models.
var convertCases = []struct {
	name string
	spec networkingv1.NetworkPolicySpec
	want model.Policy
}{
	// Selection and policyTypes (defaulting as the API server does when absent).
	{"empty podSelector selects every pod of the namespace; no rules isolates ingress",
		networkingv1.NetworkPolicySpec{},
		policy("all()", true, false, nil, nil)},
	{"policyTypes absent, egress rules present: both directions",
		networkingv1.NetworkPolicySpec{PodSelector: *labels("app", "a"), Egress: []networkingv1.NetworkPolicyEgressRule{{}}},
		policy(`app == "a"`, true, true, nil, []model.Rule{allow(model.ProtocolAny, everyone, everyone)})},
	{"policyTypes absent, only ingress rules: ingress only",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, everyone, everyone)}, nil)},
	{"policyTypes [Egress] with no rules: egress isolation only",
		networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
		policy("all()", false, true, nil, nil)},
	{"policyTypes [Egress] ignores ingress rules",
		networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
		policy("all()", false, true, nil, nil)},
	{"policyTypes [Ingress, Egress] with no rules: deny all both ways",
		networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
		policy("all()", true, true, nil, nil)},
	{"matchExpressions: NotIn (matches a missing key), DoesNotExist, Exists, In",
		networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod", "dev"}},
			{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: "app", Operator: metav1.LabelSelectorOpExists},
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}},
		}}},
		policy(`env not in {"dev", "prod"} && !has(legacy) && has(app) && tier in {"web"}`, true, false, nil, nil)},

	// Peers.
	{"ingress rule with no from: all sources (every namespace, every address)",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: portNum(80)}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolTCP, everyone, model.Peer{Ports: []model.Port{one(80)}})}, nil)},
	{"empty from list is the same as no from",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, everyone, everyone)}, nil)},
	{"podSelector only: pods of the policy's namespace (Selector without NamespaceSelector)",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: labels("app", "b")}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, model.Peer{Selector: `app == "b"`}, everyone)}, nil)},
	{"empty podSelector only: every pod of the policy's namespace",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, model.Peer{Selector: "all()"}, everyone)}, nil)},
	{"namespaceSelector only: every pod of the matching namespaces",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labels("team", "blue")}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, model.Peer{NamespaceSelector: `team == "blue"`}, everyone)}, nil)},
	{"empty namespaceSelector: every pod of every namespace (not external addresses)",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, model.Peer{NamespaceSelector: "all()"}, everyone)}, nil)},
	{"podSelector and namespaceSelector in one peer: AND",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: labels("app", "b"), NamespaceSelector: labels("team", "blue")}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, model.Peer{Selector: `app == "b"`, NamespaceSelector: `team == "blue"`}, everyone)}, nil)},
	{"two peers: OR, one rule each",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: labels("app", "b")}, {NamespaceSelector: labels("team", "blue")}}}}},
		policy("all()", true, false, []model.Rule{
			allow(model.ProtocolAny, model.Peer{Selector: `app == "b"`}, everyone),
			allow(model.ProtocolAny, model.Peer{NamespaceSelector: `team == "blue"`}, everyone)}, nil)},
	{"ipBlock with except (IPv4)",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16", "10.2.3.4/32"}}}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny,
			model.Peer{Nets: prefixes("10.0.0.0/8"), NotNets: prefixes("10.1.0.0/16", "10.2.3.4/32")}, everyone)}, nil)},
	{"ipBlock IPv6 with except, egress destination",
		networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/64", Except: []string{"fd00::1/128"}}}}}}},
		policy("all()", false, true, nil, []model.Rule{allow(model.ProtocolAny, everyone,
			model.Peer{Nets: prefixes("fd00::/64"), NotNets: prefixes("fd00::1/128")})})},
	{"ipBlock with host bits set is masked as the API server does",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.1.7/24"}}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolAny, model.Peer{Nets: prefixes("192.168.1.0/24")}, everyone)}, nil)},
	{"egress podSelector peer with ports: destination selector and ports together",
		networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: labels("app", "dns")}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: portNum(53)}, {Protocol: &tcp, Port: portNum(53)}}}}},
		policy("all()", true, true, nil, []model.Rule{
			allow(model.ProtocolUDP, everyone, model.Peer{Selector: `app == "dns"`, Ports: []model.Port{one(53)}}),
			allow(model.ProtocolTCP, everyone, model.Peer{Selector: `app == "dns"`, Ports: []model.Port{one(53)}})})},

	// Ports.
	{"port without protocol is TCP",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: portNum(8080)}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolTCP, everyone, model.Peer{Ports: []model.Port{one(8080)}})}, nil)},
	{"ports of one protocol are OR-ed in one rule",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: &tcp, Port: portNum(80)}, {Port: portNum(443)}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolTCP, everyone, model.Peer{Ports: []model.Port{one(80), one(443)}})}, nil)},
	{"endPort: a range",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: &tcp, Port: portNum(32000), EndPort: ptr(int32(32768))}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolTCP, everyone, model.Peer{Ports: []model.Port{{First: 32000, Last: 32768}}})}, nil)},
	{"named port, resolved per destination endpoint by the graph",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: portName("http")}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolTCP, everyone, model.Peer{Ports: []model.Port{{Name: "http"}}})}, nil)},
	{"protocol without a port: every port of that protocol",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolUDP, everyone, everyone)}, nil)},
	{"protocol without a port absorbs that protocol's ports",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: &udp, Port: portNum(53)}, {Protocol: &udp}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolUDP, everyone, everyone)}, nil)},
	{"an empty port entry is all TCP ports",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolTCP, everyone, everyone)}, nil)},
	{"SCTP",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &sctp, Port: portNum(9999)}}}}},
		policy("all()", true, false, []model.Rule{allow(model.ProtocolSCTP, everyone, model.Peer{Ports: []model.Port{one(9999)}})}, nil)},
	{"peers × protocols: each peer gets each protocol's ports",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: labels("app", "b")}, {IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: portNum(80)}, {Protocol: &udp, Port: portName("dns")}}}}},
		policy("all()", true, false, []model.Rule{
			allow(model.ProtocolTCP, model.Peer{Selector: `app == "b"`}, model.Peer{Ports: []model.Port{one(80)}}),
			allow(model.ProtocolUDP, model.Peer{Selector: `app == "b"`}, model.Peer{Ports: []model.Port{{Name: "dns"}}}),
			allow(model.ProtocolTCP, model.Peer{Nets: prefixes("192.0.2.0/24")}, model.Peer{Ports: []model.Port{one(80)}}),
			allow(model.ProtocolUDP, model.Peer{Nets: prefixes("192.0.2.0/24")}, model.Peer{Ports: []model.Port{{Name: "dns"}}})}, nil)},
	{"rules stay in order across several ingress rules",
		networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: labels("app", "b")}}},
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: labels("app", "c")}}}}},
		policy("all()", true, false, []model.Rule{
			allow(model.ProtocolAny, model.Peer{Selector: `app == "b"`}, everyone),
			allow(model.ProtocolAny, model.Peer{Selector: `app == "c"`}, everyone)}, nil)},
}

func TestConvertNetworkPolicy(t *testing.T) {
	for _, tt := range convertCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sync.ConvertNetworkPolicy(netpol(tt.spec))
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			// Every selector that leaves the package must parse in the graph's language.
			for _, s := range selectorsOf(got) {
				if _, err := selector.Parse(s); err != nil {
					t.Errorf("selector %q does not parse: %v", s, err)
				}
			}
		})
	}
}

func selectorsOf(p model.Policy) []string {
	out := []string{p.Selector}
	for _, r := range append(append([]model.Rule{}, p.IngressRules...), p.EgressRules...) {
		for _, s := range []string{r.Source.Selector, r.Source.NamespaceSelector, r.Destination.Selector, r.Destination.NamespaceSelector} {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestSelectorSemantics evaluates converted selectors on label sets: the Kubernetes edge cases
// (NotIn and != on a missing key match; nil vs empty selectors) hold in what the graph sees.
func TestSelectorSemantics(t *testing.T) {
	notIn := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}}}
	tests := []struct {
		name   string
		sel    metav1.LabelSelector
		labels map[string]string
		want   bool
	}{
		{"NotIn matches a pod without the key", notIn, map[string]string{"app": "a"}, true},
		{"NotIn matches another value", notIn, map[string]string{"env": "dev"}, true},
		{"NotIn excludes the value", notIn, map[string]string{"env": "prod"}, false},
		{"empty selector matches a pod without labels", metav1.LabelSelector{}, nil, true},
		{"matchLabels with empty value needs the key", *labels("k", ""), map[string]string{}, false},
		{"matchLabels with empty value matches the empty value", *labels("k", ""), map[string]string{"k": ""}, true},
		{"DoesNotExist", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			map[string]string{"k": "v"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sync.ConvertNetworkPolicy(netpol(networkingv1.NetworkPolicySpec{PodSelector: tt.sel}))
			if err != nil {
				t.Fatal(err)
			}
			if m := selector.MustParse(got.Selector).Evaluate(selector.Map(tt.labels)); m != tt.want {
				t.Errorf("selector %q on %v = %v, want %v", got.Selector, tt.labels, m, tt.want)
			}
		})
	}
}

// TestNilVersusEmptyPeerSelectors: in a peer, a nil selector is "not restricted by this" while an
// empty one is "all"; the combinations mean different things.
func TestNilVersusEmptyPeerSelectors(t *testing.T) {
	tests := []struct {
		name string
		peer networkingv1.NetworkPolicyPeer
		want model.Peer
	}{
		{"podSelector {} alone: all pods of the policy's namespace", networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}},
			model.Peer{Selector: "all()"}},
		{"namespaceSelector {} alone: all pods of all namespaces", networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}},
			model.Peer{NamespaceSelector: "all()"}},
		{"both {}: all pods of all namespaces", networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}, NamespaceSelector: &metav1.LabelSelector{}},
			model.Peer{Selector: "all()", NamespaceSelector: "all()"}},
		{"podSelector set, namespaceSelector {}: those pods in all namespaces",
			networkingv1.NetworkPolicyPeer{PodSelector: labels("app", "b"), NamespaceSelector: &metav1.LabelSelector{}},
			model.Peer{Selector: `app == "b"`, NamespaceSelector: "all()"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sync.ConvertNetworkPolicy(netpol(networkingv1.NetworkPolicySpec{
				Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{tt.peer}}}}))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.IngressRules) != 1 || !reflect.DeepEqual(got.IngressRules[0].Source, tt.want) {
				t.Errorf("rules %+v, want one with source %+v", got.IngressRules, tt.want)
			}
			if !got.IngressRules[0].Source.HasEndpointMatch() {
				t.Error("a selector peer must restrict to endpoints (not match external addresses)")
			}
		})
	}
}

func ingressFrom(p networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
	return networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{p}}}}
}

func ingressPort(p networkingv1.NetworkPolicyPort) networkingv1.NetworkPolicySpec {
	return networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{p}}}}
}

// invalidCases are NetworkPolicy specs (of netpol) the API server refuses, and what the
// converter's error names.
var invalidCases = []struct {
	name    string
	spec    networkingv1.NetworkPolicySpec
	wantErr string
}{
	{"invalid CIDR", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}), "spec.ingress[0].from[0].ipBlock.cidr"},
	{"CIDR without length", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1"}}), "ipBlock.cidr"},
	{"invalid except", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"nope"}}}), "ipBlock.except[0]"},
	{"except outside the CIDR", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"11.0.0.0/16"}}}), "not a strict subset"},
	{"except equal to the CIDR", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.0.0.0/8"}}}), "not a strict subset"},
	{"except of the other family", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: []string{"10.0.0.0/8"}}}), "not a strict subset"},
	{"ipBlock with a selector", ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}}), "may not be combined"},
	{"empty peer", ingressFrom(networkingv1.NetworkPolicyPeer{}), "one of podSelector"},
	{"bad selector operator", ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}}), "podSelector"},
	{"In without values", networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn}}}}, "spec.podSelector"},
	{"unknown protocol", ingressPort(networkingv1.NetworkPolicyPort{Protocol: ptr(corev1.Protocol("ICMP"))}), "spec.ingress[0].ports[0].protocol"},
	{"port 0", ingressPort(networkingv1.NetworkPolicyPort{Port: portNum(0)}), "out of range"},
	{"port 65536", ingressPort(networkingv1.NetworkPolicyPort{Port: portNum(65536)}), "out of range"},
	{"endPort below port", ingressPort(networkingv1.NetworkPolicyPort{Port: portNum(100), EndPort: ptr(int32(99))}), "endPort"},
	{"endPort without port", ingressPort(networkingv1.NetworkPolicyPort{EndPort: ptr(int32(99))}), "endPort without port"},
	{"endPort with a named port", ingressPort(networkingv1.NetworkPolicyPort{Port: portName("http"), EndPort: ptr(int32(99))}), "named port"},
	{"invalid port name", ingressPort(networkingv1.NetworkPolicyPort{Port: portName("Not_A_Name")}), "port \"Not_A_Name\""},
	{"unknown policy type", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Sideways"}}, "spec.policyTypes[0]"},
	{"bad CIDR in an egress rule of a policy that applies to ingress only still invalidates it (the API server rejects it)",
		networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "x"}}}}}},
		"spec.egress[0].to[0].ipBlock.cidr"},
}

func TestConvertNetworkPolicyInvalid(t *testing.T) {
	for _, tt := range invalidCases {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sync.ConvertNetworkPolicy(netpol(tt.spec))
			if err == nil {
				t.Fatalf("no error; got %+v", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, model.Policy{}) {
				t.Errorf("an invalid policy must not come back half converted: %+v", got)
			}
		})
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestConvertPod(t *testing.T) {
	created := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	base := func(mod func(p *corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", Labels: map[string]string{"app": "a"},
				CreationTimestamp: metav1.NewTime(created.In(time.FixedZone("CET", 3600)))},
			Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa",
				Containers: []corev1.Container{{Name: "c"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}},
		}
		if mod != nil {
			mod(p)
		}
		return p
	}
	want := func(mod func(e *model.Endpoint)) model.Endpoint {
		e := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "a"}, Node: "node-1",
			Labels: model.LabelsOf(map[string]string{"app": "a"}), ServiceAccount: "sa", Addrs: addrs("10.0.0.1"),
			Running: true, Created: created}
		if mod != nil {
			mod(&e)
		}
		return e
	}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		want       model.Endpoint
		isEndpoint bool
		wantErr    bool
	}{
		{"running pod with an IP", base(nil), want(nil), true, false},
		{"remote node is still an endpoint", base(func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }),
			want(func(e *model.Endpoint) { e.Node = "node-2" }), true, false},
		{"pending pod with an IP is an endpoint that does not run", base(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
			want(func(e *model.Endpoint) { e.Running = false }), true, false},
		{"phase Unknown: an endpoint that does not run", base(func(p *corev1.Pod) { p.Status.Phase = corev1.PodUnknown }),
			want(func(e *model.Endpoint) { e.Running = false }), true, false},
		{"no creation time (a manifest): the zero time", base(func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} }),
			want(func(e *model.Endpoint) { e.Created = time.Time{} }), true, false},
		{"node that does not exist: an endpoint of that node", base(func(p *corev1.Pod) { p.Spec.NodeName = "no-such-node" }),
			want(func(e *model.Endpoint) { e.Node = "no-such-node" }), true, false},
		{"not scheduled", base(func(p *corev1.Pod) { p.Spec.NodeName = "" }), model.Endpoint{}, false, false},
		{"hostNetwork", base(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), model.Endpoint{}, false, false},
		{"no IP yet", base(func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }), model.Endpoint{}, false, false},
		{"Succeeded", base(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), model.Endpoint{}, false, false},
		{"Failed", base(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), model.Endpoint{}, false, false},
		{"dual-stack from podIPs", base(func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
		}), want(func(e *model.Endpoint) { e.Addrs = addrs("10.0.0.1", "fd00::1") }), true, false},
		{"IPv6 only", base(func(p *corev1.Pod) {
			p.Status.PodIP, p.Status.PodIPs = "fd00::1", []corev1.PodIP{{IP: "fd00::1"}}
		}), want(func(e *model.Endpoint) { e.Addrs = addrs("fd00::1") }), true, false},
		{"podIP only (no podIPs)", base(func(p *corev1.Pod) { p.Status.PodIPs = nil }), want(nil), true, false},
		{"IPv4-mapped address is unmapped", base(func(p *corev1.Pod) {
			p.Status.PodIP, p.Status.PodIPs = "::ffff:10.0.0.1", []corev1.PodIP{{IP: "::ffff:10.0.0.1"}}
		}), want(nil), true, false},
		{"named ports from containers, protocol defaulting to TCP, unnamed ports ignored", base(func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{
				{Name: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {ContainerPort: 9090}}},
				{Name: "dns", Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP}, {Name: "assoc", ContainerPort: 7777, Protocol: corev1.ProtocolSCTP}}},
			}
		}), want(func(e *model.Endpoint) {
			e.NamedPorts = []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080},
				{Name: "dns", Protocol: model.ProtocolUDP, Port: 53}, {Name: "dns-tcp", Protocol: model.ProtocolTCP, Port: 53},
				{Name: "assoc", Protocol: model.ProtocolSCTP, Port: 7777}}
		}), true, false},
		{"sidecar (restartable init container) ports count, plain init containers' do not", base(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{
				{Name: "init", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 1}}},
				{Name: "proxy", RestartPolicy: ptr(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 15000}}},
			}
		}), want(func(e *model.Endpoint) {
			e.NamedPorts = []model.NamedPort{{Name: "admin", Protocol: model.ProtocolTCP, Port: 15000}}
		}), true, false},
		{"a repeated named port is passed on as declared (the graph drops repeats)", base(func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{
				{Name: "a", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
				{Name: "b", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
			}
		}), want(func(e *model.Endpoint) {
			e.NamedPorts = []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}, {Name: "http", Protocol: model.ProtocolTCP, Port: 8080}}
		}), true, false},
		{"300 container ports in 3 containers: every named one, in order", base(func(p *corev1.Pod) {
			p.Spec.Containers = nil
			for c := range 3 {
				ct := corev1.Container{Name: fmt.Sprint("c", c)}
				for i := range 100 {
					ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: fmt.Sprintf("p%d-%d", c, i), ContainerPort: int32(1000*(c+1) + i)})
				}
				p.Spec.Containers = append(p.Spec.Containers, ct)
			}
		}), want(func(e *model.Endpoint) {
			for c := range 3 {
				for i := range 100 {
					e.NamedPorts = append(e.NamedPorts, model.NamedPort{Name: fmt.Sprintf("p%d-%d", c, i), Protocol: model.ProtocolTCP, Port: uint16(1000*(c+1) + i)})
				}
			}
		}), true, false},
		{"label values of 63 characters, the API's limit", base(func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": strings.Repeat("a", 63), "tier": strings.Repeat("z", 62) + "9"}
		}), want(func(e *model.Endpoint) {
			e.Labels = model.LabelsOf(map[string]string{"app": strings.Repeat("a", 63), "tier": strings.Repeat("z", 62) + "9"})
		}), true, false},
		{"pod without labels", base(func(p *corev1.Pod) { p.Labels = nil }), want(func(e *model.Endpoint) { e.Labels = model.Labels{} }), true, false},
		{"unparseable IP", base(func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.300"}} }), model.Endpoint{}, false, true},
		{"bad port protocol", base(func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "x", ContainerPort: 1, Protocol: "ICMP"}}
		}), model.Endpoint{}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := sync.ConvertPod(tt.pod)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error %v", err, tt.wantErr)
			}
			if ok != tt.isEndpoint {
				t.Fatalf("is endpoint = %v, want %v", ok, tt.isEndpoint)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
	t.Run("labels are copied, not shared with the API object", func(t *testing.T) {
		p := base(nil)
		got, _, _ := sync.ConvertPod(p)
		p.Labels["app"] = "changed"
		if v, _ := got.Labels.Get("app"); v != "a" {
			t.Error("endpoint labels alias the pod's map")
		}
	})
}

func TestConvertNamespace(t *testing.T) {
	got := sync.ConvertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "y", Labels: map[string]string{"team": "blue"}}})
	want := model.Namespace{Name: "y", Labels: map[string]string{"team": "blue", "kubernetes.io/metadata.name": "y"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
