package graph_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// BenchmarkManyNamedPorts: one local pod declaring n named ports (each name twice, on two
// containers) is relabelled in and out of the selector of a policy whose rule names one of its
// ports; the graph's work per version is linear in n.
func BenchmarkManyNamedPorts(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var ports []model.NamedPort
			for i := range n {
				p := model.NamedPort{Name: fmt.Sprint("p", i), Protocol: model.ProtocolTCP, Port: uint16(1000 + i)}
				ports = append(ports, p, p)
			}
			g := graph.New(graph.Config{NodeName: node})
			g.OnUpdate(nsU("x", nil))
			g.OnUpdate(model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "np"},
				Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "app == 'a'", ApplyIngress: true,
				IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
					Destination: model.Peer{Ports: []model.Port{{Name: fmt.Sprint("p", n/2)}}}}}}})
			g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
			g.Flush()
			b.ResetTimer()
			for i := range b.N {
				app := []string{"a", "b"}[i%2]
				g.OnUpdate(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "big"}, Node: node,
					Labels: model.LabelsOf(map[string]string{"app": app}), Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
					NamedPorts: ports[:len(ports):len(ports)]}})
				g.Flush()
			}
		})
	}
}
