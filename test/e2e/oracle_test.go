package e2e

// A reference evaluator of NetworkPolicy v1 semantics over the model, written from the API
// documentation (k8s.io/api/networking/v1 types.go) and independent of the agent: it is the
// oracle the case table is checked against, without root or a cluster.
//
//   - A pod is isolated for ingress (egress) when a policy of its namespace selects it and has
//     that policy type; PolicyTypes default like the API server: Ingress, plus Egress when the
//     policy has egress rules.
//   - Traffic to an isolated pod is allowed when some rule of some selecting policy matches it:
//     no peers = every source; a peer with only podSelector = pods of the policy's namespace; with
//     only namespaceSelector = every pod of the matching namespaces; with both = their AND;
//     ipBlock = the address is in cidr and in no except. No ports = every port; a port without
//     a number = every port of its protocol (default TCP); a number with endPort = the
//     inclusive range; a name = the destination pod's container port of that name and
//     protocol.
//   - Ingress at the destination and egress at the source must both allow.
//
// Selectors are evaluated with apimachinery (NotIn on an absent key matches, as Kubernetes
// does).

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

type oraclePod struct {
	key, ns, name string
	labels        map[string]string
	ip            netip.Addr
	ports         []corev1.ContainerPort
}

// oracle is the state of a model cluster: namespace labels, pods, policies by "ns/name".
type oracle struct {
	nsLabels map[string]map[string]string
	pods     map[string]*oraclePod
	policies map[string]*networkingv1.NetworkPolicy
}

// newOracle builds the model with the given pod keys and addresses (the namespaces carry the
// labels the API server would give them).
func newOracle(pods []string, ip func(key string) netip.Addr) *oracle {
	o := &oracle{nsLabels: map[string]map[string]string{}, pods: map[string]*oraclePod{}, policies: map[string]*networkingv1.NetworkPolicy{}}
	for _, ns := range modelNamespaces() {
		l := baseNamespaceLabels(ns)
		l[namespaceLabelKey] = ns
		o.nsLabels[ns] = l
	}
	for _, k := range pods {
		ns, name := splitKey(k)
		o.pods[k] = &oraclePod{key: k, ns: ns, name: name, labels: basePodLabels(name), ip: ip(k), ports: containerPorts()}
	}
	return o
}

func (o *oracle) apply(s Step, v View) error {
	put := func(ps []*networkingv1.NetworkPolicy, update bool) error {
		for _, p := range ps {
			if p.Namespace == "" {
				return fmt.Errorf("policy %s has no namespace", p.Name)
			}
			k := p.Namespace + "/" + p.Name
			if _, exists := o.policies[k]; exists != update {
				return fmt.Errorf("policy %s: exists=%v on create/update=%v", k, exists, update)
			}
			o.policies[k] = p.DeepCopy()
		}
		return nil
	}
	if s.Create != nil {
		if err := put(s.Create(v), false); err != nil {
			return err
		}
	}
	if s.Update != nil {
		if err := put(s.Update(v), true); err != nil {
			return err
		}
	}
	if s.DeleteAllPolicies {
		clear(o.policies)
	}
	for ns, l := range s.NamespaceLabels {
		for k, val := range l {
			o.nsLabels[ns][k] = val
		}
	}
	for key, l := range s.PodLabels {
		p, ok := o.pods[key]
		if !ok {
			continue // the pod is not in this topology
		}
		for k, val := range l {
			p.labels[k] = val
		}
	}
	return nil
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		panic(fmt.Sprintf("invalid selector in a case: %v", err))
	}
	return s.Matches(labels.Set(l))
}

func policyTypes(p *networkingv1.NetworkPolicy) []networkingv1.PolicyType {
	if len(p.Spec.PolicyTypes) > 0 {
		return p.Spec.PolicyTypes
	}
	t := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	if len(p.Spec.Egress) > 0 {
		t = append(t, networkingv1.PolicyTypeEgress)
	}
	return t
}

// peerMatches tells whether peer (in a policy of namespace policyNS) selects pod.
func (o *oracle) peerMatches(policyNS string, peer networkingv1.NetworkPolicyPeer, pod *oraclePod) bool {
	if peer.IPBlock != nil {
		cidr := netip.MustParsePrefix(peer.IPBlock.CIDR)
		if !cidr.Contains(pod.ip) {
			return false
		}
		for _, e := range peer.IPBlock.Except {
			if netip.MustParsePrefix(e).Contains(pod.ip) {
				return false
			}
		}
		return true
	}
	if peer.NamespaceSelector != nil {
		if !selects(peer.NamespaceSelector, o.nsLabels[pod.ns]) {
			return false
		}
	} else if pod.ns != policyNS {
		return false
	}
	return peer.PodSelector == nil || selects(peer.PodSelector, pod.labels)
}

// portMatches tells whether one NetworkPolicyPort admits proto/port to dst.
func portMatches(pp networkingv1.NetworkPolicyPort, dst *oraclePod, proto corev1.Protocol, port int32) bool {
	want := corev1.ProtocolTCP
	if pp.Protocol != nil {
		want = *pp.Protocol
	}
	if want != proto {
		return false
	}
	if pp.Port == nil {
		return true
	}
	if pp.Port.Type == intstr.String {
		for _, cp := range dst.ports {
			if cp.Name == pp.Port.StrVal && cp.Protocol == proto && cp.ContainerPort == port {
				return true
			}
		}
		return false
	}
	end := pp.Port.IntVal
	if pp.EndPort != nil {
		end = *pp.EndPort
	}
	return pp.Port.IntVal <= port && port <= end
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, dst *oraclePod, proto corev1.Protocol, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	return slices.ContainsFunc(ports, func(pp networkingv1.NetworkPolicyPort) bool { return portMatches(pp, dst, proto, port) })
}

func (o *oracle) peersMatch(policyNS string, peers []networkingv1.NetworkPolicyPeer, pod *oraclePod) bool {
	if len(peers) == 0 {
		return true
	}
	return slices.ContainsFunc(peers, func(p networkingv1.NetworkPolicyPeer) bool { return o.peerMatches(policyNS, p, pod) })
}

// direction evaluates one side: ingress at dst (subject = dst, peer = src) or egress at src.
func (o *oracle) direction(t networkingv1.PolicyType, src, dst *oraclePod, proto corev1.Protocol, port int32) bool {
	subject, peer := dst, src
	if t == networkingv1.PolicyTypeEgress {
		subject, peer = src, dst
	}
	isolated := false
	for _, p := range o.policies {
		if p.Namespace != subject.ns || !slices.Contains(policyTypes(p), t) || !selects(&p.Spec.PodSelector, subject.labels) {
			continue
		}
		isolated = true
		if t == networkingv1.PolicyTypeIngress {
			for _, r := range p.Spec.Ingress {
				if o.peersMatch(p.Namespace, r.From, peer) && portsMatch(r.Ports, dst, proto, port) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Egress {
				if o.peersMatch(p.Namespace, r.To, peer) && portsMatch(r.Ports, dst, proto, port) {
					return true
				}
			}
		}
	}
	return !isolated
}

// allowed tells whether src may connect to dst on proto/port.
func (o *oracle) allowed(src, dst string, proto corev1.Protocol, port int32) bool {
	s, d := o.pods[src], o.pods[dst]
	return o.direction(networkingv1.PolicyTypeEgress, s, d, proto, port) &&
		o.direction(networkingv1.PolicyTypeIngress, s, d, proto, port)
}
