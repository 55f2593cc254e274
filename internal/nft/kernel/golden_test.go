package kernel_test

import (
	"bytes"
	"context"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// bareNetns makes an empty network namespace for ruleset-only tests and returns its name and an
// open handle; both go away when the test ends.
func bareNetns(t *testing.T) (string, int) {
	t.Helper()
	testenv.RequireCommand(t, "ip", "nft")
	ns := netns.NewBare(t, "nft", netns.LoopbackDown)
	return ns.Name, ns.FD
}

// nftIn runs nft in the namespace and returns its output; it fails the test on error.
func nftIn(t *testing.T, ns string, args ...string) string {
	t.Helper()
	return netns.Nft(t, ns, "", args...)
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(want, []byte(got)) {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// TestGolden programs each scenario for node "a" into a namespace and compares what `nft list
// table` prints with the golden file; the same table rendered offline must load with `nft -f`.
func TestGolden(t *testing.T) {
	for _, sc := range nfttest.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			ns, fd := bareNetns(t)
			dp, err := kernel.Open(fd, nft.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			if err := dp.Apply(nfttest.MessagesFor("a", nfttest.FixedAddrs(), sc)); err != nil {
				t.Fatal(err)
			}
			listed := nftIn(t, ns, "list", "table", "inet", nft.DefaultTable)
			checkGolden(t, filepath.Join("..", "testdata", "golden", sc.Name+".nft"), listed)
			for _, want := range []string{"forward_egress", "forward_ingress", "ct state established,related accept"} {
				if !strings.Contains(listed, want) {
					t.Errorf("table lacks %q", want)
				}
			}

			checkRenderLoads(t, dp, listed)
		})
	}
}

// checkRenderLoads checks that the table dp renders offline loads with nft -f into a second
// namespace and lists there as listed, the committed table's listing.
func checkRenderLoads(t *testing.T, dp *kernel.Applier, listed string) {
	t.Helper()
	ns2, _ := bareNetns(t)
	file := filepath.Join(t.TempDir(), "ruleset.nft")
	if err := os.WriteFile(file, []byte(dp.Render()), 0o644); err != nil {
		t.Fatal(err)
	}
	nftIn(t, ns2, "-f", file)
	if again := nftIn(t, ns2, "list", "table", "inet", nft.DefaultTable); again != listed {
		t.Errorf("rendered table loaded with nft -f lists differently:\n--- committed\n%s\n--- rendered\n%s", listed, again)
	}
}

// trafficCluster is the shared two-node cluster of the traffic tests.
type trafficCluster struct {
	c     *netns.Cluster
	pods  map[string]*netns.Pod
	addrs map[string][]netip.Addr
}

var trafficPorts = []struct {
	proto model.Protocol
	port  uint16
}{{model.ProtocolTCP, 80}, {model.ProtocolTCP, 81}, {model.ProtocolUDP, 80}}

func netnsProto(p model.Protocol) netns.Protocol {
	if p == model.ProtocolUDP {
		return "UDP"
	}
	return "TCP"
}

func newTrafficCluster(t *testing.T) *trafficCluster {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}})
	tc := &trafficCluster{c: c, pods: map[string]*netns.Pod{}, addrs: map[string][]netip.Addr{}}
	for _, p := range nfttest.Pods {
		np, err := c.AddPod(p.Node, p.NS, p.Name)
		if err != nil {
			t.Fatal(err)
		}
		tc.pods[p.Key()] = np
		tc.addrs[p.Key()] = np.Addrs
		for _, sp := range trafficPorts {
			if err := c.Serve(np.NetNS, netnsProto(sp.proto), sp.port); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tc
}

// enforce runs one graph and dataplane per node for the scenario, as the agent would.
func (tc *trafficCluster) enforce(t *testing.T, sc nfttest.Scenario) {
	t.Helper()
	tc.enforceWith(t, sc, nft.Config{})
}

// enforceWith is enforce with a builder configuration, applied to each node's namespace.
func (tc *trafficCluster) enforceWith(t *testing.T, sc nfttest.Scenario, cfg nft.Config) {
	t.Helper()
	for _, n := range tc.c.Nodes() {
		fd, err := n.FD()
		if err != nil {
			t.Fatal(err)
		}
		dp, err := kernel.Open(fd, cfg)
		if err != nil {
			t.Fatal(err)
		}
		err = dp.Apply(nfttest.MessagesFor(n.Name, tc.addrs, sc))
		dp.Close()
		_ = closeFD(fd)
		if err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
	}
}

// check probes every pair on every port and family and compares with the scenario's table.
func (tc *trafficCluster) check(t *testing.T, sc nfttest.Scenario) {
	t.Helper()
	keys := make([]string, 0, len(nfttest.Pods))
	var pods []*netns.Pod
	for _, p := range nfttest.Pods {
		keys = append(keys, p.Key())
		pods = append(pods, tc.pods[p.Key()])
	}
	byKey := nfttest.PodsByKey()
	for _, is6 := range []bool{false, true} {
		for _, sp := range trafficPorts {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			got, err := tc.c.ProbeMatrix(ctx, pods, netnsProto(sp.proto), sp.port, is6, 500*time.Millisecond)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			r := netns.NewReachability(keys, true)
			for _, from := range keys {
				for _, to := range keys {
					r.Expect(from, to, sc.Allowed(nfttest.Probe{From: byKey[from], To: byKey[to], Proto: sp.proto, Port: sp.port, Is6: is6}))
					r.Observe(from, to, got[[2]string{from, to}])
				}
			}
			if wrong, table := r.Summary(); wrong > 0 {
				fam := "IPv4"
				if is6 {
					fam = "IPv6"
				}
				t.Errorf("%s %s/%d: %d probes wrong\n%s", fam, sp.proto, sp.port, wrong, table)
			}
		}
	}
}

// TestTraffic enforces every scenario in a two-node cluster of namespaces and checks the truth
// table with real TCP and UDP connections, IPv4 and IPv6, same-node and cross-node.
func TestTraffic(t *testing.T) {
	tc := newTrafficCluster(t)
	for _, sc := range nfttest.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			tc.enforce(t, sc)
			tc.check(t, sc)
		})
	}
}

