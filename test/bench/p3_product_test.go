package bench_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// agentColdStart runs the product — cmd/nftpolicy as bin, the binary `make bench` builds — in
// the namespace netnsName, as a node runs it: its own process, reaching srv through a forwarder
// on the namespace's loopback (agentproc), with its default flags but for debug logs, then flags. It
// returns once the agent has logged its first commit: the time from starting the process to
// that record's timestamp, the process's peak RSS (VmHWM) and CPU then, its transactions and
// elements from its metrics, and the CPU time of the API server and etcd and the API server's
// collections meanwhile. With profiles asked for (prof), bin must be built with the tag
// nftpolicy_profile: the agent profiles its CPU from its start and writes the profiles right
// after its first commit.
func agentColdStart(b *testing.B, srv *kube.Server, bin, netnsName string, prof agentProfiles, flags ...string) (r agentResult, collections int) {
	fwd, err := netns.Forward(netnsName, netip.MustParseAddrPort(agentproc.APIAddr), strings.TrimPrefix(srv.URL, "https://"))
	if err != nil {
		b.Fatal(err)
	}
	defer fwd.Close()
	before := apiCollections(b, srv)
	apiCPU := func() (d time.Duration) {
		for _, pid := range srv.PIDs() {
			d += procCPU(pid)
		}
		return d
	}
	apiBefore := apiCPU()
	start := time.Now()
	p, err := agentproc.Start(agentproc.Config{Bin: bin, Node: coldSpec.Node, NetNS: netnsName, Server: srv, Dir: b.TempDir(),
		Args: append([]string{"--log-level", "debug", "--resync-interval", "1h"}, flags...), Env: prof.env()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			b.Errorf("stopping the agent: %v\n%s", err, p.Tail(4096))
		}
		if os.Getenv("NFTP_BENCH_CHILD_LOG") != "" {
			log, _ := os.ReadFile(p.LogPath)
			os.Stderr.Write(log) // whole: a benchmark's log is cut after a few lines
		}
	}()
	pid := p.Pid() // `ip netns exec` execs the agent: the same process
	var trace []string
	for log := (coldStartLog{}); log.applied.IsZero(); {
		if time.Since(start) > time.Minute {
			b.Fatalf("no commit within a minute:\n%s", p.Tail(4096))
		}
		time.Sleep(10 * time.Millisecond)
		if os.Getenv("NFTP_BENCH_CHILD_LOG") != "" { // how the resident memory grows
			trace = append(trace, fmt.Sprintf("%5d ms: VmRSS %3d MiB", time.Since(start).Milliseconds(), procField(pid, "VmRSS")>>20))
		}
		if log, err = readColdStartLog(p.LogPath); err != nil {
			b.Fatal(err)
		}
		r.FirstCommit, r.Apply = log.applied.Sub(start), log.apply
		if !log.inSync.IsZero() {
			r.InSync = log.inSync.Sub(start)
		}
	}
	r.PeakRSS, r.FilePages = procField(pid, "VmHWM"), procField(pid, "RssFile")
	r.CPU = procCPU(pid)
	r.APICPU = apiCPU() - apiBefore
	prof.collect(b, pid)
	_, page, err := p.Get(agentproc.MetricsURL)
	if err != nil {
		b.Fatalf("the agent's metrics: %v", err)
	}
	metric := func(name string) float64 {
		v, ok := testenv.MetricValue(page, name)
		if !ok {
			b.Fatalf("the agent's metrics have no %s", name)
		}
		return v
	}
	r.Transactions = int(metric("nftpolicy_transactions_total"))
	r.Elements = int(metric("nftpolicy_set_elements"))
	r.HeapInUse = uint64(metric("go_memstats_heap_inuse_bytes"))
	if len(trace) > 0 {
		fmt.Fprintf(os.Stderr, "the agent's resident memory until its first commit:\n%s\n", strings.Join(trace, "\n"))
	}
	return r, apiCollections(b, srv) - before
}

// agentProfiles are the files a profiled agent writes its CPU profile and its live heap to; ""
// for none.
type agentProfiles struct{ cpu, heap string }

// env is the agent's environment for them (cmd/nftpolicy/profile.go) and its measuredEnv.
func (p agentProfiles) env() []string {
	if p == (agentProfiles{}) {
		return nil
	}
	return append([]string{"NFTPOLICY_CPUPROFILE=" + p.cpu, "NFTPOLICY_HEAPPROFILE=" + p.heap}, measuredEnv(p.heap != "")...)
}

// collect has the agent of pid write its profiles (SIGUSR1) and waits, up to a minute, until
// they are in place.
func (p agentProfiles) collect(b *testing.B, pid int) {
	if p == (agentProfiles{}) {
		return
	}
	if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
		b.Fatalf("asking the agent for its profiles: %v", err)
	}
	for _, f := range []string{p.cpu, p.heap} {
		for deadline := time.Now().Add(time.Minute); f != ""; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(f); err == nil {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the agent wrote no profile %s within a minute", f)
			}
		}
	}
}

// coldStartLog is what the agent's JSON log tells of its cold start: when it was in sync (every
// initial list received), when it logged its first commit ("applied", logged after each commit),
// and how long that commit's apply took (the table's build and the kernel's transaction).
type coldStartLog struct {
	inSync, applied time.Time
	apply           time.Duration
}

// readColdStartLog reads the agent's log so far; applied is zero while it has logged no commit.
func readColdStartLog(logPath string) (coldStartLog, error) {
	var l coldStartLog
	f, err := os.Open(logPath)
	if err != nil {
		return l, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		var rec struct {
			Time     time.Time     `json:"time"`
			Msg      string        `json:"msg"`
			Duration time.Duration `json:"duration"` // slog's JSON: nanoseconds
		}
		if json.Unmarshal(s.Bytes(), &rec) != nil {
			continue
		}
		switch {
		case rec.Msg == "initial lists received; in sync" && l.inSync.IsZero():
			l.inSync = rec.Time
		case rec.Msg == "applied":
			l.applied, l.apply = rec.Time, rec.Duration
			return l, nil
		}
	}
	return l, s.Err()
}

// procField is a field of /proc/PID/status in bytes (0 when unreadable).
func procField(pid int, field string) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// procCPU is the user and system time of a process (0 when unreadable).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // after the command's name
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}
