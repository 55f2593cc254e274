package main

import (
	"strconv"
	"strings"
)

// The agent's memory grows with the cluster's pods (docs/operating.md). In a container with a
// memory limit, the Go runtime does not know the limit and lets the heap grow to twice what is
// live before collecting, which can cross the limit and get the agent killed while most of that
// heap is garbage. So, unless GOMEMLIMIT is set, the runtime's soft memory limit is set to 90% of
// the container's (cgroup v2 memory.max, or v1 memory.limit_in_bytes): it collects harder as it
// nears the limit instead.

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
