package e2e

// The upstream NetworkPolicy connectivity cases, transcribed from kubernetes/kubernetes
// test/e2e/network/netpol/network_policy.go at commit 008b3652 (Apache-2.0): every It of the
// contexts "NetworkPolicy between server and client" (42, TCP), "... using UDP" (3) and "... using
// SCTP" (3), in upstream order. IDs number those Its in that order (1-42 TCP, 43-45 UDP, 46-48
// SCTP). Each case keeps upstream's It text, its pod topology, its policies (same names, same
// selectors, same ports) and its expectations written with the same calls. Where the 9-pod model
// has a pod upstream's topology lacks and upstream's calls do not cover it, Model9 adds the
// missing call (these are what upstream wrote before kubernetes/kubernetes PR #137110 gave each
// test its own topology).
//
// Services, DNS and hostNetwork: no upstream case here needs them. Upstream probes the
// destination's Service ClusterIP (test/e2e/network/netpol/probe.go), which kube-proxy translates
// to the pod's IP before policy judges the packet; this suite probes the pod IP, so every policy
// judges the same packets and upstream's expected tables hold unchanged. The "allow DNS" egress
// rules of older upstream helpers are not used by these cases.

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Case is one upstream It.
type Case struct {
	ID      int
	Context string   // upstream ginkgo.Context: "" (TCP), "using UDP", "using SCTP", or "beyond upstream"
	Name    string   // upstream It text
	Pods    []string // upstream topology (initializeResources)
	Steps   []Step
}

// Step is one mutation of the cluster followed by validations, in this order: create, update,
// delete all policies, add namespace labels, add pod labels.
type Step struct {
	By                string
	Create            func(View) []*networkingv1.NetworkPolicy
	Update            func(View) []*networkingv1.NetworkPolicy // replaces the policy of the same name
	DeleteAllPolicies bool
	NamespaceLabels   map[string]map[string]string // namespace -> labels to add
	PodLabels         map[string]map[string]string // "ns/pod" -> labels to add
	Probes            []Probe
}

// Probe is upstream's ValidateOrFail(TestCase{ToPort, Protocol, Reachability}): the expected
// table starts all-true, then Expect applies upstream's calls; Model9 adds the calls for pods
// outside upstream's topology (nil when upstream's calls already cover the 9 pods).
type Probe struct {
	Protocol corev1.Protocol
	Port     int32
	Expect   func(r *Reachability)
	Model9   func(r *Reachability)
}

func allowAll(*Reachability) {}

const (
	ctxUDP    = "using UDP"
	ctxSCTP   = "using SCTP"
	ctxBeyond = "beyond upstream"
)

