package bench_test

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// packetPath is P1's topology: a node namespace routing between a server pod (TCP 80 and 8080,
// accepting and closing) and 4 client pods.
type packetPath struct {
	node    *netnsHandle
	server  *pod
	clients []*pod
}

const (
	allowedPort = 80   // the port every policy allows
	deniedPort  = 8080 // a port no policy allows: proves the table is consulted
	felixTable  = "chainperpolicy"
)

func newPacketPath(b *testing.B) *packetPath { return newPacketPathOn(b, false) }

// newPacketPathOn is P1's topology with the pods routed (a veth and host route each) or, bridged,
// on one bridge of the node (the server and clients then talk bridged, through br_netfilter).
func newPacketPathOn(b *testing.B, bridged bool) *packetPath {
	b.Helper()
	pp := &packetPath{node: newNode(b)}
	attach := addPod
	if bridged {
		addBridge(b, pp.node)
		attach = addBridgedPod
	}
	pp.server = attach(b, pp.node, "bs", netip.MustParseAddr("10.240.0.1"))
	for i := range 4 {
		pp.clients = append(pp.clients, attach(b, pp.node, "bc", netip.AddrFrom4([4]byte{10, 240, 1, byte(i + 1)})))
	}
	// The server's accept queue must outlast a pause of its accepting goroutines (this
	// process's collector, or the clients holding both Ps): with Go's backlog (the root
	// namespace's somaxconn, 4096 here) it overflows in most runs (TcpExtListenOverflows counts
	// it), and every SYN it drops stalls its client for the 1 s retransmission, often all four
	// at once, so that whole measuring windows count no connection.
	run(b, "ip", "netns", "exec", pp.server.name, "sysctl", "-qw", fmt.Sprintf("net.core.somaxconn=%d", serverBacklog))
	for _, port := range []int{allowedPort, deniedPort} {
		var ln net.Listener
		err := pp.server.do(func() (err error) {
			ln, err = listenBacklog(port, serverBacklog)
			return err
		})
		if err != nil {
			b.Fatalf("server listen on %d: %v", port, err)
		}
		b.Cleanup(func() { ln.Close() })
		for range 2 {
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						if errors.Is(err, net.ErrClosed) {
							return
						}
						continue
					}
					c.(*net.TCPConn).SetLinger(0)
					c.Close()
				}
			}()
		}
	}
	return pp
}

const serverBacklog = 65535

// listenBacklog listens on TCP port of every IPv4 address of the calling thread's namespace with
// the given accept backlog (net.Listen takes the process's first-read somaxconn).
func listenBacklog(port, backlog int) (net.Listener, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("listener :%d", port))
	defer f.Close() // FileListener keeps its own copy
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		return nil, err
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return nil, err
	}
	return net.FileListener(f)
}

// connect opens one TCP connection from the calling thread's namespace to addr:port and resets
// it at once (SO_LINGER 0: no TIME_WAIT on either side), giving up after timeout.
func connect(addr netip.Addr, port int, timeout time.Duration) (time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return 0, err
	}
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		return 0, err
	}
	t0 := time.Now()
	err = unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: addr.As4()})
	if err == unix.EINTR { // the runtime's preemption signal: the handshake goes on, wait for it
		err = waitConnected(fd, t0.Add(timeout))
	}
	return time.Since(t0), err
}

// waitConnected waits until a connect in progress on fd completes or deadline passes.
func waitConnected(fd int, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, int(left/time.Millisecond)+1)
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return err
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
}

// rate is one measurement: connections per second over the run, the connect latencies.
type rate struct {
	perSec float64
	p50    time.Duration
	lats   []time.Duration // every connect's, sorted
	failed int
	err    error // the first failure
}

