package kernel_test

import (
	"fmt"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

// TestIncrementalInKernel: the random sequences of internal/nft's TestIncrementalMatchesFresh
// committed to a real kernel, one transaction per step; after every step the kernel holds the
// table as committed and nothing drifted (Resync reads it back) — so every in-place change of a
// set reached its commit — the table matches a fresh builder's, and the applier's Stats, tallied
// from each apply's changes, equal a count of the whole table.
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
	nfttest.RunCluster(t, gen, 300, statsChecked{t, a}, cfg)
}

// statsChecked checks the applier's Stats against a count of its whole table after every apply.
type statsChecked struct {
	t *testing.T
	*kernel.Applier
}

func (c statsChecked) Apply(msgs []dataplane.Message) error {
	err := c.Applier.Apply(msgs)
	if got, _ := c.Stats(); got != c.Table().Stats() {
		c.t.Fatalf("Stats gives %+v, the table %+v", got, c.Table().Stats())
	}
	return err
}
