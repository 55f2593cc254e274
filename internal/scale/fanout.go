package scale

import (
	"fmt"
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// FanoutNamespace is the namespace of a Fanout's pods and policies.
const FanoutNamespace = "fanout"

// Fanout is the incremental benchmark's cluster: Selectors policies, policy k selecting local
// pod k mod LocalPods and allowing TCP 80 from the pods of selector "g<k> == 'in'"; each such
// selector has Members members drawn evenly from a pool of Pods remote pods (so pods are in
// Selectors·Members/Pods selectors on average), and Spares remote pods are in none: they are the
// ones that join and leave a selector. Pods are IPv4-only, so one pod joining one selector is
// exactly one new element in one decision structure of the dataplane.
//
// With Cluster, the policies are shaped as converted ClusterNetworkPolicies instead (see
// ClusterAction): cluster-wide, the admin tier for even k and the baseline tier for odd k,
// Order k mod 1001 (priorities 0–1000, many equal), subject a pod selector in the namespace
// FanoutNamespace (by namespace selector), the rule's action by k mod 3, from selector
// "g<k> == 'in'" in every namespace, TCP 80.
type Fanout struct {
	Selectors, Members, Pods, Spares, LocalPods int
	Node                                        string
	Cluster                                     bool
}

// ClusterAction is the action of policy k's rule when Fanout.Cluster: Allow, Deny, Pass in turn.
func ClusterAction(k int) model.Action {
	return []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass}[k%3]
}

// Updates returns the namespace, local pods, pool pods, spares, policies and InSync.
func (f Fanout) Updates() []model.Update {
	ups := []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: FanoutNamespace,
		Labels: map[string]string{"kubernetes.io/metadata.name": FanoutNamespace}}}}
	for j := range f.LocalPods {
		ups = append(ups, model.EndpointSet{Endpoint: model.Endpoint{
			Key:    model.EndpointKey{Namespace: FanoutNamespace, Name: fmt.Sprintf("local-%04d", j)},
			Node:   f.Node,
			Labels: model.LabelsOf(map[string]string{"srv": fmt.Sprintf("s%d", j)}),
			Addrs:  []netip.Addr{netip.AddrFrom4([4]byte{10, 99, byte(j >> 8), byte(j)})},
		}})
	}
	groups := make([]map[string]string, f.Pods)
	for i := range groups {
		groups[i] = map[string]string{"pool": "yes"}
	}
	stride := max(f.Pods/max(f.Members, 1), 1)
	for k := range f.Selectors {
		for m := range min(f.Members, f.Pods) {
			groups[(k*7+m*stride)%f.Pods][fmt.Sprintf("g%d", k)] = "in"
		}
	}
	for i := range f.Pods {
		ups = append(ups, model.EndpointSet{Endpoint: f.remote(i, groups[i])})
	}
	for s := range f.Spares {
		ups = append(ups, model.EndpointSet{Endpoint: f.remote(f.Pods+s, map[string]string{"pool": "spare"})})
	}
	for k := range f.Selectors {
		if f.Cluster {
			ups = append(ups, model.PolicySet{Policy: f.clusterPolicy(k)})
			continue
		}
		ups = append(ups, model.PolicySet{Policy: model.Policy{
			Key:       model.PolicyKey{Kind: "NetworkPolicy", Namespace: FanoutNamespace, Name: fmt.Sprintf("allow-g%d", k)},
			Tier:      model.TierNetworkPolicy,
			Namespace: FanoutNamespace, Selector: fmt.Sprintf("srv == 's%d'", k%max(f.LocalPods, 1)),
			ApplyIngress: true,
			IngressRules: []model.Rule{{
				Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Source:      model.Peer{Selector: fmt.Sprintf("g%d == 'in'", k)},
				Destination: model.Peer{Ports: []model.Port{{First: 80, Last: 80}}},
			}},
		}})
	}
	return append(ups, model.SyncStatusUpdate{Status: model.InSync})
}

// clusterPolicy is policy k shaped as a converted ClusterNetworkPolicy (see Fanout).
func (f Fanout) clusterPolicy(k int) model.Policy {
	tier, tierName := model.TierAdmin, "admin"
	if k%2 == 1 {
		tier, tierName = model.TierBaseline, "baseline"
	}
	p := model.Policy{
		Key:  model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: fmt.Sprintf("cnp-g%d", k)},
		Tier: tier, Order: float64(k % 1001),
		Selector: fmt.Sprintf("srv == 's%d'", k%max(f.LocalPods, 1)), NamespaceSelector: "kubernetes.io/metadata.name == '" + FanoutNamespace + "'",
		ApplyIngress: true,
		IngressRules: []model.Rule{{
			Action: ClusterAction(k), Protocol: model.ProtocolTCP,
			Source:      model.Peer{Selector: fmt.Sprintf("g%d == 'in'", k), NamespaceSelector: "all()"},
			Destination: model.Peer{Ports: []model.Port{{First: 80, Last: 80}}},
			Label:       fmt.Sprintf("%s priority %d ingress rule 0", tierName, k%1001),
		}},
	}
	return p
}

// remote is pool pod i (spares follow the pool): 10.100.0.0/16 from 10.100.0.1.
func (f Fanout) remote(i int, labels map[string]string) model.Endpoint {
	return model.Endpoint{
		Key:    model.EndpointKey{Namespace: FanoutNamespace, Name: fmt.Sprintf("pod-%06d", i)},
		Node:   "node-remote",
		Labels: model.LabelsOf(labels),
		Addrs:  []netip.Addr{f.SpareAddr(i - f.Pods)},
	}
}

// SpareAddr is the address of spare s (negative s: pool pod Pods+s).
func (f Fanout) SpareAddr(s int) netip.Addr {
	n := uint32(f.Pods + s + 1)
	return netip.AddrFrom4([4]byte{10, 100 + byte(n>>16), byte(n >> 8), byte(n)})
}

// Join returns the update that puts spare s into selector k; Leave the one that takes it out again.
func (f Fanout) Join(s, k int) model.Update {
	return model.EndpointSet{Endpoint: f.remote(f.Pods+s, map[string]string{"pool": "spare", fmt.Sprintf("g%d", k): "in"})}
}

// Leave returns the update that takes spare s out of every selector.
func (f Fanout) Leave(s int) model.Update {
	return model.EndpointSet{Endpoint: f.remote(f.Pods+s, map[string]string{"pool": "spare"})}
}
