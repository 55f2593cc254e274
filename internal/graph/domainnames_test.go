package graph_test

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestDomainNamesPeer: a peer's domainNames patterns reach the dataplane as one alternative per
// pattern, in the peer's order, each restricted to its pattern and with no set or net of its own;
// such a peer never becomes one that matches any address.
func TestDomainNamesPeer(t *testing.T) {
	key := model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "dns"}
	_, st := run(t,
		nsU("x", lbl("kubernetes.io/metadata.name", "x")),
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "web"}, Node: node,
			Labels: model.LabelsOf(lbl("app", "web")), Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Running: true}},
		model.PolicySet{Policy: model.Policy{Key: key, Tier: model.TierAdmin, Order: 1, Selector: "all()", NamespaceSelector: "all()",
			ApplyEgress: true, EgressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Destination: model.Peer{DomainNames: []string{"*.example.com", "kubernetes.io"}, Ports: []model.Port{{First: 443}}}}}}},
	)
	p, ok := st.Policies[key]
	if !ok || len(p.Egress) != 2 {
		t.Fatalf("policy %v: egress %+v, want one rule per pattern: %s", key, p.Egress, st.Dump())
	}
	for i, want := range []string{"*.example.com", "kubernetes.io"} {
		r := p.Egress[i]
		if r.Dst.DomainName != want || len(r.Dst.Sets)+len(r.Dst.Nets)+len(r.Dst.NotSets)+len(r.Dst.NotNets) != 0 || len(r.Dst.Ports) != 1 {
			t.Errorf("egress[%d] = %+v, want pattern %s, port 443 and nothing else", i, r.Dst, want)
		}
	}
}
