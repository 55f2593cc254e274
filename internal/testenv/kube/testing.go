package kube

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"
)

// startTimeout bounds a test fixture's start-up; ~3 s on an idle machine, far more when many
// test binaries share two cores.
const startTimeout = 2 * time.Minute

// StartForTest starts a Server for one test and stops it on Cleanup. It fails the test (never
// skips) when kube-apiserver or etcd is missing, telling to run `make deps`. When the test
// failed, the last output of the processes is logged.
func StartForTest(tb testing.TB) *Server {
	tb.Helper()
	if err := CheckBinaries(Config{}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := Start(ctx, Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("last output of etcd/kube-apiserver:\n%s", s.LogTail())
		}
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// SharedMain is for TestMain: it starts one Server for the whole test package (the fixture is
// heavy), stores it in *out, runs m and stops the Server. When the Server cannot start (binary
// missing, start-up failure) it says why on stderr, still runs m with *out nil, and every test
// that calls Require fails loudly; tests that do not need the API server still run. A process
// that runs no test (runsNoTest) starts none.
//
//	var srv *kube.Server
//	func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }
//	func TestX(t *testing.T) { s := kube.Require(t, srv); ... }
func SharedMain(m *testing.M, out **Server) int {
	*out = nil
	if runsNoTest() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	s, err := Start(ctx, Config{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube.SharedMain: the shared kube-apiserver did not start; tests that need it will fail: %v\n", err)
	} else {
		*out = s
	}
	code := m.Run()
	if s != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "kube.SharedMain: last output of etcd/kube-apiserver:\n%s\n", s.LogTail())
		}
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "kube.SharedMain:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// runsNoTest reports whether this test process runs no test that could need a Server: it lists
// tests (-test.list), or only fuzzes — a fuzzing worker, or a fuzzing run that runs no test
// (-run '^$', as `make fuzz` does), whose every worker process would start a Server of its own.
func runsNoTest() bool {
	flag.Parse() // TestMain runs before m.Run parses the testing flags
	value := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	return value("test.list") != "" || value("test.fuzzworker") == "true" ||
		value("test.fuzz") != "" && value("test.run") == "^$"
}

// Require returns s, failing the test (never skipping) when s is nil because SharedMain could
// not start the shared Server.
func Require(tb testing.TB, s *Server) *Server {
	tb.Helper()
	if s == nil {
		if err := CheckBinaries(Config{}); err != nil {
			tb.Fatal(err)
		}
		tb.Fatal("kube test environment: the shared kube-apiserver did not start (see the TestMain output above, " +
			"or TestMain does not call kube.SharedMain); run `make deps`")
	}
	return s
}
