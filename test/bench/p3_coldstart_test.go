package bench_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// coldSpec is P3's cluster: 100,000 pods in 1,000 namespaces, 5,000 policies, 250 local pods.
var coldSpec = scale.ColdStart()

const mib = 1 << 20

// BenchmarkColdStart is P3 and P4 in process, the dataplane's part of the cold start: the whole
// cluster (generated beforehand) fed to a fresh graph, its first flush applied by a fresh kernel.Applier
// to an empty node namespace — time of each stage, transactions (one), elements programmed; then
// the same cold start in a child process that streams the generated updates into the graph (so the
// input list is not held), reporting its peak RSS (VmHWM) and the Go heap the graph and dataplane
// retain. BenchmarkColdStartAPI measures the whole agent.
func BenchmarkColdStart(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	ups := scale.Generate(coldSpec)
	node := newNetns(b, "bc")
	runtime.GC()

	setStage("P3 cold start")
	t0 := time.Now()
	g := graph.New(graph.Config{NodeName: coldSpec.Node})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	msgs := g.Flush()
	t1 := time.Now()
	dp, err := kernel.Open(node.fd, nft.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	if err := dp.Apply(msgs); err != nil {
		st, _ := dp.Stats()
		report.add(row{"P3", "first full Applier.Apply in process",
			fmt.Sprintf("FAILED after %.2f s (graph %.2f s): %v; desired table: %d elements, %d chains, %d sets",
				time.Since(t0).Seconds(), t1.Sub(t0).Seconds(), err, st.Elements, st.Chains, st.Sets),
			"1 transaction, ≤ 1 s", "NO"})
		b.Fatalf("first full apply: %v", err)
	}
	t2 := time.Now()
	st, tx := dp.Stats()

	// The kernel holds what the dataplane says it committed.
	out := run(b, "ip", "netns", "exec", node.name, "nft", "list", "chains", "inet") // only our table lives here
	if got := strings.Count(out, "chain "); got != st.Chains {
		b.Fatalf("kernel lists %d chains, the dataplane committed %d", got, st.Chains)
	}
	// …and every set and element of it (read back and compared, outside the timed part)
	if drift, err := dp.Resync(); err != nil || drift {
		b.Fatalf("the kernel's table differs from the committed one: drift=%v err=%v", drift, err)
	}

	graphT, applyT, total := t1.Sub(t0), t2.Sub(t1), t2.Sub(t0)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(total)/1e6, "ms/cold-start")
	b.ReportMetric(float64(applyT)/1e6, "ms/apply")
	b.ReportMetric(float64(tx), "transactions")
	b.ReportMetric(float64(st.Elements), "elements")
	scaleDesc := fmt.Sprintf("%d pods, %d policies, %d local pods", coldSpec.Pods, coldSpec.Policies, coldSpec.LocalPods)
	report.add(row{"P3", "first full Applier.Apply in process (" + scaleDesc + "): compile + one transaction",
		fmt.Sprintf("%.2f s (graph before it %.2f s; both %.2f s)", applyT.Seconds(), graphT.Seconds(), total.Seconds()),
		"≤ 1 s", meets(applyT <= time.Second)})
	report.add(row{"P3", "transactions of the first full apply; elements, chains, sets programmed",
		fmt.Sprintf("%d; %d elements, %d chains, %d sets (no ENOBUFS)", tx, st.Elements, st.Chains, st.Sets),
		"1 transaction", meets(tx == 1)})
	ups, msgs, g = nil, nil, nil

	// P4 in a child process: a clean peak RSS.
	mem := childColdStartMemory(b)
	b.ReportMetric(float64(mem.PeakRSS)/mib, "peak-RSS-MiB")
	b.ReportMetric(float64(mem.HeapRetained)/mib, "retained-heap-MiB")
	report.add(row{"P4", "peak RSS of a process doing the in-process cold start (graph + dataplane, input streamed): VmHWM",
		fmt.Sprintf("%.0f MiB (Go heap retained after GC %.0f MiB; RSS before the graph %.0f MiB)",
			float64(mem.PeakRSS)/mib, float64(mem.HeapRetained)/mib, float64(mem.RSSBefore)/mib),
		"", ""})
}

