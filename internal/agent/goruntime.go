package agent

import (
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"
)

// The agent's memory grows with the cluster's pods (docs/operating.md), and Go's defaults suit it
// badly: the collector lets the heap grow to twice what is live before collecting (GOGC=100), and
// in a container with a memory limit the runtime does not know the limit, so that headroom can
// cross it and get the agent killed while most of the heap is garbage. TuneGoRuntime, unless
// the operator's own GOGC or GOMEMLIMIT says otherwise:
//   - collects when the heap has grown 40% over what is live (Felix's default goGCThreshold,
//     for the same reason): at 100,000 pods the peak RSS falls by ≈ 30 MiB for a little more
//     collector work (BENCHMARKS.md);
//   - sets the soft memory limit to 90% of the container's (cgroup v2 memory.max, or v1
//     memory.limit_in_bytes): the collector works harder as the heap nears the limit instead.

// GCPercent is the GOGC the agent runs with unless GOGC is set.
const GCPercent = 40

// TuneGoRuntime applies the settings above to this process and returns what it set, for the log.
// getenv and readFile are os.Getenv and os.ReadFile outside tests.
func TuneGoRuntime(getenv func(string) string, readFile func(string) ([]byte, error)) []slog.Attr {
	var set []slog.Attr
	if getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
		set = append(set, slog.Int("gc_percent", GCPercent))
	}
	if getenv("GOMEMLIMIT") == "" {
		if lim, ok := cgroupMemoryLimit(readFile); ok {
			goLim := goMemoryLimit(lim)
			debug.SetMemoryLimit(goLim)
			set = append(set, slog.Int64("container_limit_bytes", lim), slog.Int64("go_memory_limit_bytes", goLim))
		}
	}
	return set
}

// cgroupMemoryLimit returns the memory limit of the cgroup the process runs in, read with
// readFile; ok is false without one ("max", a v1 value near 2^63, or no readable file).
func cgroupMemoryLimit(readFile func(string) ([]byte, error)) (limit int64, ok bool) {
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} { // v2 first
		b, err := readFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v <= 0 || v >= 1<<60 { // "max", or v1's "unlimited" (page-rounded 2^63-1)
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// goMemoryLimit is the soft memory limit to give the runtime for a container limit.
func goMemoryLimit(containerLimit int64) int64 { return containerLimit / 10 * 9 }
