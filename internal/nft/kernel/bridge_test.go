package kernel_test

import (
	"context"
	"slices"
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
	for _, is6 := range []bool{false, true} {
		probe("allowed, bridged", client, server, 80, is6, true)
		probe("other port, bridged", client, server, 81, is6, false)
		probe("other pod, bridged", other, server, 80, is6, false)
		probe("remote pod, routed onto the bridge", remote, server, 80, is6, false)
		probe("no policy on the client", server, client, 80, is6, true)
	}
	if n := deniedWith(t, dp, "server-from-client"); n == 0 {
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

// deniedWith sums the applier's drops whose reason contains substr.
func deniedWith(t *testing.T, dp *kernel.Applier, substr string) uint64 {
	t.Helper()
	packets, err := dp.Packets()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for reason, v := range packets.Denied {
		if strings.Contains(reason, substr) {
			n += v
		}
	}
	return n
}

// bridgedPodUpdates are the model updates of a harness pod labelled pod=<name> on node: a pod
// behind a bridge has no host route, so ifmon reports none.
func bridgedPodUpdates(p *netns.Pod, node string) []model.Update {
	return []model.Update{model.EndpointSet{Endpoint: model.Endpoint{
		Key: model.EndpointKey{Namespace: p.Namespace, Name: p.Name}, Node: node,
		Labels: model.LabelsOf(map[string]string{"pod": p.Name}), Addrs: p.Addrs}}}
}

// TestBridgeAntiSpoofing: on node a's bridge, with the ports' prefix checked (each pod's port
// known, as ifmon reports it), a datagram from x/src with another address of node a's pod range
// does not reach x/dst on the same bridge, nor y/far on node b, and is counted; its own source
// passes. A pod whose port exists but whose endpoint is not programmed receives nothing until it
// is, and sends nothing; ARP and neighbour discovery keep working (the allowed datagrams need
// them). The same spoofed datagram passes without the check, so the test can fail. IPv4 and IPv6.
func TestBridgeAntiSpoofing(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}, Layout: netns.Bridge})
	src, dst, far := addPod(t, c, "a", "x", "src"), addPod(t, c, "a", "x", "dst"), addPod(t, c, "b", "y", "far")
	nodeA := c.Node("a")
	fd := nodeFD(t, nodeA)
	prefix := workloadPrefix(t, src)

	g := graph.New(graph.Config{NodeName: "a"})
	ups := []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}}}
	ups = append(ups, podUpdates(src, "a", "a")...) // the port behind each address, as for a route
	ups = append(ups, podUpdates(dst, "a", "a")...)
	ups = append(ups, podUpdates(far, "b", "a")...)
	ups = append(ups, model.SyncStatusUpdate{Status: model.InSync})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	msgs := g.Flush()

	spoofed := addSpoofed(t, src, 24, 64)
	check := func(step string, to *netns.Pod, is6, wantOwn, wantSpoofed bool) {
		t.Helper()
		sk := sink(t, to.NetNS, to.IP(is6))
		if got := receives(t, sk, src.NetNS, src.IP(is6), to.IP(is6)); got != wantOwn {
			t.Errorf("%s: %s → %s (IPv6=%v) with its own source arrived=%v, want %v", step, src.Key(), to.Key(), is6, got, wantOwn)
		}
		if got := receives(t, sk, src.NetNS, spoofed[is6], to.IP(is6)); got != wantSpoofed {
			t.Errorf("%s: %s → %s (IPv6=%v) with a spoofed source arrived=%v, want %v", step, src.Key(), to.Key(), is6, got, wantSpoofed)
		}
	}

	off, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Apply(slices.Clone(msgs)); err != nil {
		t.Fatal(err)
	}
	off.Close()
	for _, is6 := range []bool{false, true} {
		check("check off", dst, is6, true, true)
	}

	dp, err := kernel.Open(fd, nft.Config{WorkloadPrefixes: []string{prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.Apply(msgs); err != nil {
		t.Fatal(err)
	}
	listed := nftIn(t, nodeA.NetNS, "list", "table", "bridge", nft.DefaultTable)
	for _, want := range []string{`"` + src.HostIface + `" . ` + src.IP(false).String() + ` comment "x/src"`, "hook prerouting", "hook postrouting"} {
		if !strings.Contains(listed, want) {
			t.Errorf("the bridge table lacks %q:\n%s", want, listed)
		}
	}
	for _, is6 := range []bool{false, true} {
		check("check on, bridged", dst, is6, true, false)
		check("check on, routed", far, is6, true, false)
	}
	if deniedWith(t, dp, "bridge port: spoofed") == 0 {
		t.Errorf("no drop counted for spoofed sources on the bridge")
	}

	// fail closed: a new pod on the bridge, not programmed, neither receives nor sends
	late := addPod(t, c, "a", "x", "late")
	sk := sink(t, late.NetNS, late.IP(false))
	if receives(t, sk, dst.NetNS, dst.IP(false), late.IP(false)) {
		t.Errorf("a bridge port without a programmed endpoint received traffic")
	}
	skDst := sink(t, dst.NetNS, dst.IP(false))
	if receives(t, skDst, late.NetNS, late.IP(false), dst.IP(false)) {
		t.Errorf("a bridge port without a programmed endpoint sent traffic")
	}
	for _, u := range podUpdates(late, "a", "a") {
		g.OnUpdate(u)
	}
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	if !receives(t, sk, dst.NetNS, dst.IP(false), late.IP(false)) {
		t.Errorf("the new pod still receives nothing after its endpoint was programmed")
	}
	if !receives(t, skDst, late.NetNS, late.IP(false), dst.IP(false)) {
		t.Errorf("the new pod's traffic is still dropped after its endpoint was programmed")
	}

	if err := dp.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if out, err := netns.Exec(context.Background(), nodeA.NetNS, "nft", "list", "tables"); err != nil || strings.Contains(string(out), "bridge") {
		t.Errorf("tables after Cleanup (%v):\n%s", err, out)
	}
}
