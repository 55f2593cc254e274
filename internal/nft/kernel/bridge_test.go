package kernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestBridgedPolicy: on node a, pods of one bridge (the harness's Bridge layout, br_netfilter on)
// are judged in the inet table like routed ones. x/server allows ingress from x/client on TCP 80
// only: client → server:80 connects (the reply comes back through conntrack), client →
// server:81 and other → server:80 are dropped and counted under the tier default, both
// bridged on node a, IPv4 and IPv6; remote → server:80 from node b is dropped too, and
// server → client works (no policy on client). The same table with the policy removed lets
// everything through, so the drops are the policy's.
func TestBridgedPolicy(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}, Layout: netns.Bridge})
	server, client, other := addPod(t, c, "a", "x", "server"), addPod(t, c, "a", "x", "client"), addPod(t, c, "a", "x", "other")
	remote := addPod(t, c, "b", "x", "remote")
	for _, p := range []*netns.Pod{server, client} {
		for _, port := range []uint16{80, 81} {
			if err := c.Serve(p.NetNS, "TCP", port); err != nil {
				t.Fatal(err)
			}
		}
	}
	fd := nodeFD(t, c.Node("a"))

	policy := nfttest.NP("x", "server-from-client", "pod == 'server'", []model.Rule{
		nfttest.AllowTCP(model.Peer{Selector: "pod == 'client'"}, model.Peer{Ports: []model.Port{nfttest.TCP(80)}}),
	}, nil, model.Ingress)
	g := graph.New(graph.Config{NodeName: "a"})
	ups := []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}},
		model.PolicySet{Policy: policy},
	}
	for _, p := range []*netns.Pod{server, client, other} {
		ups = append(ups, bridgedPodUpdates(p, "a")...)
	}
	ups = append(ups, bridgedPodUpdates(remote, "b")...)
	ups = append(ups, model.SyncStatusUpdate{Status: model.InSync})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	dp, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}

	probe := func(step string, from, to *netns.Pod, port uint16, is6, want bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := netns.Probe(ctx, from.NetNS, to.IP(is6), "TCP", port, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: %s → %s:%d (IPv6=%v) connected=%v, want %v", step, from.Key(), to.Key(), port, is6, got, want)
		}
	}
	denied := func() uint64 {
		t.Helper()
		d, err := dp.DeniedPackets()
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for reason, v := range d {
			if strings.Contains(reason, "server-from-client") {
				n += v
			}
		}
		return n
	}
	for _, is6 := range []bool{false, true} {
		probe("allowed, bridged", client, server, 80, is6, true)
		probe("other port, bridged", client, server, 81, is6, false)
		probe("other pod, bridged", other, server, 80, is6, false)
		probe("remote pod, routed onto the bridge", remote, server, 80, is6, false)
		probe("no policy on the client", server, client, 80, is6, true)
	}
	if n := denied(); n == 0 {
		t.Errorf("no drop counted under the policy's tier default")
	}

	g.OnUpdate(model.PolicyDeleted{Key: policy.Key})
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	for _, is6 := range []bool{false, true} {
		probe("policy removed", other, server, 80, is6, true)
		probe("policy removed", client, server, 81, is6, true)
	}
}

// bridgedPodUpdates are the model updates of a harness pod labelled pod=<name> on node: a pod
// behind a bridge has no host route, so ifmon reports none.
func bridgedPodUpdates(p *netns.Pod, node string) []model.Update {
	return []model.Update{model.EndpointSet{Endpoint: model.Endpoint{
		Key: model.EndpointKey{Namespace: p.Namespace, Name: p.Name}, Node: node,
		Labels: model.LabelsOf(map[string]string{"pod": p.Name}), Addrs: p.Addrs}}}
}
