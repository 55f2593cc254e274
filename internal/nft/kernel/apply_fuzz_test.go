package kernel_test

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// FuzzApply: the fuzz input drives a random cluster (nfttest.WideCluster) through a graph into a
// builder, one flush and one apply a step, as internal/nft's TestIncrementalMatchesFresh does: pods of both
// families on two nodes, running or not, some sharing an address, named ports of every port
// protocol, routes to workload and other interfaces, namespace relabels, a tier of its own,
// NetworkPolicies and cluster policies of every action over selectors (invalid ones too), CIDRs
// of both families with excepts, port ranges, named ports, negated protocols and ports, ICMP and
// source-port matches. Every apply succeeds, no policy is rejected for its cost, and after every
// step the table equals a fresh builder's for the resulting cluster (but for the workload
// prefixes checked). An input whose first choice is 0 (one in ten), run as
// root, commits every step to a kernel, in a network namespace of its own, and the kernel then
// holds each table as committed (Resync finds no drift).
func FuzzApply(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := range 6 {
		b := make([]byte, 96<<(i%3))
		rng.Read(b)
		b[0] = byte(i) // 0: on the kernel
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c := testenv.NewChoices(in)
		inKernel := c.Intn(10) == 0 && os.Geteuid() == 0
		cfg := nft.Config{WorkloadPrefixes: []string{"veth"}, Rejected: func(k model.PolicyKey, reason string) {
			t.Errorf("policy %s rejected: %s", k, reason)
		}}
		gen := nfttest.WideCluster(c)
		dp := nfttest.Offline(nft.NewBuilder(cfg))
		if inKernel {
			a, err := kernel.Open(anonNetns(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			dp = a
		}
		nfttest.RunCluster(t, gen, 1+c.Intn(12), dp, cfg)
	})
}

// anonNetns makes a network namespace that nothing names and returns a handle of it: the
// namespace lives while a handle is open, so it ends with the test, or with the process if
// that dies first — a fuzzing worker stopped or crashed in the middle of an input leaves
// nothing behind. The root namespace is not touched.
func anonNetns(t *testing.T) int {
	t.Helper()
	type result struct {
		fd  int
		err error
	}
	c := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, moved to the new namespace, ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			c <- result{-1, fmt.Errorf("unshare: %w", err)}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		c <- result{fd, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	return r.fd
}
