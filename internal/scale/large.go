package scale

import (
	"fmt"
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// LargePolicySpec sizes the cluster of LargePolicy: one NetworkPolicy-tier policy of Rules
// ingress rules of Peers peers each over a cluster of Pods pods.
type LargePolicySpec struct {
	Pods, Namespaces int
	// LocalPods of the pods are on Node, all in the policy's namespace (NamespaceName(0)).
	LocalPods    int
	Rules        int
	PeersPerRule int
	Node         string
}

// LargePolicyBench is the compiler's worst realistic input: 200 rules of 50 peers each (10,000
// model rules once each peer is a rule, as the NetworkPolicy converter makes them) over 10,000
// pods in 100 namespaces, 50 of them on node-large.
func LargePolicyBench() LargePolicySpec {
	return LargePolicySpec{Pods: 10000, Namespaces: 100, LocalPods: 50, Rules: 200, PeersPerRule: 50, Node: "node-large"}
}

// LargePolicyName is the key of LargePolicy's policy.
var LargePolicyName = model.PolicyKey{Kind: "NetworkPolicy", Namespace: NamespaceName(0), Name: "large"}

// LargePolicy returns a cluster — its namespaces, pods and SyncStatusUpdate{InSync} — and one
// large policy over it. The policy selects every pod of NamespaceName(0); rule
// i allows TCP port 8000+i and the named port "http" from its peers, which cycle through three
// kinds as the NetworkPolicy converter writes them (one model rule per peer):
//
//   - a pod selector of the policy's namespace (app and tier),
//   - a namespace selector (team), with a pod selector (app) every other time,
//   - an ipBlock over the pods' addresses — a /20 of 10.0.0.0/8 or the /116 of fd00:10::/64
//     with the same host numbers — with two excepts of 64 addresses, so that blocks nest,
//     overlap and cut the address space into many intervals.
//
// Pods are Generate's pods (PodAddrs, app and tier labels, named port http), LocalPods of them on
// Node; namespaces carry Generate's team and env labels. The same spec gives the same updates.
func LargePolicy(s LargePolicySpec) ([]model.Update, model.Policy) {
	if s.Namespaces < 1 {
		s.Namespaces = 1
	}
	var ups []model.Update
	gen := Spec{Pods: s.Pods, Namespaces: s.Namespaces}
	for i := range s.Namespaces {
		name := NamespaceName(i)
		ups = append(ups, model.NamespaceSet{Namespace: model.Namespace{Name: name, Labels: map[string]string{
			"kubernetes.io/metadata.name": name,
			"team":                        fmt.Sprintf("team-%d", i%10),
			"env":                         [...]string{"prod", "staging"}[i%2],
		}}})
	}
	local := 0
	for i := range s.Pods {
		node := fmt.Sprintf("node-%04d", i%64)
		if i%s.Namespaces == 0 && local < s.LocalPods {
			node, local = s.Node, local+1
		}
		ups = append(ups, model.EndpointSet{Endpoint: pod(gen, i, node)})
	}
	p := model.Policy{Key: LargePolicyName, Tier: model.TierNetworkPolicy, Namespace: LargePolicyName.Namespace,
		Selector: "all()", ApplyIngress: true}
	for i := range s.Rules {
		ports := []model.Port{{First: uint16(8000 + i), Last: uint16(8000 + i)}, {Name: "http"}}
		for j := range s.PeersPerRule {
			var peer model.Peer
			switch k := i*s.PeersPerRule + j; k % 3 {
			case 0:
				peer.Selector = fmt.Sprintf("app == 'app-%d' && tier == '%s'", k%appsPerNamespace, tiers[k%len(tiers)])
			case 1:
				peer.NamespaceSelector = fmt.Sprintf("team == 'team-%d'", k%10)
				if k%2 == 0 {
					peer.Selector = fmt.Sprintf("app == 'app-%d'", k%appsPerNamespace)
				}
			case 2:
				// blocks of 4,096 pod addresses over the first 65,536 (a /20 of 10.0.0.0/8, or the
				// /116 of fd00:10::/64 with the same host numbers), nested in blocks of 8,192 every
				// fourth time, each without two blocks of 64; IPv4 and IPv6 alternate
				host := uint32(k%16) << 12
				bits := 20
				if k%4 == 0 {
					bits = 19
				}
				is4 := (k/3)%2 == 0
				block := func(host uint32, bits int) netip.Prefix {
					if is4 {
						return netip.PrefixFrom(addr4(10<<24|host), bits).Masked()
					}
					return netip.PrefixFrom(PodAddrs(int(host) - 1)[1], 96+bits).Masked()
				}
				peer.Nets = []netip.Prefix{block(host, bits)}
				for e := range 2 {
					off := uint32((k/3+e*7)%64) << 6
					peer.NotNets = append(peer.NotNets, block(host|off, 26))
				}
			}
			r := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: peer}
			r.Destination.Ports = ports
			p.IngressRules = append(p.IngressRules, r)
		}
	}
	ups = append(ups, model.SyncStatusUpdate{Status: model.InSync})
	return ups, p
}

func addr4(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
