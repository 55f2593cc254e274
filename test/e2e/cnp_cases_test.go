package e2e

// The conformance tests of sigs.k8s.io/network-policy-api v0.3.0 (conformance/tests,
// Apache-2.0; objects created as policy.networking.k8s.io/v1beta1), all 30 of them: the 24
// ConformanceTests of the Standard feature ClusterNetworkPolicy and the 6 of the Experimental
// features ClusterNetworkPolicyNamedPorts and ClusterNetworkPolicyEgressNodePeers, 112
// subtests, in upstream's registration order (by file name). A test applies its manifest, taken
// from the module (conformance.Manifests); its subtests run in order on the state the earlier
// ones left, as upstream's do. A subtest is a list of steps, split where upstream changes
// something between two pokes: each step makes upstream's changes (swap two rules, change an
// action, a priority or a rule's ports, insert a rule, delete a NetworkPolicy, set or remove a
// pod's label, replace a namespace's labels) and then pokes, each poke upstream's
// PokeServer(client, protocol, server, port, shouldConnect) with the pods written
// "<house>/<pod>" (namespace network-policy-conformance-<house>); a subtest's cleanup changes
// are upstream's t.Cleanup. Pokes go to the server pod's address, as upstream's do; a
// hostNetwork server's is its node's.

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	policyv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// cnpTest is one upstream ConformanceTest.
type cnpTest struct {
	Name     string // ShortName
	Feature  string // the last of its Features: ClusterNetworkPolicy or the experimental one
	Manifest string // path in conformance.Manifests
	Subtests []cnpSubtest
}

// cnpSubtest is one t.Run of a ConformanceTest: its steps, in upstream's order, and the
// changes of its t.Cleanup, made when it ends however it ends.
type cnpSubtest struct {
	Name    string // t.Run text
	Steps   []cnpStep
	Cleanup []change
}

// cnpStep is a stretch of a subtest: upstream's changes (none only in a subtest's first step),
// then its pokes up to its next change.
type cnpStep struct {
	Change []change
	Pokes  []poke
}

// poke is upstream's PokeServer: from the client pod to the server pod's address, expected to
// connect or not.
type poke struct {
	From    string // "<house>/<pod>"
	Proto   corev1.Protocol
	To      string
	Port    int32
	Connect bool
}

// change is one of upstream's edits, exactly one of: an edit of the ClusterNetworkPolicy CNP
// (Edit, with the addresses of the family under test); the deletion of a NetworkPolicy; one
// label of a pod set or removed (upstream SetPodLabel, RemovePodLabel); a namespace's labels
// replaced (upstream PatchNamespace of a copy given new labels; the API server keeps
// kubernetes.io/metadata.name).
type change struct {
	By                  string
	CNP                 string
	Edit                func(p *policyv1beta1.ClusterNetworkPolicy, v View)
	DeleteNetworkPolicy string // "<house>/<name>"
	Pod                 string // "<house>/<pod>"
	PodLabel            string
	PodLabelValue       *string // nil removes PodLabel
	Namespace           string  // "<house>"
	NamespaceLabels     map[string]string
}

func swapIngress(cnp string, i, j int) change {
	return change{By: "swap ingress rules", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Ingress[i], p.Spec.Ingress[j] = p.Spec.Ingress[j], p.Spec.Ingress[i]
	}}
}

func swapEgress(cnp string, i, j int) change {
	return change{By: "swap egress rules", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Egress[i], p.Spec.Egress[j] = p.Spec.Egress[j], p.Spec.Egress[i]
	}}
}

func ingressAction(cnp string, i int, a policyv1beta1.ClusterNetworkPolicyRuleAction) change {
	return change{By: "set an ingress rule's action", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Ingress[i].Action = a
	}}
}

func egressAction(cnp string, i int, a policyv1beta1.ClusterNetworkPolicyRuleAction) change {
	return change{By: "set an egress rule's action", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Egress[i].Action = a
	}}
}

func priority(cnp string, prio int32) change {
	return change{By: "set the priority", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Priority = prio
	}}
}

// ingressNamedPort and egressNamedPort replace a rule's protocols with one named port.
func ingressNamedPort(cnp string, i int, name string) change {
	return change{By: "make an ingress rule's port a named port", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Ingress[i].Protocols = []policyv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: name}}
	}}
}

func egressNamedPort(cnp string, i int, name string) change {
	return change{By: "make an egress rule's port a named port", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, _ View) {
		p.Spec.Egress[i].Protocols = []policyv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: name}}
	}}
}

// prependEgressToPodIPs inserts, first, an Accept egress rule to the pods' addresses (/32 or
// /128) in the family under test.
func prependEgressToPodIPs(cnp, rule string, pods ...string) change {
	return change{By: "insert an Accept rule to pod addresses first", CNP: cnp, Edit: func(p *policyv1beta1.ClusterNetworkPolicy, v View) {
		var nets []policyv1beta1.CIDR
		for _, pod := range pods {
			ip := v.IP(conformanceKey(pod))
			nets = append(nets, policyv1beta1.CIDR(netip.PrefixFrom(ip, ip.BitLen()).String()))
		}
		r := policyv1beta1.ClusterNetworkPolicyEgressRule{Name: rule, Action: policyv1beta1.ClusterNetworkPolicyRuleActionAccept,
			To: []policyv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: nets}}}
		p.Spec.Egress = append([]policyv1beta1.ClusterNetworkPolicyEgressRule{r}, p.Spec.Egress...)
	}}
}

func deleteNetworkPolicy(key string) change {
	return change{By: "delete NetworkPolicy " + key, DeleteNetworkPolicy: key}
}

