package e2e

// The Calico cases: each a set of manifests (Tier, GlobalNetworkPolicy, NetworkPolicy of
// projectcalico.org/v3, GlobalNetworkSet, NetworkSet, and for the case of the three APIs
// Kubernetes NetworkPolicies and ClusterNetworkPolicies) as a user writes them, applied to the
// 9-pod model (calicoWorld: namespaces x, y, z labelled ns=<name>; pods a, b, c labelled
// pod=<name>, running as service account sa-<name>, serving TCP and UDP 80 and 81 and TCP
// 6379; x/a role=database, the b pods role=frontend; sa-c labelled role=trusted), and the
// reachability Calico gives them, written the upstream way: the 9×9 matrices of some ports
// and, for what a matrix cannot show (pings, fixed source ports), single pokes.
//
// A pod that no policy of a tier selects skips the tier; one that some policy of a tier
// selects gets the tier's default action (Deny unless the Tier says Pass) when none of them
// decides; a pod no tier decides for is allowed. Calico puts the automatic label
// projectcalico.org/namespace on every pod, so a GlobalNetworkPolicy can pick a pod as
// "pod == 'a' && projectcalico.org/namespace == 'x'". The manifests quote the name y, which
// YAML 1.1 (the API machinery's YAML) reads as a boolean.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// calicoCase is one case: manifests (a text/template: cidr "ns/pod", icmp and echo, see
// calicoManifests), then the matrices and the pokes expected once they are enforced.
type calicoCase struct {
	Name      string
	Manifests string
	Matrices  []calicoMatrix
	Pokes     []calicoPoke
}

// calicoMatrix is the 9×9 matrix of one protocol and port: every pair connects but what
// Expect changes.
type calicoMatrix struct {
	Proto  corev1.Protocol
	Port   int32
	Expect func(r *Reachability)
}

// calicoPoke is one flow between two pods: a ping (echo request, code 0), or a TCP or UDP
// probe of Port, from source port SrcPort when set.
type calicoPoke struct {
	From, To string
	Ping     bool
	Proto    corev1.Protocol
	Port     int32
	SrcPort  uint16
	Connect  bool
}

func (p calicoPoke) String() string {
	switch {
	case p.Ping:
		return fmt.Sprintf("ping %s -> %s", p.From, p.To)
	case p.SrcPort != 0:
		return fmt.Sprintf("%s:%d -> %s %s/%d", p.From, p.SrcPort, p.To, p.Proto, p.Port)
	}
	return fmt.Sprintf("%s -> %s %s/%d", p.From, p.To, p.Proto, p.Port)
}

// onlyFrom expects pod to to be reached from the pods froms and from no other.
func onlyFrom(r *Reachability, to string, froms ...string) {
	r.ExpectAllIngress(to, false)
	for _, f := range froms {
		r.Expect(f, to, true)
	}
}

// fromPodsNamed are the pods named name in every namespace.
func fromPodsNamed(name string) []string { return []string{"x/" + name, "y/" + name, "z/" + name} }

func tcp(port int32, expect func(r *Reachability)) calicoMatrix {
	return calicoMatrix{Proto: protocolTCP, Port: port, Expect: expect}
}

