package agent

import (
	"io/fs"
	"math"
	"runtime/debug"
	"testing"
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

// TestTuneGoRuntime: GOGC 40 and 90% of the container's limit, unless the environment sets them.
func TestTuneGoRuntime(t *testing.T) {
	oldGC := debug.SetGCPercent(100)
	oldLim := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(oldGC); debug.SetMemoryLimit(oldLim) })
	limited := func(name string) ([]byte, error) {
		if name == "/sys/fs/cgroup/memory.max" {
			return []byte("536870912\n"), nil
		}
		return nil, fs.ErrNotExist
	}
	for _, tc := range []struct {
		name      string
		env       map[string]string
		wantGC    int
		wantLimit int64
	}{
		{"defaults", nil, GCPercent, 483183819},
		{"operator's GOGC", map[string]string{"GOGC": "100"}, 100, 483183819},
		{"operator's GOMEMLIMIT", map[string]string{"GOMEMLIMIT": "1GiB"}, GCPercent, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			TuneGoRuntime(func(k string) string { return tc.env[k] }, limited)
			if got := debug.SetGCPercent(100); got != tc.wantGC {
				t.Errorf("GC percent %d, want %d", got, tc.wantGC)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
