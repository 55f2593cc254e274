package sync

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// KindNetworkPolicy is the PolicyKey.Kind of converted Kubernetes NetworkPolicies.
const KindNetworkPolicy = "NetworkPolicy"

// networkPolicyOrder is the order of every Kubernetes NetworkPolicy in its tier: Calico's
// (libcalico-go's conversion puts them at 1000 in the default tier), so that Calico
// NetworkPolicies of the default tier sort among them as in Calico.
const networkPolicyOrder = 1000

// namespaceNameLabel is the label the API server puts on every namespace (value: its name).
const namespaceNameLabel = "kubernetes.io/metadata.name"

// ConvertNamespace converts a Namespace. Its labels are copied, and the label
// kubernetes.io/metadata.name is set to the namespace's name as the API server guarantees (so
// manifests that lack it, in LoadDir, still match upstream's namespace selectors).
func ConvertNamespace(ns *corev1.Namespace) model.Namespace {
	labels := make(map[string]string, len(ns.Labels)+1)
	maps.Copy(labels, ns.Labels)
	labels[namespaceNameLabel] = ns.Name
	return model.Namespace{Name: ns.Name, Labels: labels}
}

// ConvertPod converts a Pod into an Endpoint. The bool is false (and the error nil) for a pod
// that is not an endpoint: not bound to a node, hostNetwork, phase Succeeded or Failed, or no IP
// yet. An error means the pod is unusable (an unparseable IP, a bad container port).
//
// Addresses come from status.podIPs (status.podIP when podIPs is empty), unmapped and
// deduplicated. Named ports come from the ports of the containers and of restartable init
// containers (sidecars, which run beside them), in that order, repeats included (the graph
// drops them): the work is linear in the number of ports, which the API does not bound. A
// port's protocol defaults to TCP. Running and Created (status.phase,
// metadata.creationTimestamp) decide which endpoint owns an address that several hold (see
// model).
func ConvertPod(p *corev1.Pod) (model.Endpoint, bool, error) {
	if p.Spec.NodeName == "" || p.Spec.HostNetwork ||
		p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return model.Endpoint{}, false, nil
	}
	ips := make([]string, 0, 2)
	for _, ip := range p.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = append(ips, p.Status.PodIP)
	}
	var addrs []netip.Addr
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return model.Endpoint{}, false, fmt.Errorf("pod IP %q is not an IP address", s)
		}
		a = a.Unmap()
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return model.Endpoint{}, false, nil
	}
	var named []model.NamedPort
	addPorts := func(c *corev1.Container) error {
		for _, cp := range c.Ports {
			if cp.Name == "" {
				continue
			}
			proto, err := protocolOf(cp.Protocol)
			if err != nil {
				return fmt.Errorf("container %s port %s: %w", c.Name, cp.Name, err)
			}
			if cp.ContainerPort < 1 || cp.ContainerPort > 65535 {
				return fmt.Errorf("container %s port %s: containerPort %d out of range", c.Name, cp.Name, cp.ContainerPort)
			}
			named = append(named, model.NamedPort{Name: cp.Name, Protocol: proto, Port: uint16(cp.ContainerPort)})
		}
		return nil
	}
	for c := range servingContainers(p) {
		if err := addPorts(c); err != nil {
			return model.Endpoint{}, false, err
		}
	}
	return model.Endpoint{
		Key:            model.EndpointKey{Namespace: p.Namespace, Name: p.Name},
		Node:           p.Spec.NodeName,
		Labels:         model.LabelsOf(p.Labels),
		ServiceAccount: p.Spec.ServiceAccountName,
		Addrs:          addrs,
		NamedPorts:     named,
		Running:        p.Status.Phase == corev1.PodRunning,
		Created:        p.CreationTimestamp.UTC(),
	}, true, nil
}

func protocolOf(p corev1.Protocol) (model.Protocol, error) {
	switch p {
	case "", corev1.ProtocolTCP:
		return model.ProtocolTCP, nil
	case corev1.ProtocolUDP:
		return model.ProtocolUDP, nil
	case corev1.ProtocolSCTP:
		return model.ProtocolSCTP, nil
	}
	return 0, fmt.Errorf("unsupported protocol %q", p)
}

