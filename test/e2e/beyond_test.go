package e2e

// Cases that are not upstream It's but cover what the upstream suite leaves out: endPort
// ranges, ingress ipBlock with except, several ports and protocols in one rule, and labels
// changed so that a peer stops matching. Same model, same style; IDs from 101.

import (
	networkingv1 "k8s.io/api/networking/v1"
)

func beyondUpstream() []Case {
	nsX, nsY := "x", "y"
	all9 := modelPods()
	podA := map[string]string{"pod": "a"}
	denyIngressX := func(r *Reachability) { r.ExpectPeer(&Peer{}, &Peer{Namespace: nsX}, false) }
	return []Case{
		{ID: 101, Context: ctxBeyond, Name: "should allow ingress on a port range (endPort) of one protocol",
			Pods: all9,
			Steps: []Step{{
				Create: static(genPolicy(nsX, "allow-81-82-tcp", *matchLabels(), ingressRules(networkingv1.NetworkPolicyIngressRule{
					Ports: []networkingv1.NetworkPolicyPort{rangePort(81, 82, &protocolTCP)}}))),
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 80, Expect: denyIngressX},
					{Protocol: protocolTCP, Port: 81, Expect: allowAll},
					{Protocol: protocolUDP, Port: 81, Expect: denyIngressX},
				},
			}}},
		{ID: 102, Context: ctxBeyond, Name: "should enforce except clause while ingress access from CIDR block",
			Pods: all9,
			Steps: []Step{{
				Create: func(v View) []*networkingv1.NetworkPolicy {
					ya := v.IP("y/a")
					return []*networkingv1.NetworkPolicy{genPolicyMatchLabels(nsX, "allow-cidr-except-y-a", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
						From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: largeCIDR(ya), Except: []string{hostCIDR(ya)}}}}}))}
				},
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.Expect("y/a", "x/a", false) }}},
			}}},
		{ID: 103, Context: ctxBeyond, Name: "should allow several ports on different protocols in one egress rule",
			Pods: all9,
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-egress-80-tcp-81-udp", podA, egressRules(networkingv1.NetworkPolicyEgressRule{
					Ports: []networkingv1.NetworkPolicyPort{numPort(80, &protocolTCP), numPort(81, &protocolUDP)}}))),
				Probes: []Probe{
					{Protocol: protocolTCP, Port: 80, Expect: allowAll},
					{Protocol: protocolTCP, Port: 81, Expect: func(r *Reachability) { r.ExpectAllEgress("x/a", false) }},
					{Protocol: protocolUDP, Port: 81, Expect: allowAll},
					{Protocol: protocolUDP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllEgress("x/a", false) }},
				},
			}}},
		{ID: 104, Context: ctxBeyond, Name: "should deny ingress from a pod relabelled out of the peer selector",
			Pods: all9,
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "x-a-allows-x-b", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{PodSelector: matchLabels("pod", "b")}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.Expect("x/b", "x/a", true)
				}}},
			}, {
				PodLabels: map[string]map[string]string{"x/b": {"pod": "b-renamed"}},
				Probes:    []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}}},
		{ID: 105, Context: ctxBeyond, Name: "should deny ingress from a namespace relabelled out of the namespace selector",
			Pods: all9,
			Steps: []Step{{
				Create: static(genPolicyMatchLabels(nsX, "allow-from-ns-label-y", podA, ingressRules(networkingv1.NetworkPolicyIngressRule{
					From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: matchLabels("ns", nsY)}}}))),
				Probes: []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) {
					r.ExpectAllIngress("x/a", false)
					r.ExpectPeer(&Peer{Namespace: nsY}, &Peer{Namespace: nsX, Pod: "a"}, true)
				}}},
			}, {
				NamespaceLabels: map[string]map[string]string{nsY: {"ns": "y-renamed"}},
				Probes:          []Probe{{Protocol: protocolTCP, Port: 80, Expect: func(r *Reachability) { r.ExpectAllIngress("x/a", false) }}},
			}}},
	}
}
