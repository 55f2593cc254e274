package agent

import (
	"io/fs"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestCgroupMemoryLimit: the container's limit as cgroup v2 and v1 write it; no limit when the
// files say unlimited or are missing.
func TestCgroupMemoryLimit(t *testing.T) {
	const v2, v1 = "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"
	for _, tc := range []struct {
		name  string
		files map[string]string
		limit int64
		ok    bool
	}{
		{"v2 limit", map[string]string{v2: "536870912\n"}, 536870912, true},
		{"v2 unlimited", map[string]string{v2: "max\n", v1: "1048576\n"}, 0, false},
		{"v1 limit", map[string]string{v1: "1073741824\n"}, 1073741824, true},
		{"v1 unlimited", map[string]string{v1: "9223372036854771712\n"}, 0, false},
		{"no cgroup files", nil, 0, false},
		{"garbage", map[string]string{v2: "lots\n"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(name string) ([]byte, error) {
				if s, ok := tc.files[name]; ok {
					return []byte(s), nil
				}
				return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
			}
			limit, ok := cgroupMemoryLimit(read)
			if limit != tc.limit || ok != tc.ok {
				t.Errorf("cgroupMemoryLimit = %d, %v; want %d, %v", limit, ok, tc.limit, tc.ok)
			}
		})
	}
	if got := goMemoryLimit(512 << 20); got != 483183819 {
		t.Errorf("goMemoryLimit(512 MiB) = %d, want 90%%", got)
	}
}

// TestTuneGoRuntime: GOGC 40 and 90% of the container's limit, unless the environment sets them;
// until endStartup, GOGC 100 under a limit of StartupMemory (at most the container's).
func TestTuneGoRuntime(t *testing.T) {
	keepGoRuntimeSettings(t)
	container := func(limit string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if name == "/sys/fs/cgroup/memory.max" && limit != "" {
				return []byte(limit + "\n"), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	const none = math.MaxInt64
	for _, tc := range []struct {
		name             string
		env              map[string]string
		cgroup           string
		startGC, afterGC int   // GOGC during the start-up and after endStartup
		startLim, after  int64 // the memory limit during the start-up and after endStartup
	}{
		{"defaults", nil, "", 100, GCPercent, StartupMemory, none},
		{"container", nil, "536870912", 100, GCPercent, StartupMemory, 483183819},
		{"container below the start-up limit", nil, "67108864", 100, GCPercent, 60397974, 60397974},
		{"operator's GOGC", map[string]string{"GOGC": "100"}, "536870912", 100, 100, 483183819, 483183819},
		{"operator's GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "1GiB"}, "536870912", GCPercent, GCPercent, none, none},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(none)
			_, end := TuneGoRuntime(func(k string) string { return tc.env[k] }, container(tc.cgroup))
			t.Cleanup(end)
			if gc, lim := goRuntimeSettings(); gc != tc.startGC || lim != tc.startLim {
				t.Errorf("during the start-up: GOGC %d, memory limit %d; want %d, %d", gc, lim, tc.startGC, tc.startLim)
			}
			end()
			end() // a second call changes nothing
			if gc, lim := goRuntimeSettings(); gc != tc.afterGC || lim != tc.after {
				t.Errorf("after the start-up: GOGC %d, memory limit %d; want %d, %d", gc, lim, tc.afterGC, tc.after)
			}
		})
	}
}

// TestStartupLimitFollowsLiveHeap: with more live than the start-up limit leaves room for, the
// limit is raised after a collection to at least 40% over what is live; endStartup lifts it.
func TestStartupLimitFollowsLiveHeap(t *testing.T) {
	keepGoRuntimeSettings(t)
	_, end := TuneGoRuntime(func(string) string { return "" }, func(string) ([]byte, error) { return nil, fs.ErrNotExist })
	t.Cleanup(end)
	const live = StartupMemory + 40<<20
	held := make([][]byte, live>>20)
	for i := range held {
		held[i] = make([]byte, 1<<20)
	}
	want := int64(live + live*GCPercent/100)
	var lim int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		if _, lim = goRuntimeSettings(); lim >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("memory limit %d MiB with %d MiB live, want ≥ %d MiB", lim>>20, live>>20, want>>20)
		}
	}
	runtime.KeepAlive(held)
	end()
	if gc, lim := goRuntimeSettings(); gc != GCPercent || lim != math.MaxInt64 {
		t.Errorf("after the start-up: GOGC %d, memory limit %d; want %d, none", gc, lim, GCPercent)
	}
}

// keepGoRuntimeSettings sets GOGC 100 and no memory limit, and restores the process's settings
// when t ends. It collects first, so the live heap the start-up limit follows is this test's, not
// what an earlier test held.
func keepGoRuntimeSettings(t *testing.T) {
	runtime.GC()
	oldGC := debug.SetGCPercent(100)
	oldLim := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(oldGC); debug.SetMemoryLimit(oldLim) })
}

// goRuntimeSettings reads GOGC and the memory limit in force.
func goRuntimeSettings() (gcPercent int, limit int64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64()), int64(s[1].Value.Uint64())
}