func calicoCases() []calicoCase {
	return []calicoCase{
		{
			Name: "tier with a Deny default",
			// x/a is selected in tier security, whose one rule denies the c pods: the rest
			// meets the tier's default, Deny.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: security
spec:
  order: 100
  defaultAction: Deny
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: security.x-a
spec:
  tier: security
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Deny
    source:
      selector: pod == 'c'
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) { r.ExpectAllIngress("x/a", false) })},
		},
		{
			Name: "tiers with Pass and Deny defaults, one without order",
			// Tier early (order 100, Pass) denies the c pods to x/a and passes the rest on;
			// tier late (no order: after every ordered tier, Deny) allows namespace y's pods.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: late
spec:
  defaultAction: Deny
---
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: early
spec:
  order: 100
  defaultAction: Pass
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: early.x-a
spec:
  tier: early
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Deny
    source:
      selector: pod == 'c'
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: late.x-a
spec:
  tier: late
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: projectcalico.org/namespace == 'y'
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) { onlyFrom(r, "x/a", "y/a", "y/b") })},
		},
		{
			Name: "Pass rule to the default tier",
			// Tier security (Deny default) passes the b pods on to the default tier, where a
			// namespaced policy allows namespace z's pods: of the b pods z/b only.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: security
spec:
  order: 100
  defaultAction: Deny
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: security.x-a
spec:
  tier: security
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Pass
    source:
      selector: pod == 'b'
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: a-from-z
  namespace: x
spec:
  selector: pod == 'a'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      namespaceSelector: ns == 'z'
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) { onlyFrom(r, "x/a", "z/b") })},
		},
		{
			Name: "order ties by name, unset order last",
			// allow-b and deny-b have the same order: allow-b comes first by name. deny-c
			// (order 900) comes before allow-c (no order). The a pods meet the default tier's
			// Deny.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: deny-b
spec:
  order: 10
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Deny
    source:
      selector: pod == 'b'
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: allow-b
spec:
  order: 10
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: pod == 'b'
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: allow-c
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: pod == 'c'
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: deny-c
spec:
  order: 900
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Deny
    source:
      selector: pod == 'c'
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) { onlyFrom(r, "x/a", fromPodsNamed("b")...) })},
		},
		{
			Name: "Log rules change no verdict",
			// Tier audit (Pass) logs every pod's traffic both ways and decides nothing; in the
			// default tier a Log rule before an Allow rule leaves x/a reached by the b pods only.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: audit
spec:
  order: 50
  defaultAction: Pass
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: audit.log-all
spec:
  tier: audit
  selector: all()
  types: [Ingress, Egress]
  ingress:
  - action: Log
  egress:
  - action: Log
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: x-a
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Log
  - action: Allow
    source:
      selector: pod == 'b'
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) { onlyFrom(r, "x/a", fromPodsNamed("b")...) })},
		},
		{
			Name: "GlobalNetworkSet and NetworkSet peers",
			// The GlobalNetworkSet blocked covers y/b and z/c: namespace x denies it. Namespace
			// y's policy allows its own NetworkSet trusted (x/c), not namespace z's (x/b).
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkSet
metadata:
  name: blocked
  labels:
    role: blocked
spec:
  nets:
  - {{cidr "y/b"}}
  - {{cidr "z/c"}}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: x-deny-blocked
spec:
  selector: projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Deny
    source:
      selector: role == 'blocked'
  - action: Allow
---
apiVersion: projectcalico.org/v3
kind: NetworkSet
metadata:
  name: trusted
  namespace: "y"
  labels:
    role: trusted
spec:
  nets:
  - {{cidr "x/c"}}
---
apiVersion: projectcalico.org/v3
kind: NetworkSet
metadata:
  name: trusted
  namespace: z
  labels:
    role: trusted
spec:
  nets:
  - {{cidr "x/b"}}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: a-from-trusted
  namespace: "y"
spec:
  selector: pod == 'a'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: role == 'trusted'
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				for _, to := range []string{"x/a", "x/b", "x/c"} {
					r.Expect("y/b", to, false)
					r.Expect("z/c", to, false)
				}
				onlyFrom(r, "y/a", "x/c")
			})},
		},
		{
			Name: "notNets, notPorts, notSelector, egress nets",
			// x/a: any source but z/a and z/b. y/b: TCP to any port but 81. z/c: pods with a
			// pod label but the c pods. z/a's egress: not to y/a.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: x-a
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      notNets:
      - {{cidr "z/a"}}
      - {{cidr "z/b"}}
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: b-not-81
  namespace: "y"
spec:
  selector: pod == 'b'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: TCP
    destination:
      notPorts: [81]
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: z-c
spec:
  selector: pod == 'c' && projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: has(pod)
      notSelector: pod == 'c'
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: z-a-egress
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'z'
  types: [Egress]
  egress:
  - action: Deny
    destination:
      nets: [{{cidr "y/a"}}]
  - action: Allow
`,
			Matrices: []calicoMatrix{
				tcp(80, func(r *Reachability) {
					r.Expect("z/a", "x/a", false)
					r.Expect("z/b", "x/a", false)
					r.Expect("x/c", "z/c", false)
					r.Expect("y/c", "z/c", false)
					r.Expect("z/a", "y/a", false)
				}),
				tcp(81, func(r *Reachability) {
					r.Expect("z/a", "x/a", false)
					r.Expect("z/b", "x/a", false)
					r.Expect("x/c", "z/c", false)
					r.Expect("y/c", "z/c", false)
					r.Expect("z/a", "y/a", false)
					r.ExpectAllIngress("y/b", false)
				}),
			},
		},
		{
			Name: "namespaceSelector: global() and a policy's namespaceSelector",
			// x/c allows the GlobalNetworkSets labelled role=friend (y/c), not namespace x's
			// NetworkSet of that label (z/c). The GlobalNetworkPolicy applies to namespace z's
			// pods and denies namespace y's.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkSet
metadata:
  name: friends
  labels:
    role: friend
spec:
  nets: [{{cidr "y/c"}}]
---
apiVersion: projectcalico.org/v3
kind: NetworkSet
metadata:
  name: friends
  namespace: x
  labels:
    role: friend
spec:
  nets: [{{cidr "z/c"}}]
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: c-from-global-friends
  namespace: x
spec:
  selector: pod == 'c'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      namespaceSelector: global()
      selector: role == 'friend'
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: z-not-from-y
spec:
  namespaceSelector: ns == 'z'
  selector: all()
  types: [Ingress]
  ingress:
  - action: Deny
    source:
      namespaceSelector: ns == 'y'
  - action: Allow
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				onlyFrom(r, "x/c", "y/c")
				r.ExpectPeer(&Peer{Namespace: "y"}, &Peer{Namespace: "z"}, false)
			})},
		},
		{
			Name: "serviceAccounts by names and by selector",
			// x/a: from pods running as sa-b, any namespace. y/a: from those whose service
			// account is labelled role=trusted (sa-c). z/a, a namespaced policy: sa-b of z.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: x-a-from-sa-b
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      serviceAccounts:
        names: [sa-b]
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: y-a-from-trusted
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'y'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      serviceAccounts:
        selector: role == 'trusted'
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: a-from-sa-b
  namespace: z
spec:
  selector: pod == 'a'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      serviceAccounts:
        names: [sa-b]
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				onlyFrom(r, "x/a", fromPodsNamed("b")...)
				onlyFrom(r, "y/a", fromPodsNamed("c")...)
				onlyFrom(r, "z/a", "z/b")
			})},
		},
		{
			Name: "a policy's serviceAccountSelector",
			// The GlobalNetworkPolicy applies to the pods running as a service account labelled
			// role=trusted (the c pods, sa-c): they take ingress from the a pods only. The
			// NetworkPolicy's selector picks x/a and x/b, its serviceAccountSelector only those
			// running as sa-b: x/b takes nothing, x/a is not under it.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: trusted-from-a
spec:
  serviceAccountSelector: role == 'trusted'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: pod == 'a'
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: sa-b-isolated
  namespace: x
spec:
  selector: pod in {'a', 'b'}
  serviceAccountSelector: projectcalico.org/name == 'sa-b'
  types: [Ingress]
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				for _, c := range fromPodsNamed("c") {
					onlyFrom(r, c, fromPodsNamed("a")...)
				}
				r.ExpectAllIngress("x/b", false)
			})},
		},
		{
			Name: "named ports",
			// x/b takes TCP on its port named serve-81-tcp only.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: b-81-by-name
  namespace: x
spec:
  selector: pod == 'b'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: TCP
    destination:
      ports: [serve-81-tcp]
`,
			Matrices: []calicoMatrix{
				tcp(80, func(r *Reachability) { r.ExpectAllIngress("x/b", false) }),
				tcp(81, func(r *Reachability) {}),
			},
		},
		{
			Name: "source ports",
			// z/a takes TCP from source port 4242 only.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: z-a-from-4242
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: TCP
    source:
      ports: [4242]
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) { r.ExpectAllIngress("z/a", false) })},
			Pokes: []calicoPoke{
				{From: "x/b", To: "z/a", Proto: protocolTCP, Port: 80, SrcPort: 4242, Connect: true},
				{From: "z/b", To: "z/a", Proto: protocolTCP, Port: 81, SrcPort: 4242, Connect: true},
				{From: "x/b", To: "z/a", Proto: protocolTCP, Port: 80, SrcPort: 4243, Connect: false},
				{From: "x/b", To: "z/b", Proto: protocolTCP, Port: 80, SrcPort: 4243, Connect: true},
			},
		},
		{
			Name: "ICMP type and code",
			// x/a takes echo requests; y/a only those of code 1 (a ping's are code 0); z/a
			// every ICMP but echo requests. None of them takes TCP.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: x-a-ping
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: {{icmp}}
    icmp:
      type: {{echo}}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: y-a-code-1
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'y'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: {{icmp}}
    icmp:
      type: {{echo}}
      code: 1
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: z-a-not-echo
spec:
  selector: pod == 'a' && projectcalico.org/namespace == 'z'
  types: [Ingress]
  ingress:
  - action: Allow
    protocol: {{icmp}}
    notICMP:
      type: {{echo}}
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				for _, to := range fromPodsNamed("a") {
					r.ExpectAllIngress(to, false)
				}
			})},
			Pokes: []calicoPoke{
				{From: "y/b", To: "x/a", Ping: true, Connect: true},
				{From: "x/c", To: "x/a", Ping: true, Connect: true},
				{From: "x/b", To: "y/a", Ping: true, Connect: false},
				{From: "x/b", To: "z/a", Ping: true, Connect: false},
				{From: "x/b", To: "z/b", Ping: true, Connect: true},
			},
		},
		{
			Name: "a Calico tier before the NetworkPolicies, ClusterNetworkPolicies around them",
			// Ingress of namespace x: tier security (order 100, before Admin) allows y/c and
			// denies z/a; Admin denies namespace y; in the default tier a Calico policy of
			// order 500 allows x/b to x/a before the NetworkPolicy (order 1000), which allows
			// namespace z. Namespace y: no NetworkPolicy, Baseline denies namespace z.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: security
spec:
  order: 100
  defaultAction: Pass
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: security.x-ingress
spec:
  tier: security
  selector: projectcalico.org/namespace == 'x'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: pod == 'c' && projectcalico.org/namespace == 'y'
  - action: Deny
    source:
      selector: pod == 'a' && projectcalico.org/namespace == 'z'
---
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: x-deny-y
spec:
  tier: Admin
  priority: 5
  subject:
    namespaces:
      matchLabels:
        ns: x
  ingress:
  - name: deny-y
    action: Deny
    from:
    - namespaces:
        matchLabels:
          ns: "y"
---
apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata:
  name: a-from-b
  namespace: x
spec:
  order: 500
  selector: pod == 'a'
  types: [Ingress]
  ingress:
  - action: Allow
    source:
      selector: pod == 'b'
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: allow-from-z
  namespace: x
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          ns: z
---
apiVersion: policy.networking.k8s.io/v1beta1
kind: ClusterNetworkPolicy
metadata:
  name: y-deny-z
spec:
  tier: Baseline
  priority: 5
  subject:
    namespaces:
      matchLabels:
        ns: "y"
  ingress:
  - name: deny-z
    action: Deny
    from:
    - namespaces:
        matchLabels:
          ns: z
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				for _, to := range []string{"x/a", "x/b", "x/c"} {
					onlyFrom(r, to, "y/c", "z/b", "z/c")
				}
				r.Expect("x/b", "x/a", true)
				r.ExpectPeer(&Peer{Namespace: "z"}, &Peer{Namespace: "y"}, false)
			})},
		},
		// Calico's documentation samples, applied unchanged.
		{
			Name: "docs: Get started with Calico network policy, allow-ping-in-cluster",
			// Every pod takes pings from every pod, and nothing else: the policy applies to
			// all pods in the default tier, whose default is Deny.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: allow-ping-in-cluster
spec:
  selector: all()
  types:
    - Ingress
  ingress:
    - action: Allow
      protocol: ICMP
      source:
        selector: all()
      icmp:
        type: 8 # Ping request
    - action: Allow
      protocol: ICMPv6
      source:
        selector: all()
      icmp:
        type: 128 # Ping request
`,
			Matrices: []calicoMatrix{tcp(80, func(r *Reachability) {
				r.ExpectPeer(&Peer{}, &Peer{}, false)
			})},
			Pokes: []calicoPoke{
				{From: "x/a", To: "y/b", Ping: true, Connect: true},
				{From: "z/c", To: "x/a", Ping: true, Connect: true},
			},
		},
		{
			Name: "docs: Global network policy, allow-tcp-6379",
			// Database pods (x/a) take TCP 6379 from frontend pods (the b pods) only, and no
			// other ingress; their egress is allowed.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: allow-tcp-6379
spec:
  selector: role == 'database'
  types:
    - Ingress
    - Egress
  ingress:
    - action: Allow
      metadata:
        annotations:
          from: frontend
          to: database
      protocol: TCP
      source:
        selector: role == 'frontend'
      destination:
        ports:
          - 6379
  egress:
    - action: Allow
`,
			Matrices: []calicoMatrix{
				tcp(6379, func(r *Reachability) { onlyFrom(r, "x/a", fromPodsNamed("b")...) }),
				tcp(80, func(r *Reachability) { r.ExpectAllIngress("x/a", false) }),
			},
		},
		{
			Name: "docs: Tier, internal-access",
			// The Tier page's tier (order 100, Deny) and its policy: database pods take TCP
			// 6379 from frontend pods only.
			Manifests: `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: internal-access
spec:
  order: 100
  defaultAction: Deny
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: internal-access.allow-tcp-6379
spec:
  tier: internal-access
  selector: role == 'database'
  types:
    - Ingress
    - Egress
  ingress:
    - action: Allow
      metadata:
        annotations:
          from: frontend
          to: database
      protocol: TCP
      source:
        selector: role == 'frontend'
      destination:
        ports:
          - 6379
  egress:
    - action: Allow
`,
			Matrices: []calicoMatrix{
				tcp(6379, func(r *Reachability) { onlyFrom(r, "x/a", fromPodsNamed("b")...) }),
				tcp(80, func(r *Reachability) { r.ExpectAllIngress("x/a", false) }),
			},
		},
	}
}
