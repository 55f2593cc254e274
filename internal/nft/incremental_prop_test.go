package nft_test

import (
	"fmt"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

// TestIncrementalMatchesFresh: a random sequence of cluster changes (relabels, pods coming and
// going, policies written and deleted — some with more rules than the listed shape takes)
// applied one flush at a time gives, after every step, the same table as a fresh builder fed
// the resulting cluster in one apply — so peer-by-peer recompiles, group moves, shape changes
// and the reference counts of chains and shared sets never drift from a full compile.
func TestIncrementalMatchesFresh(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalMatchesFresh(t, seed, false) })
	}
}

// TestIncrementalSharedAddresses: the same with pods drawn from a few addresses, so that
// several pod objects, local and remote, running or not, hold one address at a time and their
// owner changes as they come, go, move, start and are relabelled — with anti-spoofing on. The
// table matches a fresh one after every step. Seeds 1 and 2 run in the kernel
// (internal/nft/kernel's TestIncrementalSharedAddressesInKernel).
func TestIncrementalSharedAddresses(t *testing.T) {
	for seed := int64(3); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalMatchesFresh(t, seed, true) })
	}
}

func incrementalMatchesFresh(t *testing.T, seed int64, shared bool) {
	gen, cfg := nfttest.IncrementalCluster(seed, shared)
	nfttest.RunCluster(t, gen, 300, nfttest.Offline(nft.NewBuilder(cfg)), cfg)
}

// TestCountedMatchesWalk: along the random sequences of TestIncrementalMatchesFresh, with
// allowed packets counted (and Log rules logging on even seeds), the snapshot Counted returns
// after every apply — kept from an earlier apply or taken anew — equals a walk of the table.
func TestCountedMatchesWalk(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			gen, cfg := nfttest.IncrementalCluster(seed, seed > 3)
			cfg.CountAllowed = seed%3 != 0
			b := nft.NewBuilder(cfg)
			nfttest.RunCluster(t, gen, 300, countedChecked{t, b, nfttest.Offline(b)}, cfg)
		})
	}
}

// countedChecked checks Counted against a walk after every apply.
type countedChecked struct {
	t *testing.T
	b *nft.Builder
	nfttest.Target
}

func (c countedChecked) Apply(msgs []dataplane.Message) error {
	err := c.Target.Apply(msgs)
	if c.b.InSync() {
		if got, want := c.b.Counted(), c.b.CountedByWalk(); !nft.SameCounted(got, want) {
			c.t.Fatalf("Counted kept %+v, a walk gives %+v", got, want)
		}
	}
	return err
}
