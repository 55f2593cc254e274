package nfttest

import (
	"fmt"
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
)

// ModelUpdates is the cluster of the scenarios as the graph's input: namespaces x and y, the
// Pods at addrs (by Pod.Key), the policies, then in-sync.
func ModelUpdates(addrs map[string][]netip.Addr, policies []model.Policy) []model.Update {
	var us []model.Update
	for _, ns := range []string{"x", "y"} {
		us = append(us, model.NamespaceSet{Namespace: model.Namespace{Name: ns,
			Labels: map[string]string{"ns": ns, "kubernetes.io/metadata.name": ns}}})
	}
	for _, p := range Pods {
		us = append(us, model.EndpointSet{Endpoint: model.Endpoint{
			Key: model.EndpointKey{Namespace: p.NS, Name: p.Name}, Node: p.Node,
			Labels: model.LabelsOf(map[string]string{"pod": p.Name}), Addrs: addrs[p.Key()], NamedPorts: p.NamedPorts,
		}})
	}
	for _, pol := range policies {
		us = append(us, model.PolicySet{Policy: pol})
	}
	return append(us, model.SyncStatusUpdate{Status: model.InSync})
}

// FixedAddrs are the Pods' fixed addresses (of the golden tables), by Pod.Key.
func FixedAddrs() map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, p := range Pods {
		m[p.Key()] = []netip.Addr{p.V4, p.V6}
	}
	return m
}

// MessagesFor runs the graph of one node over the scenario.
func MessagesFor(node string, addrs map[string][]netip.Addr, sc Scenario) []dataplane.Message {
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range ModelUpdates(addrs, sc.Policies(addrs)) {
		g.OnUpdate(u)
	}
	return g.Flush()
}

// DescribeOrigin is an origin in one line, for test tables.
func DescribeOrigin(o nft.Origin) string {
	switch o.Kind {
	case nft.OriginRule:
		return fmt.Sprintf("rule [%s] %s #%d %s", o.Tier, o.Policy, o.Rule, o.Action)
	case nft.OriginTierDefault:
		return fmt.Sprintf("tier default [%s] %s %v", o.Tier, o.Action, o.Policies)
	}
	return o.Kind.String()
}