// ConvertNetworkPolicy converts a NetworkPolicy v1 into the model, with the API's semantics:
//
//   - The policy is namespaced (Policy.Namespace) and in tier model.TierNetworkPolicy with
//     Order 1000, Calico's (ties are broken by key, so the order is by name); every rule is an Allow, and
//     isolation comes from the tier's default Deny for the endpoints the policy selects.
//   - policyTypes, when absent, default as the API server does: Ingress always, Egress when
//     there are egress rules. Rules of a direction the policy does not apply to are dropped.
//   - podSelector {} selects every pod of the namespace (selector all()).
//   - A rule with no from/to peers allows every source/destination (an empty Peer: every
//     namespace, every address). A peer with only podSelector matches pods of the policy's
//     namespace; only namespaceSelector, every pod of the matching namespaces; both, the pods
//     matching podSelector in the namespaces matching namespaceSelector; ipBlock, the CIDR
//     minus its except CIDRs.
//   - One rule becomes one model.Rule per peer and per protocol of its ports: ports of a
//     protocol are OR-ed in Destination.Ports (numbers, endPort ranges, names resolved per
//     endpoint); a protocol listed without a port allows every port of it; no ports at all
//     allows every protocol and port. The protocol defaults to TCP.
//
// Anything the API server would reject (a bad CIDR, an except outside its CIDR, an unknown
// protocol or policy type, a bad port, a peer mixing ipBlock with selectors) makes the whole
// policy invalid: the error names the offending field and no policy is returned.
func ConvertNetworkPolicy(np *networkingv1.NetworkPolicy) (model.Policy, error) {
	pol := model.Policy{
		Key:       model.PolicyKey{Kind: KindNetworkPolicy, Namespace: np.Namespace, Name: np.Name},
		Tier:      model.TierNetworkPolicy,
		Order:     networkPolicyOrder,
		Namespace: np.Namespace,
	}
	if np.Namespace == "" {
		return model.Policy{}, errors.New("metadata.namespace is empty")
	}
	sel, err := convertSelector(&np.Spec.PodSelector)
	if err != nil {
		return model.Policy{}, fmt.Errorf("spec.podSelector: %w", err)
	}
	pol.Selector = sel
	if len(np.Spec.PolicyTypes) == 0 {
		pol.ApplyIngress = true
		pol.ApplyEgress = len(np.Spec.Egress) > 0
	}
	for i, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			pol.ApplyIngress = true
		case networkingv1.PolicyTypeEgress:
			pol.ApplyEgress = true
		default:
			return model.Policy{}, fmt.Errorf("spec.policyTypes[%d]: unknown type %q", i, t)
		}
	}
	for i, r := range np.Spec.Ingress {
		rules, err := convertRule(model.Ingress, r.From, r.Ports)
		if err != nil {
			return model.Policy{}, fmt.Errorf("spec.ingress[%d].%w", i, err)
		}
		if pol.ApplyIngress {
			pol.IngressRules = append(pol.IngressRules, rules...)
		}
	}
	for i, r := range np.Spec.Egress {
		rules, err := convertRule(model.Egress, r.To, r.Ports)
		if err != nil {
			return model.Policy{}, fmt.Errorf("spec.egress[%d].%w", i, err)
		}
		if pol.ApplyEgress {
			pol.EgressRules = append(pol.EgressRules, rules...)
		}
	}
	return pol, nil
}

// convertSelector converts a LabelSelector (nil and {} select everything) into the selector
// language (selector.FromLabelSelector refuses what would not parse back).
func convertSelector(ls *metav1.LabelSelector) (string, error) {
	if ls == nil {
		return selector.All().String(), nil
	}
	reqs := make([]selector.Requirement, len(ls.MatchExpressions))
	for i, e := range ls.MatchExpressions {
		reqs[i] = selector.Requirement{Key: e.Key, Operator: string(e.Operator), Values: e.Values}
	}
	s, err := selector.FromLabelSelector(ls.MatchLabels, reqs)
	if err != nil {
		return "", err
	}
	return s.String(), nil
}

type protoPorts struct {
	proto model.Protocol
	all   bool // a port entry of this protocol without a port: every port
	ports []model.Port
}

