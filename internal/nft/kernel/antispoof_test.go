package kernel_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// sink opens a harness sink that the test closes.
func sink(t *testing.T, podNS string, addr netip.Addr) *netns.Sink {
	t.Helper()
	s, err := netns.ListenSink(podNS, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// workloadPrefix is the name prefix of the harness's host-side pod interfaces (p's without its
// hex number).
func workloadPrefix(t *testing.T, p *netns.Pod) string {
	t.Helper()
	prefix := strings.TrimRight(p.HostIface, "0123456789abcdef")
	if prefix == "" {
		t.Fatalf("host interface %q has no name prefix", p.HostIface)
	}
	return prefix
}

// addPod adds a pod of the harness, failing the test on a harness error.
func addPod(t *testing.T, c *netns.Cluster, node, ns, name string) *netns.Pod {
	t.Helper()
	p, err := c.AddPod(node, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podUpdates are the model updates of a harness pod labelled pod=<name> on node, with the host
// routes ifmon would report when node is the local one.
func podUpdates(p *netns.Pod, node, local string) []model.Update {
	us := []model.Update{model.EndpointSet{Endpoint: model.Endpoint{
		Key: model.EndpointKey{Namespace: p.Namespace, Name: p.Name}, Node: node,
		Labels: model.LabelsOf(map[string]string{"pod": p.Name}), Addrs: p.Addrs}}}
	if node == local {
		for _, a := range p.Addrs {
			us = append(us, model.RouteSet{Dst: netip.PrefixFrom(a, a.BitLen()), Interface: p.HostIface})
		}
	}
	return us
}

// addSpoofed gives pod p's eth0 also 10.244.0.99 and fd00:10:244::99 (addresses of node a's pod
// range that are no pod's), with the prefix lengths given, and returns them by IPv6-ness.
func addSpoofed(t *testing.T, p *netns.Pod, bits4, bits6 int) map[bool]netip.Addr {
	t.Helper()
	spoofed := map[bool]netip.Addr{false: netip.MustParseAddr("10.244.0.99"), true: netip.MustParseAddr("fd00:10:244::99")}
	bits := map[bool]int{false: bits4, true: bits6}
	for is6, a := range spoofed {
		argv := []string{"ip", "addr", "add", netip.PrefixFrom(a, bits[is6]).String(), "dev", "eth0"}
		if is6 {
			argv = append(argv, "nodad")
		}
		if out, err := netns.Exec(context.Background(), p.NetNS, argv...); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
	}
	return spoofed
}

// receives is Sink.Receives failing the test on a harness error.
func receives(t *testing.T, s *netns.Sink, fromNS string, src, dst netip.Addr) bool {
	t.Helper()
	ok, err := s.Receives(fromNS, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestAntiSpoofing: with workload prefixes set, node a forwards a pod's packets only with the
// pod's own source address, and nothing at all from a workload interface whose endpoint is not
// programmed yet (fail closed) — shown with real datagrams to a pod on node b. The same spoofed
// datagram passes when the check is off, so the test can fail.
func TestAntiSpoofing(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}})
	src, dst := addPod(t, c, "a", "x", "src"), addPod(t, c, "b", "x", "dst")
	nodeA := c.Node("a")
	fd := nodeFD(t, nodeA)
	prefix := workloadPrefix(t, src)

	g := graph.New(graph.Config{NodeName: "a"})
	endpoint := func(p *netns.Pod, node string) []model.Update { return podUpdates(p, node, "a") }
	ups := []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}}}
	ups = append(ups, endpoint(src, "a")...)
	ups = append(ups, endpoint(dst, "b")...)
	ups = append(ups, model.SyncStatusUpdate{Status: model.InSync})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	msgs := g.Flush()

	// spoofed: src also holds an address of node a's pod range that is not its own
	spoofed := addSpoofed(t, src, 32, 128)

	check := func(step string, is4, wantOwn, wantSpoofed bool) {
		t.Helper()
		sk := sink(t, dst.NetNS, dst.IP(!is4))
		if got := receives(t, sk, src.NetNS, src.IP(!is4), dst.IP(!is4)); got != wantOwn {
			t.Errorf("%s (IPv4=%v): datagram with the pod's own source arrived=%v, want %v", step, is4, got, wantOwn)
		}
		if got := receives(t, sk, src.NetNS, spoofed[!is4], dst.IP(!is4)); got != wantSpoofed {
			t.Errorf("%s (IPv4=%v): datagram with a spoofed source arrived=%v, want %v", step, is4, got, wantSpoofed)
		}
	}

	// with the prefix configured but no pod seen behind such an interface (no host route or
	// bridge port reported): nothing is checked, the spoofed datagram passes
	bridged := graph.New(graph.Config{NodeName: "a"})
	for _, u := range ups {
		if _, route := u.(model.RouteSet); !route {
			bridged.OnUpdate(u)
		}
	}
	idle, err := kernel.Open(fd, nft.Config{WorkloadPrefixes: []string{prefix}})
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Apply(bridged.Flush()); err != nil {
		t.Fatal(err)
	}
	idle.Close()
	if egress := nftIn(t, nodeA.NetNS, "list", "chain", "inet", nft.DefaultTable, "forward_egress"); strings.Contains(egress, "sources_v4") {
		t.Errorf("anti-spoofing rules before any pod was seen behind a %s* interface:\n%s", prefix, egress)
	}
	for _, is4 := range []bool{true, false} {
		check("no pod seen behind the prefix", is4, true, true)
	}

	// without the check (no workload prefixes) the spoofed datagram passes
	off, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := off.Apply(slices.Clone(msgs)); err != nil { // Apply consumes its messages; dp gets them below
		t.Fatal(err)
	}
	off.Close()
	for _, is4 := range []bool{true, false} {
		check("check off", is4, true, true)
	}

	// with it: own source passes, spoofed is dropped and counted
	dp, err := kernel.Open(fd, nft.Config{WorkloadPrefixes: []string{prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.Apply(msgs); err != nil {
		t.Fatal(err)
	}
	for _, is4 := range []bool{true, false} {
		check("check on", is4, true, false)
	}
	if deniedWith(t, dp, "spoofed") == 0 {
		t.Errorf("no drop counted for spoofed sources")
	}

	// fail closed: a new pod whose endpoint is not programmed passes nothing, then passes once
	// its endpoint (with its interface) is applied
	late := addPod(t, c, "a", "x", "late")
	sk := sink(t, dst.NetNS, dst.IP(false))
	if receives(t, sk, late.NetNS, late.IP(false), dst.IP(false)) {
		t.Errorf("a workload interface without a programmed endpoint passed traffic")
	}
	for _, u := range endpoint(late, "a") {
		g.OnUpdate(u)
	}
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	if !receives(t, sk, late.NetNS, late.IP(false), dst.IP(false)) {
		t.Errorf("the new pod's traffic is still dropped after its endpoint was programmed")
	}
	listed := nftIn(t, nodeA.NetNS, "list", "set", "inet", nft.DefaultTable, "sources_v4")
	if !strings.Contains(listed, `"`+late.HostIface+`" . `+late.IP(false).String()) {
		t.Errorf("sources_v4 lacks the new pod's interface . address:\n%s", listed)
	}

	// the pod goes: its interface . address leaves the kernel's set
	g.OnUpdate(model.EndpointDeleted{Key: model.EndpointKey{Namespace: late.Namespace, Name: late.Name}})
	for _, a := range late.Addrs {
		g.OnUpdate(model.RouteDeleted{Dst: netip.PrefixFrom(a, a.BitLen())})
	}
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	listed = nftIn(t, nodeA.NetNS, "list", "set", "inet", nft.DefaultTable, "sources_v4")
	if strings.Contains(listed, late.IP(false).String()) {
		t.Errorf("sources_v4 still holds the deleted pod's address:\n%s", listed)
	}
	if drift, err := dp.Resync(); err != nil || drift {
		t.Errorf("after the pod's deletion: drift=%v err=%v, want none", drift, err)
	}
}
