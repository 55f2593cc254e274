package scale

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Spec sizes a synthetic cluster.
type Spec struct {
	// Pods is the number of pods in the cluster, LocalPods of them on Node and the rest spread
	// over other nodes of LocalPods pods each.
	Pods       int
	Namespaces int
	// Policies is the number of NetworkPolicies, spread round-robin over the namespaces.
	Policies  int
	LocalPods int
	// Node is the node whose agent is measured ("node-local" when empty).
	Node string
	Seed int64
}

// ColdStart is the cluster of the cold-start benchmarks (test/bench's BenchmarkColdStart and
// BenchmarkColdStartAPI, the graph's BenchmarkHeapAtScale): 100,000 pods in 1,000 namespaces,
// 5,000 policies, 250 pods on "node-bench".
func ColdStart() Spec {
	return Spec{Pods: 100000, Namespaces: 1000, Policies: 5000, LocalPods: 250, Node: "node-bench", Seed: 1}
}

// Shapes of the generated policies, in the order Generate cycles through them.
const (
	ShapeDefaultDeny = iota
	ShapeAllowFromNamespace
	ShapeAllowFromPods
	ShapeNamedPort
	ShapeIPBlockExcept
	ShapeEgressCIDR
	numShapes
)

// appsPerNamespace is how many distinct "app" labels the pods of a namespace carry.
const appsPerNamespace = 8

var tiers = [...]string{"frontend", "backend", "db"}

// NamespaceName is the name of the i-th generated namespace.
func NamespaceName(i int) string { return fmt.Sprintf("ns-%04d", i) }

// PodAddrs returns the addresses Generate gives pod i: 10.0.0.0/8 counted from 10.0.0.1, and
// fd00:10::/64 with the same host number.
func PodAddrs(i int) []netip.Addr {
	n := uint32(i + 1)
	v4 := netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
	v6 := netip.AddrFrom16([16]byte{0: 0xfd, 2: 0x00, 3: 0x10, 12: byte(n >> 24), 13: byte(n >> 16), 14: byte(n >> 8), 15: byte(n)})
	return []netip.Addr{v4, v6}
}

// Pod returns the endpoint Generate emits for pod i of spec (node placement needs the whole
// spec's permutation, so it is passed in).
func pod(s Spec, i int, node string) model.Endpoint {
	app := (i / s.Namespaces) % appsPerNamespace
	e := model.Endpoint{
		Key:  model.EndpointKey{Namespace: NamespaceName(i % s.Namespaces), Name: fmt.Sprintf("pod-%06d", i)},
		Node: node,
		Labels: model.LabelsOf(map[string]string{
			"app":               fmt.Sprintf("app-%d", app),
			"tier":              tiers[i%len(tiers)],
			"pod-template-hash": fmt.Sprintf("h%04x", (i*2654435761)&0xffff),
		}),
		ServiceAccount: "default",
		Addrs:          PodAddrs(i),
		NamedPorts:     []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}},
	}
	if app%2 == 0 {
		e.NamedPorts = append(e.NamedPorts, model.NamedPort{Name: "metrics", Protocol: model.ProtocolTCP, Port: 9090})
	}
	return e
}

// Generate returns the updates of a synthetic cluster: namespaces, pods, policies, then
// SyncStatusUpdate{InSync}. The same Spec always gives the same updates.
func Generate(s Spec) []model.Update {
	ups := make([]model.Update, 0, max(s.Namespaces, 1)+s.Pods+s.Policies+1)
	for u := range Updates(s) {
		ups = append(ups, u)
	}
	return ups
}

// Updates yields Generate's updates one by one without holding them all, for measuring the
// memory of what consumes them.
func Updates(s Spec) iter.Seq[model.Update] {
	return func(yield func(model.Update) bool) {
		s = s.withDefaults()
		rng := rand.New(rand.NewPCG(uint64(s.Seed), 0x5ca1ab1e))
		nodeOf := placement(s, rng)
		for i := range s.Namespaces {
			name := NamespaceName(i)
			if !yield(model.NamespaceSet{Namespace: model.Namespace{Name: name, Labels: map[string]string{
				"kubernetes.io/metadata.name": name,
				"team":                        fmt.Sprintf("team-%d", i%10),
				"env":                         [...]string{"prod", "staging"}[i%2],
			}}}) {
				return
			}
		}
		for i := range s.Pods {
			if !yield(model.EndpointSet{Endpoint: pod(s, i, nodeName(s, nodeOf[i]))}) {
				return
			}
		}
		for j := range s.Policies {
			if !yield(model.PolicySet{Policy: policy(s, j, rng)}) {
				return
			}
		}
		yield(model.SyncStatusUpdate{Status: model.InSync})
	}
}

// withDefaults is s with at least one namespace and its node named.
func (s Spec) withDefaults() Spec {
	s.Namespaces = max(s.Namespaces, 1)
	if s.Node == "" {
		s.Node = "node-local"
	}
	return s
}