// conformanceRoleLabel is the pod label upstream's pod selector tests set and remove.
const conformanceRoleLabel = "conformance-role"

func setPodLabel(pod, key, value string) change {
	return change{By: fmt.Sprintf("label pod %s %s=%s", pod, key, value), Pod: pod, PodLabel: key, PodLabelValue: &value}
}

func removePodLabel(pod, key string) change {
	return change{By: fmt.Sprintf("remove label %s of pod %s", key, pod), Pod: pod, PodLabel: key}
}

// setNamespaceLabels gives the namespace of house exactly labels (and the API server's
// kubernetes.io/metadata.name).
func setNamespaceLabels(house string, labels map[string]string) change {
	return change{By: fmt.Sprintf("set the labels of namespace %s to %v", house, labels), Namespace: house, NamespaceLabels: labels}
}

func cnpTests() []cnpTest {
	tcp, udp, sctp := protocolTCP, protocolUDP, protocolSCTP
	pass := policyv1beta1.ClusterNetworkPolicyRuleActionPass
	return []cnpTest{
		{Name: "CNPAdminTierEgressNamedPort", Feature: "ClusterNetworkPolicyNamedPorts", Manifest: "base/admin_tier/standard-egress-tcp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for named port",
					Steps: []cnpStep{{Change: []change{egressNamedPort("egress-tcp", 5, "web")},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "hufflepuff/cedric-diggory-1", 80, true},
							{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-1", 8080, false},
						}}}},
			}},
		{Name: "CNPAdminTierEgressNodePeers", Feature: "ClusterNetworkPolicyEgressNodePeers", Manifest: "base/admin_tier/experimental-egress-selector-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' rule policy for egress-node-peer",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-1", tcp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[0]), true},
					}}}},
				{Name: "Should support a 'pass-egress' rule policy for egress-node-peer",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-1", udp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[2]), true},
					}}}},
				{Name: "Should support a 'deny-egress' rule policy for egress-node-peer",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-1", tcp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[1]), false},
						{"gryffindor/harry-potter-1", udp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[4]), false},
						{"gryffindor/harry-potter-1", sctp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[6]), false},
					}}}},
			}},
		{Name: "CNPAdminTierIngressNamedPort", Feature: "ClusterNetworkPolicyNamedPorts", Manifest: "base/admin_tier/standard-ingress-udp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for named port",
					Steps: []cnpStep{{Change: []change{ingressNamedPort("ingress-udp", 5, "dns")},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-1", 53, true},
							{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-1", 5353, false},
						}}}},
			}},
		{Name: "CNPAdminTierEgressInlineCIDRPeers", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-egress-inline-cidr-rules.yaml",
			Subtests: inlineCIDRSubtests("inline-cidr-as-peers-example")},
		{Name: "CNPAdminTierEgressSCTP", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-egress-sctp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", sctp, "gryffindor/harry-potter-0", 9003, true},
						{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-0", 9005, true},
					}}}},
				{Name: "Should support an 'allow-egress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", sctp, "hufflepuff/cedric-diggory-1", 9003, true},
						{"ravenclaw/luna-lovegood-1", sctp, "hufflepuff/cedric-diggory-1", 9005, false},
					}}}},
				{Name: "Should support an 'deny-egress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-sctp", 0, 1)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", sctp, "gryffindor/harry-potter-1", 9003, false},
							{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-1", 9005, false},
						}}}},
				{Name: "Should support a 'deny-egress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", sctp, "slytherin/draco-malfoy-0", 9003, false},
						{"ravenclaw/luna-lovegood-1", sctp, "slytherin/draco-malfoy-0", 9005, true},
					}}}},
				{Name: "Should support an 'pass-egress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-sctp", 0, 2)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", sctp, "gryffindor/harry-potter-1", 9003, true},
							{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-1", 9005, true},
						}}}},
				{Name: "Should support a 'pass-egress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-sctp", 3, 4)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", sctp, "slytherin/draco-malfoy-0", 9003, true},
							{"ravenclaw/luna-lovegood-1", sctp, "slytherin/draco-malfoy-0", 9005, true},
						}}}},
			}},
		{Name: "CNPAdminTierEgressTCP", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-egress-tcp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
						{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-0", 8080, true},
					}}}},
				{Name: "Should support an 'allow-egress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "hufflepuff/cedric-diggory-1", 8080, true},
						{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-1", 80, false},
					}}}},
				{Name: "Should not affect ingress traffic when only egress rules are specified",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-1", 80, true},
					}}}},
				{Name: "Should support an 'deny-egress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-tcp", 0, 1)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-1", 80, false},
							{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-1", 8080, false},
						}}}},
				{Name: "Should support a 'deny-egress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
					}}}},
				{Name: "Should support an 'pass-egress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-tcp", 0, 2)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
							{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-0", 8080, true},
						}}}},
				{Name: "Should support a 'pass-egress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-tcp", 3, 4)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, true},
							{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
						}}}},
			}},
		{Name: "CNPAdminTierEgressUDP", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-egress-udp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", udp, "ravenclaw/luna-lovegood-0", 53, true},
						{"hufflepuff/cedric-diggory-1", udp, "ravenclaw/luna-lovegood-0", 5353, true},
					}}}},
				{Name: "Should support an 'allow-egress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-1", 53, true},
						{"hufflepuff/cedric-diggory-1", udp, "gryffindor/harry-potter-1", 5353, false},
					}}}},
				{Name: "Should support an 'deny-egress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-udp", 0, 1)},
						Pokes: []poke{
							{"hufflepuff/cedric-diggory-0", udp, "ravenclaw/luna-lovegood-1", 53, false},
							{"hufflepuff/cedric-diggory-1", udp, "ravenclaw/luna-lovegood-1", 5353, false},
						}}}},
				{Name: "Should support a 'deny-egress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", udp, "slytherin/draco-malfoy-0", 5353, false},
						{"hufflepuff/cedric-diggory-1", udp, "slytherin/draco-malfoy-0", 53, true},
					}}}},
				{Name: "Should support an 'pass-egress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-udp", 0, 2)},
						Pokes: []poke{
							{"hufflepuff/cedric-diggory-0", udp, "ravenclaw/luna-lovegood-1", 5353, true},
							{"hufflepuff/cedric-diggory-1", udp, "ravenclaw/luna-lovegood-1", 53, true},
						}}}},
				{Name: "Should support a 'pass-egress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Change: []change{swapEgress("egress-udp", 3, 4)},
						Pokes: []poke{
							{"hufflepuff/cedric-diggory-0", udp, "slytherin/draco-malfoy-0", 5353, true},
							{"hufflepuff/cedric-diggory-1", udp, "slytherin/draco-malfoy-0", 53, true},
						}}}},
			}},
		{Name: "CNPAdminTierGress", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-gress-rules-combined.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-gress' policy across different protocols",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
						{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-0", 53, true},
						{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
						{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
						{"ravenclaw/luna-lovegood-1", udp, "gryffindor/harry-potter-0", 53, true},
						{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-0", 9003, true},
					}}}},
				{Name: "Should support an 'allow-gress' policy across different protocols at the specified ports",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "hufflepuff/cedric-diggory-1", 8080, true},
						{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-1", 80, false},
						{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-1", 5353, true},
						{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-1", 53, false},
						{"gryffindor/harry-potter-0", sctp, "hufflepuff/cedric-diggory-1", 9003, true},
						{"gryffindor/harry-potter-1", sctp, "hufflepuff/cedric-diggory-1", 9005, false},
						{"hufflepuff/cedric-diggory-0", tcp, "gryffindor/harry-potter-1", 80, true},
						{"hufflepuff/cedric-diggory-1", tcp, "gryffindor/harry-potter-1", 8080, false},
						{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-1", 5353, true},
						{"hufflepuff/cedric-diggory-1", udp, "gryffindor/harry-potter-1", 53, false},
						{"hufflepuff/cedric-diggory-0", sctp, "gryffindor/harry-potter-1", 9003, true},
						{"hufflepuff/cedric-diggory-1", sctp, "gryffindor/harry-potter-1", 9005, false},
					}}}},
				{Name: "Should support an 'deny-gress' policy across different protocols",
					Steps: []cnpStep{{Change: []change{swapEgress("gress-rules", 0, 1), swapIngress("gress-rules", 0, 1)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-1", 80, false},
							{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-1", 53, false},
							{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-1", 9003, false},
							{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-1", 80, false},
							{"ravenclaw/luna-lovegood-1", udp, "gryffindor/harry-potter-1", 53, false},
							{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-1", 9003, false},
						}}}},
				{Name: "Should support a 'deny-gress' policy across different protocols at the specified ports",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
						{"gryffindor/harry-potter-0", udp, "slytherin/draco-malfoy-0", 53, false},
						{"gryffindor/harry-potter-1", udp, "slytherin/draco-malfoy-0", 5353, true},
						{"gryffindor/harry-potter-0", sctp, "slytherin/draco-malfoy-0", 9003, false},
						{"gryffindor/harry-potter-1", sctp, "slytherin/draco-malfoy-0", 9005, true},
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
						{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
						{"slytherin/draco-malfoy-0", udp, "gryffindor/harry-potter-0", 53, false},
						{"slytherin/draco-malfoy-1", udp, "gryffindor/harry-potter-0", 5353, true},
						{"slytherin/draco-malfoy-0", sctp, "gryffindor/harry-potter-0", 9003, false},
						{"slytherin/draco-malfoy-1", sctp, "gryffindor/harry-potter-0", 9005, true},
					}}}},
				{Name: "Should support an 'pass-gress' policy across different protocols",
					Steps: []cnpStep{{Change: []change{swapEgress("gress-rules", 0, 2), swapIngress("gress-rules", 0, 2)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
							{"gryffindor/harry-potter-0", udp, "ravenclaw/luna-lovegood-0", 5353, true},
							{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
							{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
							{"ravenclaw/luna-lovegood-1", udp, "gryffindor/harry-potter-0", 53, true},
							{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-0", 9003, true},
						}}}},
				{Name: "Should support a 'pass-gress' policy across different protocols at the specified ports",
					Steps: []cnpStep{{Change: []change{swapEgress("gress-rules", 3, 4), swapIngress("gress-rules", 3, 4)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, true},
							{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
							{"gryffindor/harry-potter-0", udp, "slytherin/draco-malfoy-0", 53, true},
							{"gryffindor/harry-potter-1", udp, "slytherin/draco-malfoy-0", 5353, true},
							{"gryffindor/harry-potter-0", sctp, "slytherin/draco-malfoy-0", 9003, true},
							{"gryffindor/harry-potter-1", sctp, "slytherin/draco-malfoy-0", 9005, true},
							{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, true},
							{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
							{"slytherin/draco-malfoy-0", udp, "gryffindor/harry-potter-0", 53, true},
							{"slytherin/draco-malfoy-1", udp, "gryffindor/harry-potter-0", 5353, true},
							{"slytherin/draco-malfoy-0", sctp, "gryffindor/harry-potter-0", 9003, true},
							{"slytherin/draco-malfoy-1", sctp, "gryffindor/harry-potter-0", 9005, true},
						}}}},
			}},
		{Name: "CNPAdminTierIngressSCTP", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-ingress-sctp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
						{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-0", 9005, true},
					}}}},
				{Name: "Should support an 'allow-ingress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", sctp, "ravenclaw/luna-lovegood-1", 9003, true},
						{"hufflepuff/cedric-diggory-1", sctp, "ravenclaw/luna-lovegood-1", 9005, false},
					}}}},
				{Name: "Should support an 'deny-ingress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-sctp", 0, 1)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-1", 9003, false},
							{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-1", 9005, false},
						}}}},
				{Name: "Should support a 'deny-ingress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", sctp, "ravenclaw/luna-lovegood-0", 9003, false},
						{"slytherin/draco-malfoy-1", sctp, "ravenclaw/luna-lovegood-0", 9005, true},
					}}}},
				{Name: "Should support an 'pass-ingress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-sctp", 0, 2)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-1", 9003, true},
							{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-1", 9005, true},
						}}}},
				{Name: "Should support a 'pass-ingress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-sctp", 3, 4)},
						Pokes: []poke{
							{"slytherin/draco-malfoy-0", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
							{"slytherin/draco-malfoy-1", sctp, "ravenclaw/luna-lovegood-0", 9005, true},
						}}}},
			}},
		{Name: "CNPAdminTierIngressTCP", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-ingress-tcp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
						{"ravenclaw/luna-lovegood-1", tcp, "gryffindor/harry-potter-0", 8080, true},
					}}}},
				{Name: "Should support an 'allow-ingress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", tcp, "gryffindor/harry-potter-1", 80, true},
						{"hufflepuff/cedric-diggory-1", tcp, "gryffindor/harry-potter-1", 8080, false},
					}}}},
				{Name: "Should not affect egress traffic when only ingress rules are specified",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 80, true},
					}}}},
				{Name: "Should support an 'deny-ingress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-tcp", 0, 1)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-1", 80, false},
							{"ravenclaw/luna-lovegood-1", tcp, "gryffindor/harry-potter-1", 8080, false},
						}}}},
				{Name: "Should support a 'deny-ingress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
						{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
					}}}},
				{Name: "Should support an 'pass-ingress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-tcp", 0, 2)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
							{"ravenclaw/luna-lovegood-1", tcp, "gryffindor/harry-potter-0", 8080, true},
						}}}},
				{Name: "Should support a 'pass-ingress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-tcp", 3, 4)},
						Pokes: []poke{
							{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, true},
							{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
						}}}},
			}},
		{Name: "CNPAdminTierIngressUDP", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-ingress-udp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", udp, "hufflepuff/cedric-diggory-0", 53, true},
						{"ravenclaw/luna-lovegood-1", udp, "hufflepuff/cedric-diggory-0", 5353, true},
					}}}},
				{Name: "Should support an 'allow-ingress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-1", 53, true},
						{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-1", 5353, false},
					}}}},
				{Name: "Should support an 'deny-ingress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-udp", 0, 1)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", udp, "hufflepuff/cedric-diggory-1", 53, false},
							{"ravenclaw/luna-lovegood-1", udp, "hufflepuff/cedric-diggory-1", 5353, false},
						}}}},
				{Name: "Should support a 'deny-ingress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", udp, "hufflepuff/cedric-diggory-0", 5353, false},
						{"slytherin/draco-malfoy-1", udp, "hufflepuff/cedric-diggory-0", 53, true},
					}}}},
				{Name: "Should support an 'pass-ingress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-udp", 0, 2)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", udp, "hufflepuff/cedric-diggory-1", 5353, true},
							{"ravenclaw/luna-lovegood-1", udp, "hufflepuff/cedric-diggory-1", 53, true},
						}}}},
				{Name: "Should support a 'pass-ingress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Change: []change{swapIngress("ingress-udp", 3, 4)},
						Pokes: []poke{
							{"slytherin/draco-malfoy-0", udp, "hufflepuff/cedric-diggory-0", 5353, true},
							{"slytherin/draco-malfoy-1", udp, "hufflepuff/cedric-diggory-0", 53, true},
						}}}},
			}},
		{Name: "CNPAdminTierIntegration", Feature: "ClusterNetworkPolicy", Manifest: "base/api_integration/standard-anp-np-banp.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should Deny traffic from slytherin to gryffindor respecting admin CNP",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
						{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, false},
					}}}},
				{Name: "Should Deny traffic to slytherin from gryffindor respecting admin CNP",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, false},
					}}}},
				{Name: "Should support a 'pass-ingress' policy for admin CNP and respect the match for network policy",
					Steps: []cnpStep{{Change: []change{ingressAction("pass-example", 0, pass)},
						Pokes: []poke{
							{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, true},
							{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
						}}}},
				{Name: "Should support a 'pass-egress' policy for admin CNP and respect the match for network policy",
					Steps: []cnpStep{{Change: []change{egressAction("pass-example", 0, pass)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, true},
							{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
						}}}},
				{Name: "Should support a 'pass-ingress' policy for admin CNP and respect the match for baseline cluster network policy",
					Steps: []cnpStep{{Change: []change{deleteNetworkPolicy("gryffindor/allow-gress-from-to-slytherin-to-gryffindor")},
						Pokes: []poke{
							{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
							{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, false},
						}}}},
				{Name: "Should support a 'pass-egress' policy for admin CNP and respect the match for baseline cluster network policy",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, false},
					}}}},
			}},
		{Name: "CNPAdminTierPodSelector", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-pod-selector-rules.yaml",
			Subtests: podSelectorSubtests()},
		{Name: "CNPAdminTierPortRange", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-port-range-rules-combined.yaml",
			Subtests: portRangeSubtests()},
		{Name: "CNPAdminTierPriorityField", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-priority-field.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should Deny traffic from slytherin to gryffindor respecting admin CNP",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
						{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, false},
					}}}},
				{Name: "Should Deny traffic to slytherin from gryffindor respecting admin CNP",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, false},
					}}}},
				{Name: "Should respect admin CNP priority field; thus passing both ingress and egress traffic over to baseline CNP",
					Steps: []cnpStep{{Change: []change{priority("old-priority-60-new-priority-40-example", 40)},
						Pokes: []poke{
							{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, true},
							{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
							{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, true},
							{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
						}}}},
			}},
		{Name: "CNPAdminTierSamePriority", Feature: "ClusterNetworkPolicy", Manifest: "base/admin_tier/standard-same-priority.yaml",
			Subtests: samePrioritySubtests("0", "gryffindor/harry-potter-1")},
		{Name: "CNPBaselineTierEgressNamedPort", Feature: "ClusterNetworkPolicyNamedPorts", Manifest: "base/baseline_tier/standard-egress-udp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for named port",
					Steps: []cnpStep{{Change: []change{egressNamedPort("default", 3, "dns")},
						Pokes: []poke{
							{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-1", 53, true},
							{"hufflepuff/cedric-diggory-1", udp, "gryffindor/harry-potter-1", 5353, false},
						}}}},
			}},
		{Name: "CNPBaselineTierEgressNodePeers", Feature: "ClusterNetworkPolicyEgressNodePeers", Manifest: "base/baseline_tier/experimental-egress-selector-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' rule policy for egress-node-peer",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[0]), true},
						{"gryffindor/harry-potter-1", tcp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[1]), true},
					}}}},
				{Name: "Should support a 'deny-egress' rule policy for egress-node-peer",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-1", udp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[4]), false},
						{"gryffindor/harry-potter-1", sctp, "forbidden-forrest/centaur-1", int32(hostNetworkPorts[6]), false},
					}}}},
			}},
		{Name: "CNPBaselineTierIngressNamedPort", Feature: "ClusterNetworkPolicyNamedPorts", Manifest: "base/baseline_tier/standard-ingress-tcp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for named port",
					Steps: []cnpStep{{Change: []change{ingressNamedPort("default", 3, "web")},
						Pokes: []poke{
							{"hufflepuff/cedric-diggory-0", tcp, "gryffindor/harry-potter-1", 80, true},
							{"hufflepuff/cedric-diggory-1", tcp, "gryffindor/harry-potter-1", 8080, false},
						}}}},
			}},
		{Name: "CNPBaselineTierEgressInlineCIDRPeers", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-egress-inline-cidr-rules.yaml",
			Subtests: inlineCIDRSubtests("default")},
		{Name: "CNPBaselineTierEgressSCTP", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-egress-sctp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", sctp, "gryffindor/harry-potter-0", 9003, true},
						{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-0", 9005, true},
					}}}},
				{Name: "Should support an 'allow-egress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", sctp, "hufflepuff/cedric-diggory-1", 9003, true},
						{"ravenclaw/luna-lovegood-1", sctp, "hufflepuff/cedric-diggory-1", 9005, false},
					}}}},
				{Name: "Should support an 'deny-egress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("default", 0, 1)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", sctp, "gryffindor/harry-potter-1", 9003, false},
							{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-1", 9005, false},
						}}}},
				{Name: "Should support a 'deny-egress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", sctp, "slytherin/draco-malfoy-0", 9003, false},
						{"ravenclaw/luna-lovegood-1", sctp, "slytherin/draco-malfoy-0", 9005, true},
					}}}},
			}},
		{Name: "CNPBaselineTierEgressTCP", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-egress-tcp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
						{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-0", 8080, true},
					}}}},
				{Name: "Should support an 'allow-egress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "hufflepuff/cedric-diggory-1", 8080, true},
						{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-1", 80, false},
					}}}},
				{Name: "Should not affect ingress traffic when only egress rules are specified",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-1", 80, true},
					}}}},
				{Name: "Should support an 'deny-egress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("default", 0, 1)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-1", 80, false},
							{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-1", 8080, false},
						}}}},
				{Name: "Should support a 'deny-egress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
					}}}},
			}},
		{Name: "CNPBaselineTierEgressUDP", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-egress-udp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-egress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", udp, "ravenclaw/luna-lovegood-0", 53, true},
						{"hufflepuff/cedric-diggory-1", udp, "ravenclaw/luna-lovegood-0", 5353, true},
					}}}},
				{Name: "Should support an 'allow-egress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-1", 53, true},
						{"hufflepuff/cedric-diggory-1", udp, "gryffindor/harry-potter-1", 5353, false},
					}}}},
				{Name: "Should support an 'deny-egress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapEgress("default", 0, 1)},
						Pokes: []poke{
							{"hufflepuff/cedric-diggory-0", udp, "ravenclaw/luna-lovegood-1", 53, false},
							{"hufflepuff/cedric-diggory-1", udp, "ravenclaw/luna-lovegood-1", 5353, false},
						}}}},
				{Name: "Should support a 'deny-egress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", udp, "slytherin/draco-malfoy-0", 5353, false},
						{"hufflepuff/cedric-diggory-1", udp, "slytherin/draco-malfoy-0", 53, true},
					}}}},
			}},
		{Name: "CNPBaselineTierGress", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-gress-rules-combined.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-gress' policy across different protocols",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
						{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-0", 53, true},
						{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
						{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
						{"ravenclaw/luna-lovegood-1", udp, "gryffindor/harry-potter-0", 53, true},
						{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-0", 9003, true},
					}}}},
				{Name: "Should support an 'allow-gress' policy across different protocols at the specified ports",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "hufflepuff/cedric-diggory-1", 8080, true},
						{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-1", 80, false},
						{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-1", 5353, true},
						{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-1", 53, false},
						{"gryffindor/harry-potter-0", sctp, "hufflepuff/cedric-diggory-1", 9003, true},
						{"gryffindor/harry-potter-1", sctp, "hufflepuff/cedric-diggory-1", 9005, false},
						{"hufflepuff/cedric-diggory-0", tcp, "gryffindor/harry-potter-1", 80, true},
						{"hufflepuff/cedric-diggory-1", tcp, "gryffindor/harry-potter-1", 8080, false},
						{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-1", 5353, true},
						{"hufflepuff/cedric-diggory-1", udp, "gryffindor/harry-potter-1", 53, false},
						{"hufflepuff/cedric-diggory-0", sctp, "gryffindor/harry-potter-1", 9003, true},
						{"hufflepuff/cedric-diggory-1", sctp, "gryffindor/harry-potter-1", 9005, false},
					}}}},
				{Name: "Should support an 'deny-gress' policy across different protocols",
					Steps: []cnpStep{{Change: []change{swapEgress("default", 0, 1), swapIngress("default", 0, 1)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-1", 80, false},
							{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-1", 53, false},
							{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-1", 9003, false},
							{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-1", 80, false},
							{"ravenclaw/luna-lovegood-1", udp, "gryffindor/harry-potter-1", 53, false},
							{"ravenclaw/luna-lovegood-1", sctp, "gryffindor/harry-potter-1", 9003, false},
						}}}},
				{Name: "Should support a 'deny-gress' policy across different protocols at the specified ports",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 8080, true},
						{"gryffindor/harry-potter-0", udp, "slytherin/draco-malfoy-0", 53, false},
						{"gryffindor/harry-potter-1", udp, "slytherin/draco-malfoy-0", 5353, true},
						{"gryffindor/harry-potter-0", sctp, "slytherin/draco-malfoy-0", 9003, false},
						{"gryffindor/harry-potter-1", sctp, "slytherin/draco-malfoy-0", 9005, true},
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
						{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
						{"slytherin/draco-malfoy-0", udp, "gryffindor/harry-potter-0", 53, false},
						{"slytherin/draco-malfoy-1", udp, "gryffindor/harry-potter-0", 5353, true},
						{"slytherin/draco-malfoy-0", sctp, "gryffindor/harry-potter-0", 9003, false},
						{"slytherin/draco-malfoy-1", sctp, "gryffindor/harry-potter-0", 9005, true},
					}}}},
			}},
		{Name: "CNPBaselineTierIngressSCTP", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-ingress-sctp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
						{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-0", 9005, true},
					}}}},
				{Name: "Should support an 'allow-ingress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", sctp, "ravenclaw/luna-lovegood-1", 9003, true},
						{"hufflepuff/cedric-diggory-1", sctp, "ravenclaw/luna-lovegood-1", 9005, false},
					}}}},
				{Name: "Should support an 'deny-ingress' policy for SCTP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("default", 0, 1)},
						Pokes: []poke{
							{"gryffindor/harry-potter-0", sctp, "ravenclaw/luna-lovegood-1", 9003, false},
							{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-1", 9005, false},
						}}}},
				{Name: "Should support a 'deny-ingress' policy for SCTP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", sctp, "ravenclaw/luna-lovegood-0", 9003, false},
						{"slytherin/draco-malfoy-1", sctp, "ravenclaw/luna-lovegood-0", 9005, true},
					}}}},
			}},
		{Name: "CNPBaselineTierIngressTCP", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-ingress-tcp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
						{"ravenclaw/luna-lovegood-1", tcp, "gryffindor/harry-potter-0", 8080, true},
					}}}},
				{Name: "Should support an 'allow-ingress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"hufflepuff/cedric-diggory-0", tcp, "gryffindor/harry-potter-1", 80, true},
						{"hufflepuff/cedric-diggory-1", tcp, "gryffindor/harry-potter-1", 8080, false},
					}}}},
				{Name: "Should not affect egress traffic when only ingress rules are specified",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 80, true},
					}}}},
				{Name: "Should support an 'deny-ingress' policy for TCP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("default", 0, 1)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-1", 80, false},
							{"ravenclaw/luna-lovegood-1", tcp, "gryffindor/harry-potter-1", 8080, false},
						}}}},
				{Name: "Should support a 'deny-ingress' policy for TCP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, false},
						{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 8080, true},
					}}}},
			}},
		{Name: "CNPBaselineTierIngressUDP", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-ingress-udp-rules.yaml",
			Subtests: []cnpSubtest{
				{Name: "Should support an 'allow-ingress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Pokes: []poke{
						{"ravenclaw/luna-lovegood-0", udp, "hufflepuff/cedric-diggory-0", 53, true},
						{"ravenclaw/luna-lovegood-1", udp, "hufflepuff/cedric-diggory-0", 5353, true},
					}}}},
				{Name: "Should support an 'allow-ingress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-1", 53, true},
						{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-1", 5353, false},
					}}}},
				{Name: "Should support an 'deny-ingress' policy for UDP protocol; ensure rule ordering is respected",
					Steps: []cnpStep{{Change: []change{swapIngress("default", 0, 1)},
						Pokes: []poke{
							{"ravenclaw/luna-lovegood-0", udp, "hufflepuff/cedric-diggory-1", 53, false},
							{"ravenclaw/luna-lovegood-1", udp, "hufflepuff/cedric-diggory-1", 5353, false},
						}}}},
				{Name: "Should support a 'deny-ingress' policy for UDP protocol at the specified port",
					Steps: []cnpStep{{Pokes: []poke{
						{"slytherin/draco-malfoy-0", udp, "hufflepuff/cedric-diggory-0", 5353, false},
						{"slytherin/draco-malfoy-1", udp, "hufflepuff/cedric-diggory-0", 53, true},
					}}}},
			}},
		{Name: "CNPBaselineTierPodSelector", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-pod-selector-rules.yaml",
			Subtests: podSelectorSubtests()},
		{Name: "CNPBaselineTierPortRange", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-port-range-rules-combined.yaml",
			Subtests: portRangeSubtests()},
		{Name: "CNPBaselineTierSamePriority", Feature: "ClusterNetworkPolicy", Manifest: "base/baseline_tier/standard-same-priority.yaml",
			Subtests: samePrioritySubtests("1", "gryffindor/harry-potter-0")},
	}
}

