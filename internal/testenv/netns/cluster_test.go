package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

const probeTimeout = 300 * time.Millisecond

func keys(pods []*Pod) []string {
	var ks []string
	for _, p := range pods {
		ks = append(ks, p.Key())
	}
	return ks
}

// trafficCluster is 2 nodes with the external host, pods x/a1 and x/a2 on node a and x/b1 on node
// b, TCP 80 and UDP 81 served everywhere.
func trafficCluster(t *testing.T) (*Cluster, []*Pod) {
	t.Helper()
	c := NewForTest(t, Config{Nodes: []string{"a", "b"}, External: true})
	var pods []*Pod
	for _, p := range []struct{ node, name string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}} {
		pod, err := c.AddPod(p.node, "x", p.name)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, pod)
	}
	for _, ns := range append(nsNames(pods), c.External().NetNS) {
		for _, s := range []struct {
			proto Protocol
			port  uint16
		}{{TCP, 80}, {UDP, 81}} {
			if err := c.Serve(ns, s.proto, s.port); err != nil {
				t.Fatal(err)
			}
			if err := c.Serve(ns, s.proto, s.port); err != nil { // idempotent
				t.Fatal(err)
			}
		}
	}
	return c, pods
}

func nsNames(pods []*Pod) []string {
	var ns []string
	for _, p := range pods {
		ns = append(ns, p.NetNS)
	}
	return ns
}

var probeCases = []struct {
	proto Protocol
	port  uint16
	is6   bool
}{
	{TCP, 80, false},
	{TCP, 80, true},
	{UDP, 81, false},
	{UDP, 81, true},
}

func checkMatrix(t *testing.T, c *Cluster, pods []*Pod, r func() *Reachability) {
	t.Helper()
	for _, pc := range probeCases {
		got, err := c.ProbeMatrix(context.Background(), pods, pc.proto, pc.port, pc.is6, probeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		reach := r()
		for k, ok := range got {
			reach.Observe(k[0], k[1], ok)
		}
		wrong, table := reach.Summary()
		if wrong > 0 {
			t.Errorf("%s/%d IPv6=%v: %d wrong\n%s", pc.proto, pc.port, pc.is6, wrong, table)
		} else {
			t.Logf("%s/%d IPv6=%v:\n%s", pc.proto, pc.port, pc.is6, reach.Observed)
		}
	}
}

// checkExternal probes between the external host and every pod, both ways.
func checkExternal(t *testing.T, c *Cluster, pods []*Pod, want func(p *Pod) bool) {
	t.Helper()
	ext := c.External()
	var wg sync.WaitGroup
	for _, pc := range probeCases {
		extAddr := ext.Addrs[0]
		if pc.is6 {
			extAddr = ext.Addrs[1]
		}
		for _, p := range pods {
			for _, dir := range []struct {
				name, from string
				to         netip.Addr
			}{
				{"pod→external", p.NetNS, extAddr},
				{"external→pod", ext.NetNS, p.IP(pc.is6)},
			} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := Probe(context.Background(), dir.from, dir.to, pc.proto, pc.port, probeTimeout)
					if err != nil {
						t.Error(err)
					} else if ok != want(p) {
						t.Errorf("%s %s %s/%d IPv6=%v: connected=%v, want %v", dir.name, p.Key(), pc.proto, pc.port, pc.is6, ok, want(p))
					}
				}()
			}
		}
	}
	wg.Wait()
}