// childMemory is what the P4 child process reports.
type childMemory struct {
	PeakRSS, RSSBefore, HeapRetained uint64
	Transactions                     uint64
	Elements                         int
}

const childEnv = "NFTP_BENCH_P4_NETNS"

// childColdStartMemory runs TestColdStartMemoryChild in a child process on a fresh namespace.
func childColdStartMemory(b *testing.B) childMemory {
	node := newNetns(b, "bm")
	var m childMemory
	runChild(b, "TestColdStartMemoryChild", childEnv+"="+node.name, "P4RESULT", &m)
	if m.Transactions != 1 || m.Elements == 0 {
		b.Fatalf("P4 child committed %d elements in %d transactions", m.Elements, m.Transactions)
	}
	return m
}

// runChild runs test (one of this package's child tests) in a process of its own with env set
// (and measuredEnv's), and decodes the JSON it prints on the line starting with prefix into out.
// The child is this test binary: the in-process P4 row's process.
func runChild(b *testing.B, test, env, prefix string, out any) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.bench=^$", "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), env), measuredEnv(false)...)
	text, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", test, err, text)
	}
	if os.Getenv("NFTP_BENCH_CHILD_LOG") != "" {
		os.Stderr.Write(text) // whole: a benchmark's log is cut after a few lines
	}
	for _, line := range strings.Split(string(text), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix+" "); ok {
			if err := json.Unmarshal([]byte(v), out); err != nil {
				b.Fatalf("%s: result %q: %v", test, v, err)
			}
			return
		}
	}
	b.Fatalf("%s printed no %s line:\n%s", test, prefix, text)
}

// measuredEnv is what a process under measurement that the benchmarks start adds to their
// environment. It runs without the memory profiler's sampling unless sampleHeap, as the product
// binary does: the product links no runtime.MemProfile, so the linker turns sampling off from its
// start, while testing imports runtime/pprof and a test binary samples, which costs it 1.4 MiB of
// profile buckets (GODEBUG memprofilerate=0). NFTP_BENCH_CHILD_GOGC and _GOMEMLIMIT set its GOGC
// and GOMEMLIMIT alone, not the API server's.
func measuredEnv(sampleHeap bool) []string {
	var env []string
	if !sampleHeap {
		godebug := "memprofilerate=0"
		if s := os.Getenv("GODEBUG"); s != "" {
			godebug = s + "," + godebug
		}
		env = append(env, "GODEBUG="+godebug)
	}
	for _, v := range []string{"GOMEMLIMIT", "GOGC"} {
		if s := os.Getenv("NFTP_BENCH_CHILD_" + v); s != "" {
			env = append(env, v+"="+s)
		}
	}
	return env
}

// TestColdStartMemoryChild is BenchmarkColdStart's P4 child; it does nothing unless started by
// it (with the namespace to program in NFTP_BENCH_P4_NETNS).
func TestColdStartMemoryChild(t *testing.T) {
	name := os.Getenv(childEnv)
	if name == "" {
		return
	}
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rss0 := procStatus("VmRSS")
	g := graph.New(graph.Config{NodeName: coldSpec.Node})
	for u := range scale.Updates(coldSpec) {
		g.OnUpdate(u)
	}
	dp, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st, tx := dp.Stats()
	res, _ := json.Marshal(childMemory{
		PeakRSS: procStatus("VmHWM"), RSSBefore: rss0,
		HeapRetained: after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc),
		Transactions: tx, Elements: st.Elements,
	})
	runtime.KeepAlive(g)
	fmt.Printf("P4RESULT %s\n", res)
}