// placement returns the node of each pod of s (its index in the result): -1 for s.Node, n ≥ 1
// for node-<n>. Position in a permutation drawn from rng decides: the first LocalPods positions
// are on s.Node, the next LocalPods on node-0001, and so on. s has Updates' defaults applied.
func placement(s Spec, rng *rand.Rand) []int32 {
	local := min(max(s.LocalPods, 0), s.Pods)
	perNode := max(local, 1)
	nodeOf := make([]int32, s.Pods)
	for pos, i := range rng.Perm(s.Pods) {
		if pos < local {
			nodeOf[i] = -1
		} else {
			nodeOf[i] = int32((pos-local)/perNode + 1)
		}
	}
	return nodeOf
}

// nodeName is the name of placement's node n.
func nodeName(s Spec, n int32) string {
	if n < 0 {
		return s.Node
	}
	return fmt.Sprintf("node-%04d", n)
}

// policy returns the j-th policy: namespace j mod Namespaces, shape j mod numShapes.
func policy(s Spec, j int, rng *rand.Rand) model.Policy {
	nsIdx := j % s.Namespaces
	ns := NamespaceName(nsIdx)
	q := j / s.Namespaces // index within the namespace
	shape := j % numShapes
	// The applied-to selector: an app of the namespace; past appsPerNamespace policies also a
	// tier, so selectors within a namespace stay distinct.
	sel := fmt.Sprintf("app == 'app-%d'", q%appsPerNamespace)
	if q >= appsPerNamespace {
		sel += fmt.Sprintf(" && tier == '%s'", tiers[(q/appsPerNamespace)%len(tiers)])
	}
	p := model.Policy{
		Key:          model.PolicyKey{Kind: "NetworkPolicy", Namespace: ns, Name: fmt.Sprintf("np-%d-%s", q, shapeNames[shape])},
		Tier:         model.TierNetworkPolicy,
		Namespace:    ns,
		Selector:     sel,
		ApplyIngress: true,
	}
	tcp := func(first, last uint16) []model.Port { return []model.Port{{First: first, Last: last}} }
	switch shape {
	case ShapeDefaultDeny:
		p.Selector = "all()"
		p.ApplyEgress = q%2 == 1 // every other one denies egress too
	case ShapeAllowFromNamespace:
		p.IngressRules = []model.Rule{{
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source:      model.Peer{NamespaceSelector: fmt.Sprintf("team == 'team-%d'", rng.IntN(10))},
			Destination: model.Peer{Ports: tcp(8080, 8080)},
		}}
	case ShapeAllowFromPods:
		p.IngressRules = []model.Rule{{
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source: model.Peer{Selector: fmt.Sprintf("app == 'app-%d' && tier == '%s'",
				rng.IntN(appsPerNamespace), tiers[rng.IntN(len(tiers))])},
			Destination: model.Peer{Ports: tcp(80, 80)},
		}, {
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source: model.Peer{Selector: fmt.Sprintf("app == 'app-%d'", rng.IntN(appsPerNamespace)),
				NamespaceSelector: fmt.Sprintf("env == '%s'", [...]string{"prod", "staging"}[rng.IntN(2)])},
			Destination: model.Peer{Ports: tcp(8000, 8100)},
		}}
	case ShapeNamedPort:
		p.IngressRules = []model.Rule{{
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source:      model.Peer{Selector: fmt.Sprintf("tier == '%s'", tiers[rng.IntN(len(tiers))])},
			Destination: model.Peer{Ports: []model.Port{{Name: "http"}}},
		}, {
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source:      model.Peer{NamespaceSelector: "kubernetes.io/metadata.name == 'monitoring'"},
			Destination: model.Peer{Ports: []model.Port{{Name: "metrics"}}},
		}}
	case ShapeIPBlockExcept:
		b := byte(rng.IntN(256))
		p.IngressRules = []model.Rule{{
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source: model.Peer{
				Nets:    []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16 + b%16, 0, 0}), 16)},
				NotNets: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16 + b%16, b, 0}), 24)},
			},
			Destination: model.Peer{Ports: tcp(443, 443)},
		}}
	case ShapeEgressCIDR:
		p.ApplyIngress = false
		p.ApplyEgress = true
		p.EgressRules = []model.Rule{{
			Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{
				Nets:  []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(rng.IntN(256)), 0}), 24)},
				Ports: tcp(5432, 5432),
			},
		}, {
			Action: model.ActionAllow, Protocol: model.ProtocolUDP,
			Destination: model.Peer{
				Selector:          "k8s-app == 'kube-dns'",
				NamespaceSelector: "kubernetes.io/metadata.name == 'kube-system'",
				Ports:             tcp(53, 53),
			},
		}}
	}
	return p
}

var shapeNames = [numShapes]string{"default-deny", "from-namespace", "from-pods", "named-port", "ipblock", "egress-cidr"}