func cases() []Case {
	nsX, nsY, nsZ := "x", "y", "z"
	in := metav1.LabelSelectorOpIn
	notIn := metav1.LabelSelectorOpNotIn
	all := metav1.LabelSelector{}
	podA := map[string]string{"pod": "a"}
	// Upstream's repeated fragments.
	fromNsY := networkingv1.NetworkPolicyPeer{NamespaceSelector: matchLabels(namespaceLabelKey, nsY)}
	nsYPodA := networkingv1.NetworkPolicyPeer{NamespaceSelector: matchLabels(namespaceLabelKey, nsY), PodSelector: matchLabels("pod", "a")}
	xToXa := func(r *Reachability) {
		r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{Namespace: nsX, Pod: "a"}, false)
		r.ExpectPeer(&Peer{Namespace: nsZ}, &Peer{Namespace: nsX, Pod: "a"}, false)
	}
	onlyYaToXa := func(r *Reachability) {
		r.ExpectAllIngress("x/a", false)
		r.Expect("y/a", "x/a", true)
	}
	denyIngressX := func(r *Reachability) { r.ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false) }
	allowPort81FromY := func(proto *corev1.Protocol, name string) *networkingv1.NetworkPolicy {
		return genPolicyMatchLabels(nsX, name, podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{fromNsY}, Ports: []networkingv1.NetworkPolicyPort{numPort(81, proto)}}))
	}
	reachabilityALLOW := func(r *Reachability) {
		r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{Namespace: nsX, Pod: "a"}, false)
		r.ExpectPeer(&Peer{Namespace: nsY}, &Peer{Namespace: nsX, Pod: "a"}, true)
		r.ExpectPeer(&Peer{Namespace: nsZ}, &Peer{Namespace: nsX, Pod: "a"}, false)
	}
	cidrExcept := func(v View) []*networkingv1.NetworkPolicy {
		b := v.IP("x/b")
		return []*networkingv1.NetworkPolicy{genPolicyMatchLabels(nsX, "allow-client-a-via-cidr-egress-rule", podA,
			egressRules(networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: largeCIDR(b), Except: []string{hostCIDR(b)}}}}}))}
	}

	out := []Case{
		{ID: 1, Name: "should support a 'default-deny-ingress' policy",
			Pods: []string{"x/a", "x/b", "y/a", "y/b"},
			Steps: []Step{{
				Create: static(genPolicy(nsX, "deny-ingress", all, ingressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: denyIngressX}},
			}}},
		{ID: 2, Name: "should support a 'default-deny-all' policy",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				Create: static(genPolicy(nsX, "deny-all", all, ingressRules(), egressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false)
					r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false)
				}}},
			}}},
		{ID: 3, Name: "should enforce policy to allow traffic from pods within server namespace based on PodSelector",
			Pods: []string{"x/a", "x/b", "x/c", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "x-a-allows-x-b", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", "b")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.Expect("x/b", "x/a", true)
				}}},
			}}},
		{ID: 4, Name: "should enforce policy to allow ingress traffic for a target",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				By: "having a deny all ingress policy",
				Create: static(
					genPolicy(nsX, "deny-all", all, ingressRules()),
					genPolicyMatchLabels(nsX, "allow-all-to-a", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
						From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}, NamespaceSelector: &metav1.LabelSelector{}}}})),
				),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80,
					Expect: func(r *Reachability) {
						r.ExpectAllIngress("x/a", true)
						r.ExpectAllIngress("x/b", false)
					},
					Model9: func(r *Reachability) { r.ExpectAllIngress("x/c", false) },
				}},
			}}},
		{ID: 5, Name: "should enforce policy to allow ingress traffic from pods in all namespaces",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-from-another-ns", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: allowAll}},
			}}},
		{ID: 6, Name: "should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-client-a-via-ns-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{fromNsY}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: xToXa}},
			}}},
		{ID: 7, Name: "should enforce policy based on PodSelector with MatchExpressions",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "x-a-allows-x-b", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchExpr("pod", in, "b")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.Expect("x/b", "x/a", true)
				}}},
			}}},
		{ID: 8, Name: "should enforce policy based on NamespaceSelector with MatchExpressions",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-match-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchExpr(namespaceLabelKey, in, nsY)}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: xToXa}},
			}}},
		{ID: 9, Name: "should enforce policy based on PodSelector or NamespaceSelector",
			Pods: []string{"x/a", "x/b", "x/c", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-match-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{
						{NamespaceSelector: matchExpr(namespaceLabelKey, notIn, nsX)},
						{PodSelector: matchLabels("pod", "b")},
					}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.Expect("x/a", "x/a", false)
					r.Expect("x/c", "x/a", false)
				}}},
			}}},
		{ID: 10, Name: "should enforce policy based on PodSelector and NamespaceSelector",
			Pods: []string{"x/a", "x/b", "y/a", "y/b", "z/b"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-podselector-and-nsselector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchExpr(namespaceLabelKey, notIn, nsX), PodSelector: matchLabels("pod", "b")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.Expect("y/b", "x/a", true)
					r.Expect("z/b", "x/a", true)
				}}},
			}}},
		{ID: 11, Name: "should enforce policy based on Multiple PodSelectors and NamespaceSelectors",
			Pods: []string{"x/a", "x/b", "y/a", "y/b", "y/c"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-z-pod-b-c", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchExpr(namespaceLabelKey, notIn, nsX), PodSelector: matchExpr("pod", in, "b", "c")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80,
					Expect: func(r *Reachability) {
						r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{Namespace: nsX, Pod: "a"}, false)
						r.Expect("y/a", "x/a", false)
					},
					Model9: func(r *Reachability) { r.Expect("z/a", "x/a", false) },
				}},
			}}},
		{ID: 12, Name: "should enforce policy based on any PodSelectors",
			Pods: []string{"x/a", "x/b", "x/c"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-x-pod-b-c", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", "b")}, {PodSelector: matchLabels("pod", "c")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.Expect("x/b", "x/a", true)
					r.Expect("x/c", "x/a", true)
				}}},
			}}},
		{ID: 13, Name: "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector",
			Pods: []string{"x/a", "x/b", "y/a", "y/b", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-pod-a-via-namespace-pod-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{nsYPodA}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: onlyYaToXa}},
			}}},
		{ID: 14, Name: "should enforce policy based on Ports",
			Pods: []string{"x/a", "x/b", "y/a", "y/b", "z/a"},
			Steps: []Step{{
				By:     "Creating a network allowPort81Policy which only allows allow listed namespaces (y) to connect on exactly one port (81)",
				Create: static(allowPort81FromY(&protocolTCP, "allow-client-a-via-ns-selector")),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: reachabilityALLOW}},
			}}},
		{ID: 15, Name: "should enforce multiple, stacked policies with overlapping podSelectors",
			Pods: []string{"x/a", "x/b", "y/a", "y/b", "z/a"},
			Steps: []Step{{
				By:     "Creating a network allowPort81Policy which only allows allow listed namespaces (y) to connect on exactly one port (81)",
				Create: static(allowPort81FromY(&protocolTCP, "allow-client-a-via-ns-selector")),
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 81, Expect: reachabilityALLOW},
					{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }},
				},
			}, {
				By: "Verifying that we can add a policy to unblock port 80",
				Create: static(genPolicyMatchLabels(nsX, "allow-client-a-via-ns-selector-80", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{fromNsY}, Ports: []networkingv1.NetworkPolicyPort{numPort(80, &protocolTCP)}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: reachabilityALLOW}},
			}}},
		{ID: 16, Name: "should support allow-all policy",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				By:     "Creating a network policy which allows all traffic.",
				Create: static(genPolicyMatchLabels(nsX, "allow-all", map[string]string{}, ingressRules(networkingv1.NetworkPolicyIngressRule{}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: allowAll}, {Protocol: protocolTCP, Port: 81, Expect: allowAll}},
			}}},
		{ID: 17, Name: "should allow ingress access on one named port",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				By: "Blocking all ports other then 81 in the entire namespace",
				Create: static(genPolicyMatchLabels(nsX, "allow-all", map[string]string{}, ingressRules(networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{namedPort("serve-81-tcp", nil)}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: allowAll}, {Protocol: protocolTCP, Port: 80, Expect: denyIngressX}},
			}}},
		{ID: 18, Name: "should allow ingress access from namespace on one named port",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-client-a-via-ns-selector-80", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{fromNsY}, Ports: []networkingv1.NetworkPolicyPort{namedPort("serve-80-tcp", &protocolTCP)}}))),
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 80, Expect: xToXa},
					{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }},
				},
			}}},
		{ID: 19, Name: "should allow egress access on one named port",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-egress", map[string]string{}, egressRules(networkingv1.NetworkPolicyEgressRule{
					Ports: []networkingv1.NetworkPolicyPort{namedPort("serve-80-tcp", nil)}}))),
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 80, Expect: allowAll},
					{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) { r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false) }},
				},
			}}},
		{ID: 20, Name: "should enforce updated policy",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By:     "Using the simplest possible mutation: start with allow all, then switch to deny all",
				Create: static(genPolicyMatchLabels(nsX, "allow-all-mutate-to-deny-all", map[string]string{}, ingressRules(networkingv1.NetworkPolicyIngressRule{}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: allowAll}},
			}, {
				By:     "update the policy to deny all",
				Update: static(genPolicyMatchLabels(nsX, "allow-all-mutate-to-deny-all", map[string]string{}, ingressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: denyIngressX}},
			}}},
		{ID: 21, Name: "should allow ingress access from updated namespace",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-client-a-via-ns-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchLabels("ns2", "updated")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}, {
				By:              "add a new label",
				NamespaceLabels: map[string]map[string]string{nsY: {"ns2": "updated"}},
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.ExpectPeer(&Peer{Namespace: nsY}, &Peer{}, true)
				}}},
			}}},
		{ID: 22, Name: "should allow ingress access from updated pod",
			Pods: []string{"x/a", "x/b"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-client-a-via-pod-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", "b", "pod2", "updated")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}, {
				By:        "x/b is able to reach x/a when label is updated",
				PodLabels: map[string]map[string]string{"x/b": {"pod": "b", "pod2": "updated"}},
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.Expect("x/b", "x/a", true)
				}}},
			}}},
		{ID: 23, Name: "should deny ingress from pods on other namespaces",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicy(nsX, "deny-empty-policy", all, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{}}}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectPeer(&Peer{Namespace: nsY}, &Peer{Namespace: nsX}, false)
					r.ExpectPeer(&Peer{Namespace: nsZ}, &Peer{Namespace: nsX}, false)
				}}},
			}}},
		{ID: 24, Name: "should deny ingress access to updated pod",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By:     "Verify that everything can reach x/a",
				Create: static(genPolicy(nsX, "deny-ingress-via-label-selector", *matchLabels("target", "isolated"), ingressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: allowAll}},
			}, {
				PodLabels: map[string]map[string]string{"x/a": {"target": "isolated"}},
				Probes:    []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}}},
		{ID: 25, Name: "should deny egress from pods based on PodSelector",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				Create: static(genPolicy(nsX, "deny-egress-pod-a", *matchLabels("pod", "a"), egressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllEgress("x/a", false) }}},
			}}},
		{ID: 26, Name: "should deny egress from all pods in a namespace",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				Create: static(genPolicy(nsX, "deny-egress-ns-x", all, egressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false) }}},
			}}},
		{ID: 27, Name: "should work with Ingress, Egress specified together",
			Pods: []string{"x/a", "x/b", "x/c", "y/a"},
			Steps: []Step{{
				Create: func(View) []*networkingv1.NetworkPolicy {
					p := genPolicyMatchLabels(nsX, "allow-client-a-via-pod-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
						From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", "b")}}}))
					// add an egress rule on to it... (don't use named ports)
					p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{numPort(80, nil)}}}
					p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress, networkingv1.PolicyTypeIngress}
					return []*networkingv1.NetworkPolicy{p}
				},
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
						r.ExpectAllIngress("x/a", false)
						r.Expect("x/b", "x/a", true)
					}},
					{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) {
						r.ExpectAllIngress("x/a", false)
						r.ExpectAllEgress("x/a", false)
						r.Expect("x/b", "x/a", true)
					}},
				},
			}}},
		{ID: 28, Name: "should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)",
			Pods: []string{"x/a", "y/a", "y/b"},
			Steps: []Step{{
				Create: func(View) []*networkingv1.NetworkPolicy {
					ingressRule := networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{
						{NamespaceSelector: matchLabels(namespaceLabelKey, nsX), PodSelector: matchLabels("pod", "a")}}}
					return []*networkingv1.NetworkPolicy{
						genPolicyMatchLabels(nsX, "allow-to-ns-y-pod-a", podA, egressRules(networkingv1.NetworkPolicyEgressRule{
							To: []networkingv1.NetworkPolicyPeer{nsYPodA}})),
						genPolicyMatchLabels(nsY, "allow-from-xa-on-ya-match-selector", podA, ingressRules(ingressRule)),
						genPolicyMatchLabels(nsY, "allow-from-xa-on-yb-match-selector", map[string]string{"pod": "b"}, ingressRules(ingressRule)),
					}
				},
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectPeer(&Peer{Namespace: nsX, Pod: "a"}, &Peer{}, false)
					r.ExpectPeer(&Peer{}, &Peer{Namespace: nsY, Pod: "a"}, false)
					r.ExpectPeer(&Peer{Namespace: nsX, Pod: "a"}, &Peer{Namespace: nsY, Pod: "a"}, true)
					r.ExpectPeer(&Peer{}, &Peer{Namespace: nsY, Pod: "b"}, false)
				}}},
			}}},
		{ID: 29, Name: "should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector",
			Pods: []string{"x/a", "y/a", "y/b"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-to-ns-y-pod-a", podA, egressRules(networkingv1.NetworkPolicyEgressRule{
					To: []networkingv1.NetworkPolicyPeer{nsYPodA}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllEgress("x/a", false)
					r.Expect("x/a", "y/a", true)
				}}},
			}}},
		{ID: 30, Name: "should enforce ingress policy allowing any port traffic to a server on a specific protocol",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ingress-by-proto", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &protocolTCP}}}))),
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 80, Expect: allowAll},
					{Protocol: protocolUDP, Port: 80, Expect: func(r *Reachability) { r.ExpectPeer(&Peer{}, &Peer{Namespace: nsX, Pod: "a"}, false) }},
				},
			}}},
		{ID: 31, Name: "should enforce multiple ingress policies with ingress allow-all policy taking precedence",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By: "The policy targets port 80 -- so let's make sure traffic on port 81 is blocked",
				Create: static(genPolicyMatchLabels(nsX, "allow-ingress-port-80", map[string]string{}, ingressRules(networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{numPort(80, nil)}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: denyIngressX}},
			}, {
				By:     "Allowing all ports",
				Create: static(genPolicyMatchLabels(nsX, "allow-ingress", map[string]string{}, ingressRules(networkingv1.NetworkPolicyIngressRule{}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: allowAll}},
			}}},
		{ID: 32, Name: "should enforce multiple egress policies with egress allow-all policy taking precedence",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By: "Making sure ingress doesn't work other than port 80",
				Create: static(genPolicyMatchLabels(nsX, "allow-egress-port-80", map[string]string{}, egressRules(networkingv1.NetworkPolicyEgressRule{
					Ports: []networkingv1.NetworkPolicyPort{numPort(80, nil)}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) { r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false) }}},
			}, {
				By:     "Allowing all ports",
				Create: static(genPolicyMatchLabels(nsX, "allow-egress", map[string]string{}, egressRules(networkingv1.NetworkPolicyEgressRule{}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: allowAll}},
			}}},
		{ID: 33, Name: "should stop enforcing policies after they are deleted",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By:     "Creating a network policy for the server which denies all traffic.",
				Create: static(genPolicy(nsX, "deny-all", all, ingressRules(), egressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectPeer(&Peer{Namespace: nsX}, &Peer{}, false)
					r.ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false)
				}}},
			}, {
				By:                "Now the policy is deleted, we expect all connectivity to work again.",
				DeleteAllPolicies: true,
				Probes:            []Probe{{Protocol: protocolTCP, Port: 80, Expect: allowAll}},
			}}},
		{ID: 34, Name: "should allow egress access to server in CIDR block",
			Pods: []string{"x/a", "y/a", "y/b"},
			Steps: []Step{{
				Create: func(v View) []*networkingv1.NetworkPolicy {
					return []*networkingv1.NetworkPolicy{genPolicyMatchLabels(nsX, "allow-client-a-via-cidr-egress-rule", podA,
						egressRules(networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
							{IPBlock: &networkingv1.IPBlock{CIDR: hostCIDR(v.IP("y/b"))}}}}))}
				},
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllEgress("x/a", false)
					r.Expect("x/a", "y/b", true)
				}}},
			}}},
		{ID: 35, Name: "should enforce except clause while egress access to server in CIDR block",
			Pods: []string{"x/a", "x/b", "x/c"},
			Steps: []Step{{
				Create: cidrExcept,
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.Expect("x/a", "x/b", false) }}},
			}}},
		{ID: 36, Name: "should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed",
			Pods: []string{"x/a", "x/b", "x/c"},
			Steps: []Step{{
				Create: cidrExcept,
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.Expect("x/a", "x/b", false) }}},
			}, {
				By: "Create a second NetworkPolicy which allows access to podB (upstream updates the policy of the same name)",
				Update: func(v View) []*networkingv1.NetworkPolicy {
					return []*networkingv1.NetworkPolicy{genPolicyMatchLabels(nsX, "allow-client-a-via-cidr-egress-rule", podA,
						egressRules(networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{
							{IPBlock: &networkingv1.IPBlock{CIDR: hostCIDR(v.IP("x/b"))}}}}))}
				},
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllEgress("x/a", false)
					r.Expect("x/a", "x/b", true)
				}}},
			}}},
		{ID: 37, Name: "should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector",
			Pods: []string{"x/a", "x/b", "y/a"},
			Steps: []Step{{
				By:     "Creating a network policy for pod-a which allows Egress traffic to pod-b.",
				Create: static(genPolicy(nsX, "allow-egress-for-target", *matchLabels("pod", "a"), egressRules(networkingv1.NetworkPolicyEgressRule{}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: allowAll}},
			}, {
				By:     "Creating a network policy for pod-a that denies traffic from pod-b.",
				Create: static(genPolicy(nsX, "deny-ingress-via-label-selector", *matchLabels("pod", "a"), ingressRules())),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}}},
		{ID: 38, Name: "should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By: "Creating a default-deny ingress policy, then a network policy for the server which allows traffic only via SCTP on port 81.",
				Create: static(
					genPolicy(nsX, "deny-ingress", all, ingressRules()),
					genPolicyMatchLabels(nsX, "allow-only-sctp-ingress-on-port-81", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
						Ports: []networkingv1.NetworkPolicyPort{numPort(81, &protocolSCTP)}})),
				),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: denyIngressX}},
			}}},
		{ID: 39, Name: "should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				By: "Creating a network policy for the server which allows traffic only via SCTP on port 80.",
				Create: static(genPolicyMatchLabels(nsX, "allow-only-sctp-ingress-on-port-80", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{numPort(80, &protocolSCTP)}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}}},
		{ID: 40, Name: "should not allow access by TCP when a policy specifies only UDP",
			Pods: []string{"x/a", "y/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-only-udp-ingress-on-port-81", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{numPort(81, &protocolUDP)}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}}},
		{ID: 41, Name: "should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-client-a-via-ns-selector-for-immutable-ns-label", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchLabels(corev1.LabelMetadataName, nsY)}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: xToXa}},
			}}},
		{ID: 42, Name: "should enforce policy based on NamespaceSelector with MatchExpressions using default ns label",
			Pods: []string{"x/a", "x/b", "y/a", "z/a"},
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-match-selector-for-immutable-ns-label", podA, egressRules(networkingv1.NetworkPolicyEgressRule{
					To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchExpr(corev1.LabelMetadataName, notIn, nsY)}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectPeer(&Peer{Namespace: nsX, Pod: "a"}, &Peer{Namespace: nsY}, false)
				}}},
			}}},
	}

	// "Netpol [LinuxOnly]" / "using UDP" and "Netpol [Feature:SCTPConnectivity] [LinuxOnly]" /
	// "using SCTP": the same three cases on each protocol.
	for i, proto := range []corev1.Protocol{protocolUDP, protocolSCTP} {
		context := ctxUDP
		if proto == protocolSCTP {
			context = ctxSCTP
		}
		base := 43 + 3*i
		out = append(out,
			Case{ID: base, Context: context, Name: "should support a 'default-deny-ingress' policy",
				Pods: []string{"x/a", "x/b", "y/a", "y/b"},
				Steps: []Step{{
					Create: static(genPolicy(nsX, "deny-all", all, ingressRules())),
					Probes: []Probe{{Protocol: proto, Port: 80, Expect: denyIngressX}},
				}}},
			Case{ID: base + 1, Context: context, Name: "should enforce policy based on Ports",
				Pods: []string{"x/a", "x/b", "y/a", "z/a"},
				Steps: []Step{{
					By:     "Creating a network policy allowPort81Policy which only allows allow listed namespaces (y) to connect on exactly one port (81)",
					Create: static(allowPort81FromY(&proto, "allow-ingress-on-port-81-ns-x")),
					Probes: []Probe{{Protocol: proto, Port: 81, Expect: xToXa}},
				}}},
			Case{ID: base + 2, Context: context, Name: "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector",
				Pods: []string{"x/a", "x/b", "y/a"},
				Steps: []Step{{
					Create: static(genPolicyMatchLabels(nsX, "allow-ns-y-pod-a-via-namespace-pod-selector", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
						From: []networkingv1.NetworkPolicyPeer{nsYPodA}}))),
					Probes: []Probe{{Protocol: proto, Port: 80, Expect: onlyYaToXa}},
				}}},
		)
	}
	return append(out, beyondUpstream()...)
}
