package bench_test

import (
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// The benchmarks build their own minimal topology (a node namespace and pod namespaces joined by
// routed veth pairs, like a ptp CNI) so they depend on nothing but `ip`, `nft` and the kernel.

// live holds the names of the namespaces not yet removed, for removal when the RSS watchdog
// ends the process (cleanups do not run then).
var live sync.Map

func removeLiveNetns() {
	live.Range(func(k, _ any) bool {
		_ = exec.Command("ip", "netns", "del", k.(string)).Run()
		return true
	})
}

// netnsHandle is a named network namespace created for one benchmark.
type netnsHandle struct {
	name string
	fd   int
}

// newNetns creates a network namespace named testenv.UniqueName(tag), its loopback up, and
// removes it when tb ends.
func newNetns(tb testing.TB, tag string) *netnsHandle {
	tb.Helper()
	ns := netns.NewBare(tb, tag, netns.LoopbackUp)
	live.Store(ns.Name, true)
	tb.Cleanup(func() { live.Delete(ns.Name) })
	return &netnsHandle{name: ns.Name, fd: ns.FD}
}

// do runs fn on a fresh OS thread that has entered the namespace: sockets fn creates belong to
// it, and processes it starts run in it. The thread is discarded afterwards.
func (h *netnsHandle) do(fn func() error) error { return netns.DoFD(h.fd, fn) }

// run executes a command and fails tb with its output if it fails.
func run(tb testing.TB, argv ...string) string {
	tb.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		tb.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// nftIn feeds script to `nft -f -` inside the namespace.
func nftIn(tb testing.TB, h *netnsHandle, script string) {
	tb.Helper()
	netns.Nft(tb, h.name, script, "-f", "-")
}

// pod is a pod namespace with one address, routed from the node namespace.
type pod struct {
	*netnsHandle
	addr netip.Addr
}

// gateway is the node-side address every pod routes through (on each host-side veth).
var gateway = netip.MustParseAddr("10.240.255.254")

// addPod creates a pod namespace with addr on its eth0, a veth to node, a /32 route to it in
// node and a default route through gateway in the pod.
func addPod(tb testing.TB, node *netnsHandle, tag string, addr netip.Addr) *pod {
	tb.Helper()
	p, host := newPodVeth(tb, node, tag, addr)
	run(tb, "ip", "-n", node.name, "addr", "add", gateway.String()+"/32", "dev", host)
	run(tb, "ip", "-n", node.name, "link", "set", host, "up")
	run(tb, "ip", "-n", node.name, "route", "add", addr.String()+"/32", "dev", host)
	run(tb, "ip", "-n", p.name, "addr", "add", addr.String()+"/32", "dev", "eth0")
	run(tb, "ip", "-n", p.name, "link", "set", "eth0", "up")
	run(tb, "ip", "-n", p.name, "route", "add", gateway.String()+"/32", "dev", "eth0")
	run(tb, "ip", "-n", p.name, "route", "add", "default", "via", gateway.String(), "dev", "eth0")
	return p
}

// newPodVeth makes a pod namespace and a veth from the node into it (eth0 there); it returns the
// pod and the node side's name.
func newPodVeth(tb testing.TB, node *netnsHandle, tag string, addr netip.Addr) (*pod, string) {
	tb.Helper()
	p := &pod{netnsHandle: newNetns(tb, tag), addr: addr}
	host := "v" + strings.TrimPrefix(p.name, testenv.NetnsPrefix)
	if len(host) > 15 {
		host = host[:15]
	}
	run(tb, "ip", "-n", node.name, "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.name)
	return p, host
}

// benchBridge is the node's pod bridge of P1's bridged topology, holding the gateway.
const benchBridge = "bbr0"

// addBridge makes the node's pod bridge with the gateway on 10.240.0.0/16, bridged traffic
// passing the inet hooks (br_netfilter's sysctls, written in the node's namespace).
func addBridge(tb testing.TB, node *netnsHandle) {
	tb.Helper()
	run(tb, "ip", "-n", node.name, "link", "add", benchBridge, "type", "bridge")
	run(tb, "ip", "-n", node.name, "addr", "add", gateway.String()+"/16", "dev", benchBridge)
	run(tb, "ip", "-n", node.name, "link", "set", benchBridge, "up")
	run(tb, "ip", "netns", "exec", node.name, "sysctl", "-qw",
		"net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1")
}

// addBridgedPod is addPod with the pod's node-side veth a port of the node's bridge and the
// pod's address a /16 on the bridge's subnet (no host route).
func addBridgedPod(tb testing.TB, node *netnsHandle, tag string, addr netip.Addr) *pod {
	tb.Helper()
	p, host := newPodVeth(tb, node, tag, addr)
	run(tb, "ip", "-n", node.name, "link", "set", host, "master", benchBridge, "up")
	run(tb, "ip", "-n", p.name, "addr", "add", addr.String()+"/16", "dev", "eth0")
	run(tb, "ip", "-n", p.name, "link", "set", "eth0", "up")
	run(tb, "ip", "-n", p.name, "route", "add", "default", "via", gateway.String(), "dev", "eth0")
	return p
}

// newNode creates a node namespace that forwards between its pods.
func newNode(tb testing.TB) *netnsHandle {
	tb.Helper()
	n := newNetns(tb, "bn")
	run(tb, "ip", "netns", "exec", n.name, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return n
}

// procStatus reads a "kB" field (VmRSS, VmHWM) of /proc/self/status in bytes.
func procStatus(field string) uint64 { return procField(os.Getpid(), field) }
