package bench_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// quick is BENCH_QUICK=1: the two-minute subset.
var quick = os.Getenv("BENCH_QUICK") != ""

// row is one line of the summary table.
type row struct {
	id, figure, value, target, verdict string
}

// summary collects the rows the benchmarks add, in the order added, and prints them after the
// run. A benchmark function may run more than once (-count, b.N ramp-up): a row with the same id
// and figure replaces the earlier one.
type summary struct {
	mu   sync.Mutex
	rows []row
}

func (s *summary) add(r row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.rows {
		if s.rows[i].id == r.id && s.rows[i].figure == r.figure {
			s.rows[i] = r
			return
		}
	}
	s.rows = append(s.rows, r)
}

// report is the table TestMain prints.
var report summary

// meets renders a target check: "yes" or "NO".
func meets(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// stage names what the benchmarks are doing, for the RSS watchdog's message.
var stage atomic.Value

func setStage(s string) { stage.Store(s) }

func TestMain(m *testing.M) {
	stop := make(chan struct{})
	go watchRSS(stop)
	code := m.Run()
	close(stop)
	printSummary()
	os.Exit(code)
}

func printSummary() {
	report.mu.Lock()
	rows := append([]row(nil), report.rows...)
	report.mu.Unlock()
	if len(rows) > 0 {
		fmt.Print(renderSummary(rows))
	}
}

// watchRSS ends the process, with the summary so far, when its RSS passes BENCH_MAX_RSS_MIB
// (default 4096): the machine is shared, and a dataplane that blows up at some scale must not
// take it down. The row it adds says where it happened.
func watchRSS(stop <-chan struct{}) {
	limit := uint64(4096)
	if v, err := strconv.ParseUint(os.Getenv("BENCH_MAX_RSS_MIB"), 10, 64); err == nil && v > 0 {
		limit = v
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if rss := procStatus("VmRSS"); rss > limit*mib {
			where, _ := stage.Load().(string)
			report.add(row{"!!", "benchmark run aborted by the RSS watchdog",
				fmt.Sprintf("RSS %d MiB > %d MiB during: %s", rss/mib, limit, where), "", "NO"})
			printSummary()
			removeLiveNetns()
			fmt.Fprintf(os.Stderr, "aborting: RSS %d MiB > BENCH_MAX_RSS_MIB=%d during %s\n", rss/mib, limit, where)
			os.Exit(3)
		}
	}
}

func renderSummary(rows []row) string {
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	var b strings.Builder
	fmt.Fprintf(&b, "\n## nftpolicy benchmarks\n\nMachine: %s\n", machine())
	if quick {
		b.WriteString("Mode: BENCH_QUICK=1 (subset)\n")
	}
	b.WriteString("\n| id | figure | value | target | met |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.id, r.figure, r.value, r.target, r.verdict)
	}
	return b.String()
}

// machine describes the host: CPU count and model, kernel, nft and Go versions, and whether this
// binary was built with cgo, as the agent binary P3/P4 build is then too (the product is not:
// `make bench` builds both with CGO_ENABLED=0; with cgo the agent maps libc, ≈ 2 MiB more RSS).
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := "unknown kernel"
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = string(bytes.TrimRight(u.Release[:], "\x00"))
	}
	nftv := "nft missing"
	if out, err := exec.Command("nft", "--version").Output(); err == nil {
		nftv = strings.TrimSpace(string(out))
	}
	cgo := "CGO_ENABLED=?"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "CGO_ENABLED" {
				cgo = "CGO_ENABLED=" + s.Value
			}
		}
	}
	if cgo == "CGO_ENABLED=1" {
		cgo += " (the product is built without cgo: P4 reads ≈ 2 MiB high)"
	}
	return fmt.Sprintf("%d CPUs (%s), kernel %s, %s, %s, %s", runtime.NumCPU(), cpu, kernel, nftv, runtime.Version(), cgo)
}