// inlineCIDRSubtests are the subtests of CNPAdminTierEgressInlineCIDRPeers and
// CNPBaselineTierEgressInlineCIDRPeers, whose policy is cnp: the deny subtest relabels namespace
// slytherin out of the Accept rule's selector and back between its pokes.
func inlineCIDRSubtests(cnp string) []cnpSubtest {
	tcp, udp, sctp := protocolTCP, protocolUDP, protocolSCTP
	return []cnpSubtest{
		{Name: "Should support a 'deny-egress' rule policy for egress-cidr-peer",
			Steps: []cnpStep{
				{Pokes: []poke{
					{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-0", 80, false},
					{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-0", 53, false},
					{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-0", 9003, false},
					{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-0", 80, false},
					{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-0", 53, false},
					{"gryffindor/harry-potter-1", sctp, "hufflepuff/cedric-diggory-0", 9003, false},
					{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 80, true},
					{"gryffindor/harry-potter-1", udp, "slytherin/draco-malfoy-0", 53, true},
					{"gryffindor/harry-potter-1", sctp, "slytherin/draco-malfoy-0", 9003, true},
				}},
				{Change: []change{setNamespaceLabels("slytherin", map[string]string{"conformance-house": "denied-namespace-label"})},
					Pokes: []poke{
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 80, false},
						{"gryffindor/harry-potter-1", udp, "slytherin/draco-malfoy-0", 53, false},
						{"gryffindor/harry-potter-1", sctp, "slytherin/draco-malfoy-0", 9003, false},
					}},
				{Change: []change{setNamespaceLabels("slytherin", map[string]string{"conformance-house": "slytherin"})},
					Pokes: []poke{
						{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 80, true},
						{"gryffindor/harry-potter-1", udp, "slytherin/draco-malfoy-0", 53, true},
						{"gryffindor/harry-potter-1", sctp, "slytherin/draco-malfoy-0", 9003, true},
					}},
			}},
		{Name: "Should support an 'allow-egress' rule policy for egress-cidr-peer",
			Steps: []cnpStep{{Change: []change{prependEgressToPodIPs(cnp, "allow-egress-to-specific-podIPs", "ravenclaw/luna-lovegood-0", "hufflepuff/cedric-diggory-0")},
				Pokes: []poke{
					{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-0", 80, true},
					{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-0", 53, true},
					{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-0", 9003, true},
					{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-0", 80, true},
					{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-0", 53, true},
					{"gryffindor/harry-potter-1", sctp, "hufflepuff/cedric-diggory-0", 9003, true},
					{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-1", 80, false},
					{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-1", 53, false},
					{"gryffindor/harry-potter-1", sctp, "ravenclaw/luna-lovegood-1", 9003, false},
					{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-1", 80, false},
					{"gryffindor/harry-potter-1", udp, "hufflepuff/cedric-diggory-1", 53, false},
					{"gryffindor/harry-potter-1", sctp, "hufflepuff/cedric-diggory-1", 9003, false},
				}}}},
	}
}

// podSelectorSubtests are the subtests of CNPAdminTierPodSelector and CNPBaselineTierPodSelector
// (the same pokes; the manifests differ in tier and priority): pods selected by their labels
// alone and with a namespace selector, in peers and subject, and pods labelled into and out of
// a selector between pokes.
func podSelectorSubtests() []cnpSubtest {
	tcp := protocolTCP
	return []cnpSubtest{
		{Name: "Should support pod selectors in egress peers",
			Steps: []cnpStep{{Pokes: []poke{
				{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 8080, false},
				{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
				{"gryffindor/harry-potter-1", tcp, "ravenclaw/luna-lovegood-1", 80, false},
			}}}},
		{Name: "Should support pod selectors in ingress peers",
			Steps: append([]cnpStep{{Pokes: []poke{
				{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-1", 80, false},
				{"slytherin/draco-malfoy-0", tcp, "gryffindor/harry-potter-0", 80, true},
			}}}, labelTurns("hufflepuff/cedric-diggory-0", "hufflepuff/cedric-diggory-1", "gryffindor/harry-potter-0", "blocked")...),
			Cleanup: []change{removePodLabel("hufflepuff/cedric-diggory-0", conformanceRoleLabel),
				removePodLabel("hufflepuff/cedric-diggory-1", conformanceRoleLabel)}},
		{Name: "Should support pod selectors in the subject",
			Steps: append([]cnpStep{{Pokes: []poke{
				{"slytherin/draco-malfoy-0", tcp, "ravenclaw/luna-lovegood-1", 80, true},
			}}}, labelTurns("ravenclaw/luna-lovegood-0", "ravenclaw/luna-lovegood-1", "slytherin/draco-malfoy-0", "restricted")...),
			Cleanup: []change{removePodLabel("ravenclaw/luna-lovegood-0", conformanceRoleLabel),
				removePodLabel("ravenclaw/luna-lovegood-1", conformanceRoleLabel)}},
	}
}

// labelTurns are the steps both label-changing subtests of the pod selector tests end with, the
// selector matching conformanceRoleLabel=value on clients a and b of one house, which poke
// server on TCP/80: a labelled, a is blocked and b is not; a unlabelled, a connects; b
// labelled, b is blocked.
func labelTurns(a, b, server, value string) []cnpStep {
	tcp := protocolTCP
	return []cnpStep{
		{Change: []change{setPodLabel(a, conformanceRoleLabel, value)},
			Pokes: []poke{{a, tcp, server, 80, false}, {b, tcp, server, 80, true}}},
		{Change: []change{removePodLabel(a, conformanceRoleLabel)},
			Pokes: []poke{{a, tcp, server, 80, true}}},
		{Change: []change{setPodLabel(b, conformanceRoleLabel, value)},
			Pokes: []poke{{b, tcp, server, 80, false}}},
	}
}

// portRangeSubtests are the subtests of CNPAdminTierPortRange and CNPBaselineTierPortRange (the
// same pokes; the manifests differ in tier and priority): gryffindor's egress and ingress
// accepted on a port range of one protocol per house, the rest denied.
func portRangeSubtests() []cnpSubtest {
	tcp, udp, sctp := protocolTCP, protocolUDP, protocolSCTP
	return []cnpSubtest{
		{Name: "Should support egress port range rules across different protocols",
			Steps: []cnpStep{{Pokes: []poke{
				{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 80, true},
				{"gryffindor/harry-potter-0", tcp, "ravenclaw/luna-lovegood-0", 8080, true},
				{"gryffindor/harry-potter-1", udp, "ravenclaw/luna-lovegood-0", 53, false},
				{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-0", 53, true},
				{"gryffindor/harry-potter-0", udp, "hufflepuff/cedric-diggory-0", 5353, true},
				{"gryffindor/harry-potter-1", tcp, "hufflepuff/cedric-diggory-0", 80, false},
				{"gryffindor/harry-potter-0", sctp, "slytherin/draco-malfoy-0", 9003, true},
				{"gryffindor/harry-potter-0", sctp, "slytherin/draco-malfoy-0", 9005, true},
				{"gryffindor/harry-potter-1", tcp, "slytherin/draco-malfoy-0", 80, false},
			}}}},
		{Name: "Should support ingress port range rules across different protocols",
			Steps: []cnpStep{{Pokes: []poke{
				{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 80, true},
				{"ravenclaw/luna-lovegood-0", tcp, "gryffindor/harry-potter-0", 8080, true},
				{"ravenclaw/luna-lovegood-1", udp, "gryffindor/harry-potter-0", 53, false},
				{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-0", 53, true},
				{"hufflepuff/cedric-diggory-0", udp, "gryffindor/harry-potter-0", 5353, true},
				{"hufflepuff/cedric-diggory-1", tcp, "gryffindor/harry-potter-0", 80, false},
				{"slytherin/draco-malfoy-0", sctp, "gryffindor/harry-potter-0", 9003, true},
				{"slytherin/draco-malfoy-0", sctp, "gryffindor/harry-potter-0", 9005, true},
				{"slytherin/draco-malfoy-1", tcp, "gryffindor/harry-potter-0", 80, false},
			}}}},
	}
}

// samePrioritySubtests are the subtests of CNPAdminTierSamePriority (servers the houses' pods
// -0: server "0") and CNPBaselineTierSamePriority (their pods -1: server "1"), the clients the
// same but toRavenclaw, the client of the last poke: three policies of one priority, two
// sharing a subject and two a peer, each denying its own port in both directions and nothing
// else.
func samePrioritySubtests(server, toRavenclaw string) []cnpSubtest {
	tcp := protocolTCP
	gryffindor, slytherin := "gryffindor/harry-potter-"+server, "slytherin/draco-malfoy-"+server
	hufflepuff, ravenclaw := "hufflepuff/cedric-diggory-"+server, "ravenclaw/luna-lovegood-"+server
	return []cnpSubtest{
		{Name: "Should deny traffic in both directions for each same-priority policy",
			Steps: []cnpStep{{Pokes: []poke{
				{"slytherin/draco-malfoy-0", tcp, gryffindor, 80, false},
				{"gryffindor/harry-potter-0", tcp, slytherin, 80, false},
				{"hufflepuff/cedric-diggory-0", tcp, gryffindor, 80, false},
				{"gryffindor/harry-potter-1", tcp, hufflepuff, 80, false},
				{"slytherin/draco-malfoy-1", tcp, hufflepuff, 8080, false},
				{"hufflepuff/cedric-diggory-1", tcp, slytherin, 8080, false},
			}}}},
		{Name: "Should not apply one same-priority policy's rules to another policy's subject",
			Steps: []cnpStep{{Pokes: []poke{
				{"slytherin/draco-malfoy-0", tcp, gryffindor, 8080, true},
				{"gryffindor/harry-potter-0", tcp, slytherin, 8080, true},
				{"slytherin/draco-malfoy-1", tcp, hufflepuff, 80, true},
				{"hufflepuff/cedric-diggory-0", tcp, slytherin, 80, true},
			}}}},
		{Name: "Should not affect traffic matching no same-priority policy",
			Steps: []cnpStep{{Pokes: []poke{
				{"ravenclaw/luna-lovegood-0", tcp, gryffindor, 80, true},
				{toRavenclaw, tcp, ravenclaw, 80, true},
			}}}},
	}
}
