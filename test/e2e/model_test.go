package e2e

// The upstream model (kubernetes/kubernetes test/e2e/network/netpol/model.go, Apache-2.0): three
// namespaces x, y, z, pods a, b, c in each labelled pod=<name>, one server per (port, protocol)
// on ports 80 and 81 whose container port is named serve-<port>-<protocol>. Upstream names the
// namespaces after the framework (netpol-x-1234); ours are literally x, y, z, so a policy that
// upstream writes with nsY writes "y" here. Namespaces also carry ns=<name> (the older upstream
// and cyclonus label); the API server adds kubernetes.io/metadata.name itself.
//
// Since PR #137110 each upstream It creates only the pods it needs; the suite here always runs
// the 9 pods (one shared fixture) and every case records its upstream topology, so the table
// check can replay upstream's expectations on exactly upstream's pods and on the 9-pod model.

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// namespaceLabelKey is the immutable label the API server puts on every namespace.
const namespaceLabelKey = corev1.LabelMetadataName

var (
	protocolTCP  = corev1.ProtocolTCP
	protocolUDP  = corev1.ProtocolUDP
	protocolSCTP = corev1.ProtocolSCTP
)

// modelNamespaces and modelPodNames span the 9-pod model.
func modelNamespaces() []string { return []string{"x", "y", "z"} }
func modelPodNames() []string   { return []string{"a", "b", "c"} }

// modelPods returns the 9 pod keys "ns/name" in upstream order (x/a, x/b, ... z/c).
func modelPods() []string {
	var out []string
	for _, ns := range modelNamespaces() {
		for _, p := range modelPodNames() {
			out = append(out, ns+"/"+p)
		}
	}
	return out
}

// modelPorts and modelProtocols are what every pod serves (SCTP is declared on the pods, as
// upstream does, but never served here: the kernel has no CONFIG_IP_SCTP).
func modelPorts() []int32 { return []int32{80, 81} }
func modelProtocols() []corev1.Protocol {
	return []corev1.Protocol{protocolTCP, protocolUDP, protocolSCTP}
}
func splitKey(key string) (ns, name string) { ns, name, _ = strings.Cut(key, "/"); return ns, name }

// baseNamespaceLabels are the labels a namespace is created with and restored to between cases.
func baseNamespaceLabels(ns string) map[string]string { return map[string]string{"ns": ns} }

// basePodLabels are the labels a pod is created with and restored to between cases.
func basePodLabels(name string) map[string]string { return map[string]string{"pod": name} }

// portName is upstream's container port name, e.g. serve-80-tcp.
func portName(port int32, proto corev1.Protocol) string {
	return fmt.Sprintf("serve-%d-%s", port, strings.ToLower(string(proto)))
}

// containerPorts are the named ports of every model pod: each port on each protocol.
func containerPorts() []corev1.ContainerPort {
	var out []corev1.ContainerPort
	for _, port := range modelPorts() {
		for _, proto := range modelProtocols() {
			out = append(out, corev1.ContainerPort{Name: portName(port, proto), ContainerPort: port, Protocol: proto})
		}
	}
	return out
}

// View is what a case may read of the running cluster to build its policies: the ipBlock cases
// use the pods' real addresses, in the address family under test.
type View interface {
	// IP returns the address of pod "ns/name" in the family under test.
	IP(pod string) netip.Addr
}

// hostCIDR is upstream's "<podIP>/32" (or /128).
func hostCIDR(ip netip.Addr) string { return netip.PrefixFrom(ip, ip.BitLen()).String() }

// largeCIDR is upstream's makeLargeCIDRForIP: the /4 holding ip.
func largeCIDR(ip netip.Addr) string { return netip.PrefixFrom(ip, 4).Masked().String() }

// Policy builders, after upstream policies.go: a name, a pod selector, and setters.

type specSetter func(*networkingv1.NetworkPolicySpec)

// genPolicy is upstream's GenNetworkPolicyWithNameAndPodSelector, plus the namespace upstream
// passes to CreatePolicy.
func genPolicy(ns, name string, sel metav1.LabelSelector, setters ...specSetter) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: sel},
	}
	for _, s := range setters {
		s(&p.Spec)
	}
	return p
}

// genPolicyMatchLabels is upstream's GenNetworkPolicyWithNameAndPodMatchLabel.
func genPolicyMatchLabels(ns, name string, labels map[string]string, setters ...specSetter) *networkingv1.NetworkPolicy {
	return genPolicy(ns, name, metav1.LabelSelector{MatchLabels: labels}, setters...)
}

// ingressRules is upstream's SetSpecIngressRules: adds the Ingress type and sets the rules (none
// at all means deny all ingress).
func ingressRules(rules ...networkingv1.NetworkPolicyIngressRule) specSetter {
	return func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = append(s.PolicyTypes, networkingv1.PolicyTypeIngress)
		s.Ingress = append([]networkingv1.NetworkPolicyIngressRule{}, rules...)
	}
}

// egressRules is upstream's SetSpecEgressRules.
func egressRules(rules ...networkingv1.NetworkPolicyEgressRule) specSetter {
	return func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = append(s.PolicyTypes, networkingv1.PolicyTypeEgress)
		s.Egress = append([]networkingv1.NetworkPolicyEgressRule{}, rules...)
	}
}

// Small constructors that keep the case table close to the upstream text.

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func matchExpr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func numPort(port int32, proto *corev1.Protocol) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Port: &p, Protocol: proto}
}

func namedPort(name string, proto *corev1.Protocol) networkingv1.NetworkPolicyPort {
	p := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Port: &p, Protocol: proto}
}

func rangePort(port, end int32, proto *corev1.Protocol) networkingv1.NetworkPolicyPort {
	p := numPort(port, proto)
	p.EndPort = &end
	return p
}

// static wraps policies that do not depend on the cluster.
func static(ps ...*networkingv1.NetworkPolicy) func(View) []*networkingv1.NetworkPolicy {
	return func(View) []*networkingv1.NetworkPolicy {
		out := make([]*networkingv1.NetworkPolicy, len(ps))
		for i, p := range ps {
			out[i] = p.DeepCopy()
		}
		return out
	}
}
