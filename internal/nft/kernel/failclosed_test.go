package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestIngressFailsClosed: on node a, x/old is programmed behind its workload interface (so the
// prefix is checked) and namespace x allows ingress only from y/client on TCP 80. A new pod
// x/new already has its interface, route and server, but the dataplane does not know it yet: a
// connection to it is dropped and counted as unprogrammed, and not even a datagram reaches it
// (anti-spoofing alone would drop only its replies, and let the traffic in whatever its
// namespace's policy). Once its endpoint lands it is reachable exactly as its policy allows
// (TCP 80 from y/client, not 81). IPv4 and IPv6; the client is on node b.
func TestIngressFailsClosed(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}})
	old, fresh, client := addPod(t, c, "a", "x", "old"), addPod(t, c, "a", "x", "new"), addPod(t, c, "b", "y", "client")
	for _, p := range []*netns.Pod{old, fresh} {
		for _, port := range []uint16{80, 81} {
			if err := c.Serve(p.NetNS, "TCP", port); err != nil {
				t.Fatal(err)
			}
		}
	}
	fd := nodeFD(t, c.Node("a"))
	prefix := workloadPrefix(t, old)

	g := graph.New(graph.Config{NodeName: "a"})
	endpoint := func(p *netns.Pod, node string) []model.Update { return podUpdates(p, node, "a") }
	ups := []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}},
		model.NamespaceSet{Namespace: model.Namespace{Name: "y", Labels: map[string]string{"ns": "y"}}},
		model.PolicySet{Policy: nfttest.NP("x", "allow-client", "all()", []model.Rule{
			nfttest.AllowTCP(model.Peer{Selector: "pod == 'client'", NamespaceSelector: "ns == 'y'"}, model.Peer{Ports: []model.Port{nfttest.TCP(80)}}),
		}, nil, model.Ingress)},
	}
	ups = append(ups, endpoint(old, "a")...)
	ups = append(ups, endpoint(client, "b")...)
	ups = append(ups, model.SyncStatusUpdate{Status: model.InSync})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	dp, err := kernel.Open(fd, nft.Config{WorkloadPrefixes: []string{prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	unprogrammed := func() uint64 { t.Helper(); return deniedWith(t, dp, "not programmed yet") }
	probe := func(step string, to *netns.Pod, port uint16, is6, want bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := netns.Probe(ctx, client.NetNS, to.IP(is6), "TCP", port, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: y/client → %s TCP %d (IPv6=%v): connected=%v, want %v", step, to.Key(), port, is6, got, want)
		}
	}
	for _, is6 := range []bool{false, true} {
		probe("programmed pod", old, 80, is6, true)
		probe("programmed pod", old, 81, is6, false)
		before := unprogrammed()
		probe("unprogrammed pod", fresh, 80, is6, false)
		// not even a datagram reaches it (its replies alone would be dropped by anti-spoofing)
		if receives(t, sink(t, fresh.NetNS, fresh.IP(is6)), client.NetNS, client.IP(is6), fresh.IP(is6)) {
			t.Errorf("IPv6=%v: a datagram from y/client reached the unprogrammed x/new", is6)
		}
		if after := unprogrammed(); after <= before {
			t.Errorf("IPv6=%v: the unprogrammed drop counter stayed at %d after traffic to x/new", is6, after)
		}
	}
	for _, u := range endpoint(fresh, "a") {
		g.OnUpdate(u)
	}
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	for _, is6 := range []bool{false, true} {
		probe("programmed new pod", fresh, 80, is6, true)
		probe("programmed new pod", fresh, 81, is6, false)
	}
}