func closeFD(fd int) error { return os.NewFile(uintptr(fd), "netns").Close() }

// nodeFD opens a handle of node n's network namespace, closed when the test ends.
func nodeFD(t *testing.T, n *netns.Node) int {
	t.Helper()
	fd, err := n.FD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFD(fd) })
	return fd
}

// TestDriftRepair enforces a scenario on node a with a long-lived dataplane, then changes the
// kernel behind its back — an element deleted, a chain flushed, the whole table deleted — and
// after each, Resync reports the drift and the truth table is the scenario's again.
func TestDriftRepair(t *testing.T) {
	tc := newTrafficCluster(t)
	sc := nfttest.Scenarios[1] // default-deny-ingress-x
	tc.enforce(t, sc)          // node b as usual; node a is replaced below by a lasting dataplane
	nodeA := tc.c.Node("a")
	dp, err := kernel.Open(nodeFD(t, nodeA), nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.Apply(nfttest.MessagesFor("a", tc.addrs, sc)); err != nil {
		t.Fatal(err)
	}
	if drift, err := dp.Resync(); err != nil || drift {
		t.Fatalf("Resync right after Apply: drift=%v err=%v, want no drift", drift, err)
	}
	xa := tc.addrs["x/a"][0]
	group := ""
	for e := range dp.Table().Sets["ingress_v4"].All() {
		if e.Addr == xa {
			group = e.Verdict.Chain
		}
	}
	if group == "" {
		t.Fatalf("no ingress_v4 element for x/a %s", xa)
	}
	for _, tamper := range []struct {
		name string
		args []string
	}{
		{"delete x/a's dispatch element", []string{"delete", "element", "inet", nft.DefaultTable, "ingress_v4", "{", xa.String(), "}"}},
		{"flush x/a's group chain", []string{"flush", "chain", "inet", nft.DefaultTable, group}},
		{"delete the table", []string{"delete", "table", "inet", nft.DefaultTable}},
	} {
		t.Run(tamper.name, func(t *testing.T) {
			nftIn(t, nodeA.NetNS, tamper.args...)
			drift, err := dp.Resync()
			if err != nil {
				t.Fatal(err)
			}
			if !drift {
				t.Errorf("Resync saw no drift after: %s", tamper.name)
			}
			tc.check(t, sc)
		})
	}
}
