package scale

import (
	"fmt"
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// PacketPathNamespace is the namespace of PacketPathPolicies' endpoints and policies.
const PacketPathNamespace = "bench"

// PacketPath is the packet-path benchmark's cluster.
type PacketPath struct {
	// Updates: namespace, server, clients, one peer pod per policy but the last, the policies,
	// then InSync.
	Updates []model.Update
	// Peers[i] lists the addresses policy i allows (TCP 80), in policy order: one remote peer pod
	// each, the clients for the last. Enough to write the same policies in another shape.
	Peers [][]netip.Addr
}

// PacketPathPolicies returns n policies selecting server (its labels are replaced by role=server
// and its namespace by PacketPathNamespace, as are the clients'), policy i allowing TCP port 80
// from the pods of selector "peer == 'p<i>'" — one remote pod each, on node "node-remote", v4 in
// 10.200.0.0/16 and v6 in fd00:200::/64 — and the last (i = n-1) from "role == 'client'" instead:
// the clients are allowed only by the last policy. n = 0 gives no policy (nothing isolated).
func PacketPathPolicies(n int, server model.Endpoint, clients ...model.Endpoint) PacketPath {
	var pp PacketPath
	pp.Updates = append(pp.Updates, model.NamespaceSet{Namespace: model.Namespace{Name: PacketPathNamespace,
		Labels: map[string]string{"kubernetes.io/metadata.name": PacketPathNamespace}}})
	server.Key.Namespace = PacketPathNamespace
	server.Labels = model.LabelsOf(map[string]string{"role": "server"})
	pp.Updates = append(pp.Updates, model.EndpointSet{Endpoint: server})
	var clientAddrs []netip.Addr
	for _, c := range clients {
		c.Key.Namespace = PacketPathNamespace
		c.Labels = model.LabelsOf(map[string]string{"role": "client"})
		pp.Updates = append(pp.Updates, model.EndpointSet{Endpoint: c})
		clientAddrs = append(clientAddrs, c.Addrs...)
	}
	for i := range n {
		sel := fmt.Sprintf("peer == 'p%d'", i)
		var addrs []netip.Addr
		if i == n-1 {
			sel = "role == 'client'"
			addrs = clientAddrs
		} else {
			addrs = peerAddrs(i)
			pp.Updates = append(pp.Updates, model.EndpointSet{Endpoint: peer(i)})
		}
		pp.Peers = append(pp.Peers, addrs)
		pp.Updates = append(pp.Updates, model.PolicySet{Policy: model.Policy{
			Key:       model.PolicyKey{Kind: "NetworkPolicy", Namespace: PacketPathNamespace, Name: fmt.Sprintf("allow-%05d", i)},
			Tier:      model.TierNetworkPolicy,
			Order:     float64(i),
			Namespace: PacketPathNamespace, Selector: "role == 'server'",
			ApplyIngress: true,
			IngressRules: []model.Rule{{
				Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Source:      model.Peer{Selector: sel},
				Destination: model.Peer{Ports: []model.Port{{First: 80, Last: 80}}},
			}},
		}})
	}
	pp.Updates = append(pp.Updates, model.SyncStatusUpdate{Status: model.InSync})
	return pp
}

// peer is policy i's remote peer pod: peer-<i> labelled peer=p<i>, at peerAddrs(i).
func peer(i int) model.Endpoint {
	return model.Endpoint{
		Key:    model.EndpointKey{Namespace: PacketPathNamespace, Name: fmt.Sprintf("peer-%05d", i)},
		Node:   "node-remote",
		Labels: model.LabelsOf(map[string]string{"peer": fmt.Sprintf("p%d", i)}),
		Addrs:  peerAddrs(i),
	}
}

func peerAddrs(i int) []netip.Addr {
	n := uint16(i + 1)
	return []netip.Addr{
		netip.AddrFrom4([4]byte{10, 200, byte(n >> 8), byte(n)}),
		netip.AddrFrom16([16]byte{0: 0xfd, 2: 0x02, 14: byte(n >> 8), 15: byte(n)}),
	}
}

// PacketPathClusterPolicies is PacketPathPolicies with n policies shaped as converted
// ClusterNetworkPolicies selecting the server (subject: role=server in PacketPathNamespace), at
// mixed tiers, priorities and actions: policy i < n-1 is in the admin tier for even i and the
// baseline tier for odd i, at priority i mod 1001 (many priorities equal, ordered by name), its
// one rule acting on TCP port 80 from the pods of "peer == 'p<i>'" (one remote pod each) with
// Deny, Pass or Allow in turn. The last, in the baseline tier at priority 1000 and last by name,
// allows TCP 80 from the clients and then denies every pod: the clients pass every other
// policy's rules (none matches them) and are allowed by the last rule but one; any other port
// of theirs is denied. n = 0 gives no policy.
func PacketPathClusterPolicies(n int, server model.Endpoint, clients ...model.Endpoint) PacketPath {
	pp := PacketPathPolicies(0, server, clients...)
	pp.Updates = pp.Updates[:len(pp.Updates)-1] // InSync comes last
	var clientAddrs []netip.Addr
	for _, c := range clients {
		clientAddrs = append(clientAddrs, c.Addrs...)
	}
	for i := range n {
		tier, tierName, prio := model.TierAdmin, "admin", i%1001
		if i%2 == 1 || i == n-1 {
			tier, tierName = model.TierBaseline, "baseline"
		}
		if i == n-1 {
			prio = 1000
		}
		label := func(r int) string { return fmt.Sprintf("%s priority %d ingress rule %d", tierName, prio, r) }
		port := []model.Port{{First: 80, Last: 80}}
		var rules []model.Rule
		var addrs []netip.Addr
		if i == n-1 {
			addrs = clientAddrs
			rules = []model.Rule{
				{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{Selector: "role == 'client'", NamespaceSelector: "all()"},
					Destination: model.Peer{Ports: port}, Label: label(0)},
				{Action: model.ActionDeny, Source: model.Peer{NamespaceSelector: "all()"}, Label: label(1)},
			}
		} else {
			addrs = peerAddrs(i)
			pp.Updates = append(pp.Updates, model.EndpointSet{Endpoint: peer(i)})
			rules = []model.Rule{{Action: []model.Action{model.ActionDeny, model.ActionPass, model.ActionAllow}[i%3], Protocol: model.ProtocolTCP,
				Source:      model.Peer{Selector: fmt.Sprintf("peer == 'p%d'", i), NamespaceSelector: "all()"},
				Destination: model.Peer{Ports: port}, Label: label(0)}}
		}
		pp.Peers = append(pp.Peers, addrs)
		pp.Updates = append(pp.Updates, model.PolicySet{Policy: model.Policy{
			Key:  model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: fmt.Sprintf("cnp-%05d", i)},
			Tier: tier, Order: float64(prio),
			Selector: "role == 'server'", NamespaceSelector: "kubernetes.io/metadata.name == '" + PacketPathNamespace + "'",
			ApplyIngress: true, IngressRules: rules,
		}})
	}
	pp.Updates = append(pp.Updates, model.SyncStatusUpdate{Status: model.InSync})
	return pp
}