// measure runs the 4 clients in parallel for d (after a short warm-up) and counts connections.
func (pp *packetPath) measure(b *testing.B, d time.Duration) rate {
	b.Helper()
	var (
		mu    sync.Mutex
		lats  []time.Duration
		fails int
		first error
		wg    sync.WaitGroup
		errs  = make(chan error, len(pp.clients))
	)
	start := time.Now().Add(200 * time.Millisecond)
	end := start.Add(d)
	for _, c := range pp.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			var firstErr error
			failed := 0
			errs <- c.do(func() error {
				for now := time.Now(); now.Before(end); now = time.Now() {
					lat, err := connect(pp.server.addr, allowedPort, time.Second)
					if now.Before(start) {
						continue
					}
					if err != nil {
						if failed++; firstErr == nil {
							firstErr = err
						}
						continue
					}
					mine = append(mine, lat)
				}
				return nil
			})
			mu.Lock()
			lats, fails = append(lats, mine...), fails+failed
			if firstErr != nil && first == nil {
				first = firstErr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return rate{perSec: float64(len(lats)) / d.Seconds(), p50: percentile(lats, 50), lats: lats, failed: fails, err: first}
}

// measureClean is measure, repeated once when more than 0.1% of the connections failed: a
// connect that times out (1 s) is a lost SYN — on this machine now and then conntrack finds a
// reused port's old entry in a state where the new SYN is invalid, and the table drops invalid
// packets — which costs a client a whole second; twice in a row means the table drops what it
// should allow.
func (pp *packetPath) measureClean(b *testing.B, d time.Duration) rate {
	b.Helper()
	for try := 0; ; try++ {
		m := pp.measure(b, d)
		total := m.perSec*d.Seconds() + float64(m.failed)
		if float64(m.failed) <= total/1000 {
			return m
		}
		out, _ := exec.Command("ip", "netns", "exec", pp.node.name, "conntrack", "-S").CombinedOutput()
		if try == 1 {
			b.Fatalf("%d of %.0f connections failed, first: %v\nconntrack -S in the node:\n%s", m.failed, total, m.err, out)
		}
		b.Logf("%d of %.0f connections failed (first: %v); measuring again. conntrack -S in the node:\n%s", m.failed, total, m.err, out)
	}
}

// check proves the programmed table decides: the allowed port always connects; the denied port
// connects only while the server is not judged by policies (isolated false).
func (pp *packetPath) check(b *testing.B, shape string, n int, isolated bool) {
	b.Helper()
	err := pp.clients[0].do(func() error {
		if _, err := connect(pp.server.addr, allowedPort, 2*time.Second); err != nil {
			return fmt.Errorf("%s, %d policies: client to server:%d failed: %v", shape, n, allowedPort, err)
		}
		_, err := connect(pp.server.addr, deniedPort, 300*time.Millisecond)
		if isolated && err == nil {
			return fmt.Errorf("%s, %d policies: client reached server:%d, which no policy allows", shape, n, deniedPort)
		}
		if !isolated && err != nil {
			return fmt.Errorf("%s, %d policies, server not judged: client to server:%d failed: %v", shape, n, deniedPort, err)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// endpoints returns the model endpoints of the server and clients.
func (pp *packetPath) endpoints(node string) (model.Endpoint, []model.Endpoint) {
	ep := func(p *pod, name string) model.Endpoint {
		return model.Endpoint{Key: model.EndpointKey{Name: name}, Node: node, Addrs: []netip.Addr{p.addr}}
	}
	var cs []model.Endpoint
	for i, c := range pp.clients {
		cs = append(cs, ep(c, fmt.Sprintf("client-%d", i)))
	}
	return ep(pp.server, "server"), cs
}

// shape programs one ruleset design for n policies into the node namespace and switches the
// server between judged by them (on) and not judged at all (off: the packet meets the table's
// conntrack rules and, for nftpolicy, a dispatch lookup that misses) — the N = 0 baseline,
// measured right beside each N-policy measurement with the rest of the table unchanged.
type shape interface {
	name() string
	program(b *testing.B, n int)
	judge(b *testing.B, on bool)
}

// policyAPI is the API P1's policies are written in, for ourTable.
type policyAPI int

const (
	apiNetworkPolicy policyAPI = iota // scale.PacketPathPolicies
	apiClusterPolicy                  // scale.PacketPathClusterPolicies
	apiCalico                         // calicoPacketPath: Calico policies in 10 tiers, through the converters
)

// ourTable is nftpolicy's table, built by the graph and the nft builder, for P1's policies
// written in api.
type ourTable struct {
	pp     *packetPath
	api    policyAPI
	g      *graph.Graph
	dp     *kernel.Applier
	server model.Endpoint
}

const benchNode = "node-bench"

func (o *ourTable) name() string {
	switch o.api {
	case apiClusterPolicy:
		return "nftpolicy-cnp"
	case apiCalico:
		return "nftpolicy-calico"
	}
	return "nftpolicy"
}

// program replaces the node's tables with nftpolicy's for n policies (graph + a fresh
// applier: one transaction). A decoy local endpoint with the server's labels keeps the
// policies active when the server is switched off. The Calico table has deny logging on
// (calicoDenyLog), so that its Log rules are in it.
func (o *ourTable) program(b *testing.B, n int) {
	b.Helper()
	o.pp.dropTable(b, felixTable)
	server, clients := o.pp.endpoints(benchNode)
	var ups []model.Update
	var cfg nft.Config
	switch o.api {
	case apiNetworkPolicy:
		ups = scale.PacketPathPolicies(n, server, clients...).Updates
	case apiClusterPolicy:
		ups = scale.PacketPathClusterPolicies(n, server, clients...).Updates
	case apiCalico:
		ups, cfg.DenyLog = calicoPacketPath(b, n, server, clients...).Updates, calicoDenyLog
	}
	o.g = graph.New(graph.Config{NodeName: benchNode})
	for _, u := range ups {
		if e, ok := u.(model.EndpointSet); ok && e.Endpoint.Key.Name == server.Key.Name {
			o.server = e.Endpoint
			decoy := e.Endpoint
			decoy.Key.Name, decoy.Addrs = "server-decoy", []netip.Addr{netip.MustParseAddr("10.240.0.99")}
			o.g.OnUpdate(model.EndpointSet{Endpoint: decoy})
		}
		o.g.OnUpdate(u)
	}
	dp, err := kernel.Open(o.pp.node.fd, cfg)
	if err != nil {
		b.Fatal(err)
	}
	o.dp = dp
	b.Cleanup(func() { dp.Close() })
	if err := dp.Apply(o.g.Flush()); err != nil {
		b.Fatalf("programming %d policies: %v", n, err)
	}
	// up to 8 allow rules the server's group is listed (rules over shared sets), above the map
	// shape: the benchmark measures both; Deny and Pass rules take the map shape
	if listed, want := strings.Contains(dp.Render(), "@sel_"), n <= 8 && o.api == apiNetworkPolicy; listed != want {
		b.Fatalf("%d policies: the server's group listed = %v, want %v", n, listed, want)
	}
}

// judge relabels the server in or out of the policies' selector: one dispatch element.
func (o *ourTable) judge(b *testing.B, on bool) {
	e := o.server
	if !on {
		e.Labels = model.LabelsOf(map[string]string{"role": "server-off"})
	}
	o.g.OnUpdate(model.EndpointSet{Endpoint: e})
	if err := o.dp.Apply(o.g.Flush()); err != nil {
		b.Fatal(err)
	}
}

// chainTable is the chain-per-policy design, written with nft -f: one named set per selector,
// one chain per policy (`ip saddr @set tcp dport 80 accept`), jumped in order from the server's
// chain, which ends in drop.
type chainTable struct{ pp *packetPath }

func (c *chainTable) name() string { return "chain-per-policy" }

func (c *chainTable) program(b *testing.B, n int) {
	b.Helper()
	pp := c.pp
	pp.dropTable(b, nft.DefaultTable)
	server, clients := pp.endpoints(benchNode)
	peers := scale.PacketPathPolicies(n, server, clients...).Peers
	var s strings.Builder
	fmt.Fprintf(&s, "table inet %s\ndelete table inet %s\ntable inet %s {\n", felixTable, felixTable, felixTable)
	for i, addrs := range peers {
		var v4 []string
		for _, a := range addrs {
			if a.Is4() {
				v4 = append(v4, a.String())
			}
		}
		fmt.Fprintf(&s, "\tset s%d {\n\t\ttype ipv4_addr\n\t\telements = { %s }\n\t}\n", i, strings.Join(v4, ", "))
		fmt.Fprintf(&s, "\tchain pol%d {\n\t\tip saddr @s%d tcp dport %d accept\n\t}\n", i, i, allowedPort)
	}
	s.WriteString("\tchain to_server {\n")
	for i := range n {
		fmt.Fprintf(&s, "\t\tjump pol%d\n", i)
	}
	s.WriteString("\t\tdrop\n\t}\n")
	s.WriteString("\tchain forward {\n\t\ttype filter hook forward priority 0; policy accept;\n\t}\n}\n")
	nftIn(b, pp.node, s.String())
}

// judge rewrites the forward base chain with or without the jump to the server's chain.
func (c *chainTable) judge(b *testing.B, on bool) {
	s := fmt.Sprintf("flush chain inet %[1]s forward\nadd rule inet %[1]s forward ct state established,related accept\n"+
		"add rule inet %[1]s forward ct state invalid drop\n", felixTable)
	if on {
		s += fmt.Sprintf("add rule inet %s forward ip daddr %s jump to_server\n", felixTable, c.pp.server.addr)
	}
	nftIn(b, c.pp.node, s)
}

func (pp *packetPath) dropTable(b *testing.B, name string) {
	nftIn(b, pp.node, fmt.Sprintf("table inet %s\ndelete table inet %s\n", name, name))
}

// median returns the median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 0 {
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return xs[len(xs)/2]
}

// ratioStat sums up the ratios of P1's rounds (each round measures the baseline and the variant
// back to back): their median, the figure; an interval that holds the true median with at least
// 95 % confidence (the k-th smallest and k-th largest ratio, k from the binomial distribution:
// the 4th and the 12th of 15 rounds, 96.5 %; it assumes nothing about how the noise is
// distributed); and the rounds' range. A median under a target whose interval reaches it is not
// told apart from the noise of the run; an interval wholly under it is.
type ratioStat struct {
	median, lo, hi, min, max float64
}

func ratioStats(ratios []float64) ratioStat {
	xs := slices.Clone(ratios)
	st := ratioStat{median: median(xs)} // sorts xs
	n := len(xs)
	if n == 0 {
		return st
	}
	st.min, st.max = xs[0], xs[n-1]
	// the largest k with P(Binomial(n, ½) < k) ≤ 2.5 %; below 6 rounds there is none (min–max)
	k, cdf, term := 0, 0.0, math.Pow(0.5, float64(n)) // term: P(X = i)
	for i := 0; i < n/2; i++ {
		if cdf += term; cdf > 0.025 {
			break
		}
		k = i + 1
		term *= float64(n-i) / float64(i+1)
	}
	st.lo, st.hi = xs[max(k-1, 0)], xs[n-max(k, 1)]
	return st
}

// String is the median with its interval and the rounds' range.
func (st ratioStat) String() string {
	return fmt.Sprintf("%.2f× [%.2f–%.2f]", st.median, st.lo, st.hi)
}

// verdict tells a median at or over target ("yes") from one under it whose interval still reaches
// it (within the run's noise) and from an interval wholly under it (a real shortfall).
func (st ratioStat) verdict(target float64) string {
	switch {
	case st.median >= target:
		return "yes"
	case st.hi >= target:
		return "NO (within noise: interval reaches it)"
	}
	return "NO"
}

// connectPercentiles is "p50/p90/p99 µs" of sorted connect latencies.
func connectPercentiles(lats []time.Duration) string {
	return fmt.Sprintf("%.0f/%.0f/%.0f µs", us(percentile(lats, 50)), us(percentile(lats, 90)), us(percentile(lats, 99)))
}

// BenchmarkPacketPath is P1: new TCP connections/s from 4 client pods into a server pod
// through the node namespace, with N policies selecting the server (the clients allowed only by
// the last), for nftpolicy's table and for the chain-per-policy table in the same run. Each N is
// measured in rounds: the server not judged (the N = 0 baseline of the same table), then judged
// by the N policies, 15 times 300 ms each; the figure is the median of the rounds' ratios,
// which cancels most of the load other processes put on the machine, with its interval
// (ratioStat: the 4th to the 12th smallest of the 15 ratios) and the rounds' range, beside the
// p50/p90/p99 connect latency of all rounds' connections, judged and not. (With a few long rounds,
// or the server's accept queue at Go's default, the figure at 1,000 policies swings by a factor
// of several between runs of the same code: see listenBacklog's caller.)
// BenchmarkPacketPathBridge measures the packet path as BenchmarkPacketPath does, with the server
// and its clients on one bridge of the node, so every connection is bridged and judged in the
// inet table through br_netfilter: nftpolicy's table at 1,000 and 10,000 policies (1,000 with
// BENCH_QUICK) against the same table with the server not judged.
func BenchmarkPacketPathBridge(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	ns := []int{1000, 10000}
	d, rounds := 300*time.Millisecond, 15
	if quick {
		ns = []int{1000}
	}
	pp := newPacketPathOn(b, true)
	sh := &ourTable{pp: pp}
	for _, n := range ns {
		b.Run(fmt.Sprintf("nftpolicy-bridge/policies=%d", n), func(b *testing.B) {
			setStage(fmt.Sprintf("P1 bridge, %d policies: programming", n))
			sh.program(b, n)
			setStage(fmt.Sprintf("P1 bridge, %d policies: measuring", n))
			var on, off, ratios []float64
			var onLats, offLats []time.Duration
			for r := range rounds {
				sh.judge(b, false)
				if r == 0 {
					pp.check(b, "nftpolicy-bridge", n, false)
				}
				base := pp.measureClean(b, d)
				sh.judge(b, true)
				if r == 0 {
					pp.check(b, "nftpolicy-bridge", n, true)
				}
				judged := pp.measureClean(b, d)
				on, off = append(on, judged.perSec), append(off, base.perSec)
				ratios = append(ratios, judged.perSec/base.perSec)
				onLats, offLats = append(onLats, judged.lats...), append(offLats, base.lats...)
			}
			ratio := ratioStats(ratios)
			report.add(row{"P1", fmt.Sprintf("%5d policies select the server, server and clients on one bridge: conn/s ratio to N=0 [its ≥ 95 %% interval]", n),
				fmt.Sprintf("%v (%.0f vs %.0f conn/s; rounds %.2f–%.2f×; connect p50/p90/p99 %s, N=0 %s)",
					ratio, median(on), median(off), ratio.min, ratio.max, connectPercentiles(onLats), connectPercentiles(offLats)),
				"≥ 0.95×", ratio.verdict(0.95)})
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(on), "conn/s")
			b.ReportMetric(median(off), "conn/s-N=0")
			b.ReportMetric(ratio.median, "ratio")
		})
	}
}

func BenchmarkPacketPath(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	ns := []int{8, 100, 1000, 10000} // 8: the most rules a listed group walks (internal/nft/list.go)
	d, rounds := 300*time.Millisecond, 15
	if quick {
		ns = []int{1000}
	}
	pp := newPacketPath(b)
	type result struct {
		on, off    float64 // median rates, conn/s
		ratio      ratioStat
		onLatency  string // connect percentiles over the rounds, judged
		offLatency string // and not judged
	}
	results := map[string]map[int]result{}
	shapes := []shape{&chainTable{pp: pp}, &ourTable{pp: pp}, &ourTable{pp: pp, api: apiClusterPolicy}, &ourTable{pp: pp, api: apiCalico}}
	// addRow puts N's line in the summary as soon as a shape has been measured, so a run ended
	// early (RSS watchdog) still shows what it measured; an N no shape measured (-bench filtered
	// it out) has no line.
	addRow := func(n int) {
		if !slices.ContainsFunc(shapes, func(sh shape) bool { _, ok := results[sh.name()][n]; return ok }) {
			return
		}
		cell := func(name string) (string, ratioStat) {
			r, ok := results[name][n]
			if !ok {
				return "not measured", ratioStat{}
			}
			return fmt.Sprintf("%v (%.0f vs %.0f conn/s; rounds %.2f–%.2f×; connect p50/p90/p99 %s, N=0 %s)",
				r.ratio, r.on, r.off, r.ratio.min, r.ratio.max, r.onLatency, r.offLatency), r.ratio
		}
		if _, ok := results["nftpolicy-cnp"][n]; ok {
			cnp, ratio := cell("nftpolicy-cnp")
			report.add(row{"P1", fmt.Sprintf("%5d ClusterNetworkPolicies (admin and baseline, priorities 0–1000, Deny/Pass/Accept) select the server: conn/s ratio to N=0 [its ≥ 95 %% interval]", n),
				cnp, "≥ 0.95×", ratio.verdict(0.95)})
		}
		if _, ok := results["nftpolicy-calico"][n]; ok {
			calico, ratio := cell("nftpolicy-calico")
			report.add(row{"P1", fmt.Sprintf("%5d Calico policies (GlobalNetworkPolicy and NetworkPolicy, 10 tiers, Allow/Deny/Pass/Log, --log-denied) select the server: conn/s ratio to N=0 [its ≥ 95 %% interval]", n),
				calico, "≥ 0.95×", ratio.verdict(0.95)})
		}
		if _, ok := results["nftpolicy"][n]; !ok {
			if _, ok := results["chain-per-policy"][n]; !ok {
				return
			}
		}
		ours, ratio := cell("nftpolicy")
		theirs, _ := cell("chain-per-policy")
		target, verdict := "", ""
		if n >= 1000 {
			target, verdict = "nftpolicy ≥ 0.95×", ratio.verdict(0.95)
		}
		what := fmt.Sprintf("%5d policies select the server: conn/s ratio to N=0 [its ≥ 95 %% interval] — nftpolicy ‖ chain per policy", n)
		if n <= 8 {
			what += " (nftpolicy's listed shape: its rules walked over shared sets)"
		}
		report.add(row{"P1", what,
			ours + " ‖ " + theirs, target, verdict})
	}
	for _, n := range ns {
		for _, sh := range shapes {
			if o, ok := sh.(*ourTable); ok && o.api != apiNetworkPolicy && n < 1000 {
				continue // the ClusterNetworkPolicy and Calico rows: 1,000 and 10,000
			}
			b.Run(fmt.Sprintf("%s/policies=%d", sh.name(), n), func(b *testing.B) {
				setStage(fmt.Sprintf("P1 %s, %d policies: programming", sh.name(), n))
				sh.program(b, n)
				setStage(fmt.Sprintf("P1 %s, %d policies: measuring", sh.name(), n))
				var on, off, ratios []float64
				var onLats, offLats []time.Duration
				for r := range rounds {
					sh.judge(b, false)
					if r == 0 {
						pp.check(b, sh.name(), n, false)
					}
					base := pp.measureClean(b, d)
					sh.judge(b, true)
					if r == 0 {
						pp.check(b, sh.name(), n, true)
					}
					judged := pp.measureClean(b, d)
					on, off = append(on, judged.perSec), append(off, base.perSec)
					ratios = append(ratios, judged.perSec/base.perSec)
					onLats, offLats = append(onLats, judged.lats...), append(offLats, base.lats...)
				}
				res := result{on: median(on), off: median(off), ratio: ratioStats(ratios),
					onLatency: connectPercentiles(onLats), offLatency: connectPercentiles(offLats)}
				if results[sh.name()] == nil {
					results[sh.name()] = map[int]result{}
				}
				results[sh.name()][n] = res
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(res.on, "conn/s")
				b.ReportMetric(res.off, "conn/s-N=0")
				b.ReportMetric(res.ratio.median, "ratio")
				b.ReportMetric(res.ratio.lo, "ratio-lo")
				b.ReportMetric(res.ratio.hi, "ratio-hi")
				b.ReportMetric(us(percentile(onLats, 50)), "p50-connect-µs")
				b.ReportMetric(us(percentile(onLats, 99)), "p99-connect-µs")
			})
			addRow(n)
		}
	}
}
