package agent

import (
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	gosync "sync"
)

// The agent's memory grows with the cluster's pods (docs/operating.md), and Go's defaults suit it
// badly: the collector lets the heap grow to twice what is live before collecting (GOGC=100), and
// in a container with a memory limit the runtime does not know the limit, so that headroom can
// cross it and get the agent killed while most of the heap is garbage. TuneGoRuntime, unless
// the operator's own GOGC or GOMEMLIMIT says otherwise:
//   - collects when the heap has grown 40% over what is live (Felix's default goGCThreshold,
//     for the same reason): a lower peak RSS for a little more collector work (BENCHMARKS.md
//     gives the command that measures the agent under GOGC=100);
//   - sets the soft memory limit to 90% of the container's (cgroup v2 memory.max, or v1
//     memory.limit_in_bytes): the collector works harder as the heap nears the limit instead;
//   - until the first full commit (endStartup), collects at Go's 100% under a soft memory limit of
//     StartupMemory instead. A cold start builds the whole state from nothing: at 40% the heap is
//     collected at 1.4×, 1.4²×, … of a few MiB on its way to the whole state, each collection
//     scanning all that is live then, on the cores the API server needs to answer the list. The
//     limit keeps the peak where 40% puts it for a cluster of 100,000 pods (BENCHMARKS.md, the
//     agent's peak RSS). It is never tighter than 40% over what is live: after each collection (a
//     cleanup, runtime.AddCleanup, runs once per collection) it is raised to what 40% would let the
//     process reach, so a larger cluster is collected as after the start, not over and over at the
//     limit. In a container it is at most the container's limit above. An operator's GOGC or
//     GOMEMLIMIT turns it off.

// GCPercent is the GOGC the agent runs with unless GOGC is set.
const GCPercent = 40

// startupGCPercent is the GOGC before the first full commit (Go's default).
const startupGCPercent = 100

// StartupMemory is the soft memory limit (the Go runtime's memory, not the binary's resident
// pages) before the first full commit: about what 40% over the live heap comes to for a cluster
// of 100,000 pods (docs/operating.md).
const StartupMemory = 104 << 20

// RenderMemory is `nftpolicy render`'s soft memory limit (the Go runtime's memory): render builds
// the whole table once and holds the builder's state at its end, unlike the agent, whose limit
// after its first commit follows its live heap; BENCHMARKS.md's P7 bounds render's time under it.
const RenderMemory = 120 << 20

// TuneGoRuntime applies the settings above to this process and returns what it set, for the log,
// and endStartup, which ends the start-up's settings: call it at the first full commit
// (RunConfig.FirstCommit); later calls do nothing. getenv and readFile are os.Getenv and
// os.ReadFile outside tests.
func TuneGoRuntime(getenv func(string) string, readFile func(string) ([]byte, error)) (set []slog.Attr, endStartup func()) {
	endStartup = func() {}
	limit := int64(math.MaxInt64) // the limit after the start-up
	if getenv("GOMEMLIMIT") == "" {
		if lim, ok := cgroupMemoryLimit(readFile); ok {
			limit = goMemoryLimit(lim)
			debug.SetMemoryLimit(limit)
			set = append(set, slog.Int64("container_limit_bytes", lim), slog.Int64("go_memory_limit_bytes", limit))
		}
	}
	if getenv("GOGC") != "" {
		return set, endStartup
	}
	debug.SetGCPercent(GCPercent)
	set = append(set, slog.Int("gc_percent", GCPercent))
	if getenv("GOMEMLIMIT") != "" {
		return set, endStartup
	}
	s := &startup{limit: min(StartupMemory, limit), after: limit}
	set = append(set, slog.Int("startup_gc_percent", startupGCPercent), slog.Int64("startup_memory_limit_bytes", s.limit))
	debug.SetGCPercent(startupGCPercent)
	s.collected()
	return set, s.end
}

// startup holds the start-up's settings until end: startupGCPercent and a soft memory limit of
// at least limit, raised after each collection to what GCPercent would let the process reach,
// never above after, the limit that follows the start-up.
type startup struct {
	limit, after int64
	mu           gosync.Mutex
	ended        bool
}

// gcCycle is the object whose cleanup tells startup that a collection has run: not a tiny
// allocation (those share a block that may outlive the collection).
type gcCycle struct{ _ [2]*byte }

// collected sets the memory limit from what the last collection left live, and waits for the
// next one.
func (s *startup) collected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	debug.SetMemoryLimit(min(max(s.limit, floorLimit(readMemory())), s.after))
	runtime.AddCleanup(new(gcCycle), func(s *startup) { s.collected() }, s)
}

func (s *startup) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		debug.SetGCPercent(GCPercent)
		debug.SetMemoryLimit(s.after)
	}
}

// memory is the Go runtime's memory as its collector paces it.
type memory struct {
	live    uint64 // the heap marked live by the last collection
	scanned uint64 // live, stacks and globals: what GOGC's headroom is a percentage of
	other   uint64 // what the memory limit counts beside the heap's spans: stacks, metadata, …
	unused  uint64 // the heap's spans' fragmentation
}

func readMemory() memory {
	names := []string{"/gc/heap/live:bytes", "/gc/scan/stack:bytes", "/gc/scan/globals:bytes",
		"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/objects:bytes",
		"/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes"}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	heap := v[4] + v[5] + v[6] + v[7]
	m := memory{live: v[0], scanned: v[0] + v[1] + v[2], unused: v[6]}
	if v[3] > heap {
		m.other = v[3] - heap
	}
	return m
}

// floorLimit is the memory limit at which the collector would collect as GCPercent does: the heap
// GCPercent over what is live, its fragmentation and the runtime's other memory.
func floorLimit(m memory) int64 {
	return int64(min(m.live+m.scanned*GCPercent/100+m.unused+m.other, math.MaxInt64))
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
