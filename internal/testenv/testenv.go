// Package testenv holds what every test on real parts needs: checks that fail loudly when the
// machine lacks root or a tool, and unique names for the kernel objects a test creates; and
// Choices, which turns a fuzzer's input into a random generator's choices.
//
// Subpackages build the local cluster harness: netns (nodes and pods as network namespaces,
// servers, the prober and truth tables) and kube (a real etcd and kube-apiserver on loopback).
// Everything they create is removed when the test ends, fails or panics; nothing ever touches the
// root network namespace.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// NetnsPrefix starts the name of every network namespace the harness and the tests create, so
// `make clean-netns` can remove leftovers of a killed run.
const NetnsPrefix = "nftp-"

// NameLogEnv names an environment variable: when it holds a file path, UniqueName appends each
// name it returns to that file, one per line. `make test` sets it so that its leak check looks
// at the namespaces of its own run only, not at those of another run on the same machine.
const NameLogEnv = "NFTPOLICY_NAME_LOG"

// RequireRoot fails the test (it never skips) when not running as root: tests on real parts must
// not pass silently on a machine that cannot run them.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatalf("this test needs root (network namespaces, nftables); run it as root, e.g. via `make test`")
	}
}

// RequireCommand fails the test when a command is missing from PATH.
func RequireCommand(tb testing.TB, names ...string) {
	tb.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			tb.Fatalf("this test needs %q on PATH (run `make deps`): %v", n, err)
		}
	}
}

// MetricValue is the value of one sample of a Prometheus text page, named as the page writes it:
// `name` or `name{label="value"}`; ok is false when the page has no such sample.
func MetricValue(page, sample string) (v float64, ok bool) {
	for line := range strings.Lines(page) {
		if s, found := strings.CutPrefix(line, sample+" "); found {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			return v, err == nil
		}
	}
	return 0, false
}

var seq atomic.Uint64

// UniqueName returns NetnsPrefix + tag + a suffix unique to this process and call: the pid as
// four hex digits (fixed width, so that pid 0x3cc with call 0xc1 and pid 0x3ccc with call 1 do
// not both give "3ccc1", which let parallel test packages collide) and the call's number. With
// a tag of 2 bytes it is short enough to serve as an interface name too.
//
// When the environment variable NameLogEnv names a file, the name is appended to it; a failure
// to write it panics, as a leak check that misses names would pass silently.
func UniqueName(tag string) string {
	n := seq.Add(1)
	name := fmt.Sprintf("%s%s%04x%x", NetnsPrefix, tag, os.Getpid()&0xffff, n)
	if path := os.Getenv(NameLogEnv); path != "" {
		if err := appendLine(path, name); err != nil {
			panic(fmt.Sprintf("testenv: record name %s in %s=%s: %v", name, NameLogEnv, path, err))
		}
	}
	return name
}

// appendLine appends line and a newline to the file at path with one write, which O_APPEND
// keeps whole when several test processes append at once.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(line + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
