package graph_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// cluster is a synthetic cluster: namespaces, endpoints (every nodes-th on this node) and
// NetworkPolicies, policiesPerNS per namespace.
type cluster struct {
	namespaces, endpoints, local, policiesPerNS int
}

var benchCluster = cluster{namespaces: 500, endpoints: 10000, local: 250, policiesPerNS: 4}

func (c cluster) nsName(i int) string { return fmt.Sprintf("ns%03d", i) }

func (c cluster) endpoint(i int, app string) model.Endpoint {
	nodeName := fmt.Sprintf("node-%d", i%(c.endpoints/c.local))
	if i%(c.endpoints/c.local) == 0 {
		nodeName = node
	}
	return model.Endpoint{
		Key:    model.EndpointKey{Namespace: c.nsName(i % c.namespaces), Name: fmt.Sprintf("pod%05d", i)},
		Node:   nodeName,
		Labels: model.LabelsOf(map[string]string{"app": app, "pod-template-hash": fmt.Sprintf("h%d", i%7)}),
		Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}),
			netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(i), 14: byte(i >> 8)})},
		NamedPorts: []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: uint16(8000 + i%3)}},
	}
}

func (c cluster) app(i int) string { return fmt.Sprintf("app%d", (i/c.namespaces)%5) }

func (c cluster) policy(ns, j int, port uint16) model.Policy {
	n := c.nsName(ns)
	p := model.Policy{
		Key:  model.PolicyKey{Kind: "NetworkPolicy", Namespace: n, Name: fmt.Sprintf("np%d", j)},
		Tier: model.TierNetworkPolicy, Namespace: n, Selector: fmt.Sprintf("app == 'app%d'", j),
		ApplyIngress: true, ApplyEgress: j == 0,
		IngressRules: []model.Rule{
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Source:      model.Peer{Selector: fmt.Sprintf("app == 'app%d'", (j+1)%5)},
				Destination: model.Peer{Ports: []model.Port{{First: port, Last: port}}}},
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Source:      model.Peer{NamespaceSelector: fmt.Sprintf("team == 't%d'", ns%10)},
				Destination: model.Peer{Ports: []model.Port{{Name: "http"}}}},
		},
	}
	if j == 0 {
		p.EgressRules = []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolUDP,
			Destination: model.Peer{Selector: "k8s-app == 'kube-dns'", NamespaceSelector: "all()", Ports: []model.Port{{First: 53, Last: 53}}}}}
	}
	return p
}

func (c cluster) updates() []model.Update {
	var ups []model.Update
	for i := range c.namespaces {
		ups = append(ups, model.NamespaceSet{Namespace: model.Namespace{Name: c.nsName(i),
			Labels: map[string]string{"kubernetes.io/metadata.name": c.nsName(i), "team": fmt.Sprintf("t%d", i%10)}}})
	}
	for i := range c.endpoints {
		ups = append(ups, model.EndpointSet{Endpoint: c.endpoint(i, c.app(i))})
	}
	for i := range c.namespaces {
		for j := range c.policiesPerNS {
			ups = append(ups, model.PolicySet{Policy: c.policy(i, j, 80)})
		}
	}
	return append(ups, model.SyncStatusUpdate{Status: model.InSync})
}

func loaded(tb testing.TB, c cluster) (*graph.Graph, int) {
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range c.updates() {
		g.OnUpdate(u)
	}
	n := len(g.Flush())
	return g, n
}

func TestBenchClusterShape(t *testing.T) {
	c := cluster{namespaces: 50, endpoints: 1000, local: 25, policiesPerNS: 4}
	_, n := loaded(t, c)
	if n < 50 {
		t.Fatalf("synthetic cluster produced only %d messages", n)
	}
}

func BenchmarkInitialLoad(b *testing.B) {
	ups := benchCluster.updates()
	b.ReportAllocs()
	for b.Loop() {
		g := graph.New(graph.Config{NodeName: node})
		for _, u := range ups {
			g.OnUpdate(u)
		}
		if len(g.Flush()) == 0 {
			b.Fatal("no messages")
		}
	}
}

func BenchmarkPodRelabel(b *testing.B) {
	c := benchCluster
	g, _ := loaded(b, c)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// A local pod (index 0 mod 40) switching between two apps: it leaves and joins sets
		// and policies.
		k := (i % c.local) * (c.endpoints / c.local)
		app := c.app(k)
		if i/c.local%2 == 0 {
			app = "other"
		}
		g.OnUpdate(model.EndpointSet{Endpoint: c.endpoint(k, app)})
		g.Flush()
		i++
	}
}

func BenchmarkPodAdd(b *testing.B) {
	c := benchCluster
	g, _ := loaded(b, c)
	b.ReportAllocs()
	i := c.endpoints
	for b.Loop() {
		g.OnUpdate(model.EndpointSet{Endpoint: c.endpoint(i, c.app(i))})
		g.Flush()
		i++
	}
}

func BenchmarkPodDelete(b *testing.B) {
	c := benchCluster
	g, _ := loaded(b, c)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		e := c.endpoint(c.endpoints+i, c.app(i))
		g.OnUpdate(model.EndpointSet{Endpoint: e})
		g.Flush()
		b.StartTimer()
		g.OnUpdate(model.EndpointDeleted{Key: e.Key})
		g.Flush()
		i++
	}
}

func BenchmarkPolicyChange(b *testing.B) {
	c := benchCluster
	g, _ := loaded(b, c)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ns := i % c.namespaces
		g.OnUpdate(model.PolicySet{Policy: c.policy(ns, 0, uint16(81+i%2))})
		g.Flush()
		i++
	}
}