func convertRule(dir model.Direction, peers []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) ([]model.Rule, error) {
	field := "from"
	if dir == model.Egress {
		field = "to"
	}
	var groups []*protoPorts
	for i, p := range ports {
		proto := model.ProtocolTCP
		if p.Protocol != nil {
			var err error
			if proto, err = protocolOf(*p.Protocol); err != nil {
				return nil, fmt.Errorf("ports[%d].protocol: %w", i, err)
			}
		}
		idx := slices.IndexFunc(groups, func(g *protoPorts) bool { return g.proto == proto })
		if idx < 0 {
			groups = append(groups, &protoPorts{proto: proto})
			idx = len(groups) - 1
		}
		g := groups[idx]
		port, all, err := convertPort(p)
		if err != nil {
			return nil, fmt.Errorf("ports[%d]: %w", i, err)
		}
		if all {
			g.all = true
		} else if !slices.Contains(g.ports, port) {
			g.ports = append(g.ports, port)
		}
	}
	var modelPeers []model.Peer
	for i := range peers {
		p, err := convertPeer(&peers[i])
		if err != nil {
			return nil, fmt.Errorf("%s[%d].%w", field, i, err)
		}
		modelPeers = append(modelPeers, p)
	}
	if len(modelPeers) == 0 {
		modelPeers = []model.Peer{{}} // no peers: everyone
	}
	if len(groups) == 0 {
		groups = []*protoPorts{{proto: model.ProtocolAny, all: true}} // no ports: everything
	}
	var rules []model.Rule
	for _, peer := range modelPeers {
		for _, g := range groups {
			r := model.Rule{Action: model.ActionAllow, Protocol: g.proto}
			if dir == model.Ingress {
				r.Source = peer
			} else {
				r.Destination = peer
			}
			if !g.all {
				r.Destination.Ports = slices.Clone(g.ports)
			}
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// convertPort returns the port match of one NetworkPolicyPort, or all = true when it names no
// port (every port of its protocol).
func convertPort(p networkingv1.NetworkPolicyPort) (port model.Port, all bool, err error) {
	if p.Port == nil {
		if p.EndPort != nil {
			return model.Port{}, false, errors.New("endPort without port")
		}
		return model.Port{}, true, nil
	}
	if p.Port.Type == intstr.String {
		if p.EndPort != nil {
			return model.Port{}, false, errors.New("endPort with a named port")
		}
		if errs := validation.IsValidPortName(p.Port.StrVal); len(errs) > 0 {
			return model.Port{}, false, fmt.Errorf("port %q: %s", p.Port.StrVal, errs[0])
		}
		return model.Port{Name: p.Port.StrVal}, false, nil
	}
	first := p.Port.IntVal
	if first < 1 || first > 65535 {
		return model.Port{}, false, fmt.Errorf("port %d out of range 1-65535", first)
	}
	last := first
	if p.EndPort != nil {
		last = *p.EndPort
		if last < first || last > 65535 {
			return model.Port{}, false, fmt.Errorf("endPort %d must be between port %d and 65535", last, first)
		}
	}
	return model.Port{First: uint16(first), Last: uint16(last)}, false, nil
}

func convertPeer(p *networkingv1.NetworkPolicyPeer) (model.Peer, error) {
	if p.IPBlock != nil {
		if p.PodSelector != nil || p.NamespaceSelector != nil {
			return model.Peer{}, errors.New("ipBlock: may not be combined with podSelector or namespaceSelector")
		}
		return convertIPBlock(p.IPBlock)
	}
	var out model.Peer
	if p.PodSelector == nil && p.NamespaceSelector == nil {
		return model.Peer{}, errors.New("peer: one of podSelector, namespaceSelector or ipBlock is required")
	}
	if p.PodSelector != nil {
		s, err := convertSelector(p.PodSelector)
		if err != nil {
			return model.Peer{}, fmt.Errorf("podSelector: %w", err)
		}
		out.Selector = s
	}
	if p.NamespaceSelector != nil {
		s, err := convertSelector(p.NamespaceSelector)
		if err != nil {
			return model.Peer{}, fmt.Errorf("namespaceSelector: %w", err)
		}
		out.NamespaceSelector = s
	}
	return out, nil
}

func convertIPBlock(b *networkingv1.IPBlock) (model.Peer, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return model.Peer{}, fmt.Errorf("ipBlock.cidr: %w", err)
	}
	cidr = model.CanonicalPrefix(cidr)
	out := model.Peer{Nets: []netip.Prefix{cidr}}
	for i, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return model.Peer{}, fmt.Errorf("ipBlock.except[%d]: %w", i, err)
		}
		ex = model.CanonicalPrefix(ex)
		if ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
			return model.Peer{}, fmt.Errorf("ipBlock.except[%d]: %s is not a strict subset of cidr %s", i, ex, cidr)
		}
		if !slices.Contains(out.NotNets, ex) {
			out.NotNets = append(out.NotNets, ex)
		}
	}
	return out, nil
}

// servingContainers yields the containers whose ports a pod serves: its containers, then its
// restartable (sidecar) init containers.
func servingContainers(p *corev1.Pod) iter.Seq[*corev1.Container] {
	return func(yield func(*corev1.Container) bool) {
		for i := range p.Spec.Containers {
			if !yield(&p.Spec.Containers[i]) {
				return
			}
		}
		for i := range p.Spec.InitContainers {
			c := &p.Spec.InitContainers[i]
			if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways && !yield(c) {
				return
			}
		}
	}
}