func TestTraffic(t *testing.T) {
	t.Parallel()
	c, pods := trafficCluster(t)
	a := c.Node("a")
	onA := func(key string) bool { return strings.HasPrefix(key, "x/a") }

	t.Run("no policy: every pair connects", func(t *testing.T) {
		checkMatrix(t, c, pods, func() *Reachability { return NewReachability(keys(pods), true) })
		checkExternal(t, c, pods, func(*Pod) bool { return true })
	})

	ctx := context.Background()
	for _, cmd := range [][]string{
		{"nft", "add", "table", "inet", "t"},
		{"nft", "add", "chain", "inet", "t", "f", "{ type filter hook forward priority 0 ; }"},
		{"nft", "add", "rule", "inet", "t", "f", "drop"},
	} {
		if _, err := Exec(ctx, a.NetNS, cmd...); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("drop in node a's forward hook: every pair through node a is blocked", func(t *testing.T) {
		checkMatrix(t, c, pods, func() *Reachability {
			r := NewReachability(keys(pods), true)
			for _, k := range keys(pods) {
				if onA(k) {
					r.ExpectAllEgress(k, false)
					r.ExpectAllIngress(k, false)
				}
			}
			for _, k := range keys(pods) {
				r.Expect(k, k, true) // a pod reaches itself without its node
			}
			return r
		})
		checkExternal(t, c, pods, func(p *Pod) bool { return p.Node != "a" })
	})

	t.Run("a wrong expectation is reported", func(t *testing.T) {
		got, err := c.ProbeMatrix(ctx, pods, TCP, 80, false, probeTimeout)
		if err != nil {
			t.Fatal(err)
		}
		r := NewReachability(keys(pods), true) // wrong: node a drops
		for k, ok := range got {
			r.Observe(k[0], k[1], ok)
		}
		wrong, table := r.Summary()
		if wrong != 6 || !strings.Contains(table, "x/a1 -> x/b1: expected connected, observed blocked") {
			t.Errorf("want 6 wrong cells with x/a1 -> x/b1 among them, got %d:\n%s", wrong, table)
		}
		t.Logf("the report of a wrong expectation:\n%s", table)
	})
}

func TestSCTP(t *testing.T) {
	t.Parallel()
	c := NewForTest(t, Config{Nodes: []string{"a"}})
	p, err := c.AddPod("a", "x", "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Serve(p.NetNS, SCTP, 82); !errors.Is(err, ErrNoSCTP) {
		t.Errorf("Serve SCTP: %v, want ErrNoSCTP", err)
	}
	if _, err := Probe(context.Background(), p.NetNS, p.IP(false), SCTP, 82, probeTimeout); !errors.Is(err, ErrNoSCTP) {
		t.Errorf("Probe SCTP: %v, want ErrNoSCTP", err)
	}
	if _, err := Probe(context.Background(), testenv.NetnsPrefix+"missing", p.IP(false), TCP, 80, probeTimeout); err == nil {
		t.Error("a probe from a missing namespace must fail, not report blocked")
	}
}

func TestForward(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t)
	// A TCP echo server on the root namespace's loopback.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer conn.Close(); io.Copy(conn, conn) }()
		}
	}()

	c := NewForTest(t, Config{Nodes: []string{"a"}})
	n := c.Node("a")
	echo := func(listen netip.AddrPort) (string, error) {
		var got string
		err := Do(n.NetNS, func() error {
			conn, err := net.DialTimeout("tcp", listen.String(), 5*time.Second)
			if err != nil {
				return err
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Write([]byte("ping")); err != nil {
				return err
			}
			buf := make([]byte, 4)
			_, err = io.ReadFull(conn, buf)
			got = string(buf)
			return err
		})
		return got, err
	}
	listen := netip.MustParseAddrPort("127.0.0.1:6443")
	if err := c.Forward(n.NetNS, listen, ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if got, err := echo(listen); err != nil || got != "ping" {
		t.Fatalf("echo through the forwarder: %q, %v", got, err)
	}
	// The listener is in the node namespace, not in the root one.
	if conn, err := net.DialTimeout("tcp", listen.String(), time.Second); err == nil {
		conn.Close()
		t.Errorf("%s answers in the root namespace", listen)
	}

	// The same without the cluster's bookkeeping, until closed.
	own := netip.MustParseAddrPort("127.0.0.1:6444")
	f, err := Forward(n.NetNS, own, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echo(own); err != nil || got != "ping" {
		t.Fatalf("echo through Forward: %q, %v", got, err)
	}
	f.Close()
	if _, err := echo(own); err == nil {
		t.Errorf("%s still forwards after Close", own)
	}
}

// netnsList returns the names `ip netns list` shows (exact names: a substring test would take
// another process's nftp-ul3ccc11 for this one's nftp-ul3ccc1).
func netnsList(t *testing.T) map[string]bool {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names[f[0]] = true
		}
	}
	return names
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	testenv.RequireRoot(t)
	c, err := New(context.Background(), Config{Nodes: []string{"a", "b"}, External: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Node("b").Index != 1 || c.Node("b").PodCIDRs[0].String() != "10.244.1.0/24" ||
		c.Node("b").Underlay[1].String() != "fd00:172:31::2" || len(c.Nodes()) != 2 || c.Node("z") != nil {
		t.Errorf("node addressing: %+v", c.Node("b"))
	}
	if got := c.External().Addrs; got[0].String() != "172.31.0.200" || got[1].String() != "fd00:172:31::200" {
		t.Errorf("external host addresses: %v", got)
	}

	start := time.Now()
	var pods []*Pod
	for i := 0; i < 10; i++ {
		p, err := c.AddPod([]string{"a", "b"}[i%2], "y", "p"+string(rune('0'+i)))
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	t.Logf("10 pods in %v", time.Since(start))
	// Concurrent AddPod calls get distinct addresses and interfaces, and all connect.
	var wg sync.WaitGroup
	more := make([]*Pod, 4)
	for i := range more {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.AddPod("b", "z", fmt.Sprintf("c%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			if err := c.Serve(p.NetNS, TCP, 80); err != nil {
				t.Error(err)
			}
			more[i] = p
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	seen := map[string]bool{}
	for _, p := range append(append([]*Pod(nil), pods...), more...) {
		for _, k := range []string{p.Addrs[0].String(), p.Addrs[1].String(), p.Node + "/" + p.HostIface} {
			if seen[k] {
				t.Errorf("%s used twice", k)
			}
			seen[k] = true
		}
	}
	got, err := c.ProbeMatrix(context.Background(), more, TCP, 80, true, probeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	for k, ok := range got {
		if !ok {
			t.Errorf("%s -> %s blocked between concurrently added pods", k[0], k[1])
		}
	}
	pods = append(pods, more...)
	if got := pods[2].Addrs; got[0].String() != "10.244.0.3" || got[1].String() != "fd00:10:244::3" {
		t.Errorf("third pod (second on node a) addresses: %v", got)
	}
	if len(pods[0].HostIface) > 15 || !strings.HasPrefix(pods[0].HostIface, "nftp") {
		t.Errorf("host interface name %q", pods[0].HostIface)
	}
	fd, err := c.Node("a").FD()
	if err != nil {
		t.Fatal(err)
	}
	os.NewFile(uintptr(fd), "netns").Close()

	// DeletePod removes the namespace, the veth and the node's routes.
	del := pods[0]
	if err := c.Serve(del.NetNS, TCP, 80); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePod(del); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(nsPath(del.NetNS)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pod namespace %s still there: %v", del.NetNS, err)
	}
	out, err := Exec(context.Background(), c.Node("a").NetNS, "ip", "addr")
	if err != nil {
		t.Fatal(err)
	}
	routes, err := Exec(context.Background(), c.Node("a").NetNS, "ip", "route")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), del.HostIface) || strings.Contains(string(routes), del.IP(false).String()+" ") {
		t.Errorf("node a still has the deleted pod's link or route:\n%s\n%s", out, routes)
	}
	if err := c.DeletePod(del); err != nil {
		t.Errorf("second DeletePod: %v", err)
	}

	names := []string{c.underlay, c.Node("a").NetNS, c.Node("b").NetNS, c.External().NetNS}
	names = append(names, nsNames(pods[1:])...)
	list := netnsList(t)
	for _, n := range names {
		if !list[n] {
			t.Errorf("namespace %s missing before Close", n)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	list = netnsList(t)
	for _, n := range append(names, del.NetNS) {
		if list[n] {
			t.Errorf("namespace %s left after Close", n)
		}
	}
	if _, err := c.AddPod("a", "y", "late"); err == nil {
		t.Error("AddPod after Close succeeded")
	}
}
