package kernel_test

import (
	"fmt"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

// TestIncrementalInKernel: the random sequences of internal/nft's TestIncrementalMatchesFresh
// committed to a real kernel, one transaction per step; after every step the kernel holds the
// table as committed and nothing drifted (Resync reads it back) — so every in-place change of a
// set reached its commit — and the table matches a fresh builder's.
func TestIncrementalInKernel(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalInKernel(t, seed, false) })
	}
}

// TestIncrementalSharedAddressesInKernel: the same with pods drawn from a few addresses, with
// anti-spoofing on (internal/nft's TestIncrementalSharedAddresses): in the kernel every commit
// succeeds and leaves no drift.
func TestIncrementalSharedAddressesInKernel(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalInKernel(t, seed, true) })
	}
}

func incrementalInKernel(t *testing.T, seed int64, shared bool) {
	gen, cfg := nfttest.IncrementalCluster(seed, shared)
	_, fd := bareNetns(t)
	a, err := kernel.Open(fd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	nfttest.RunCluster(t, gen, 300, a, cfg)
}
