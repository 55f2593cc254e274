package nft

import (
	"math/bits"

	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// setSizes holds the size of each set that has one (setSize), as the last write of the whole
// table chose it: a set put under that name again keeps it (put), and a set that outgrows it
// has the table written whole again.
type setSizes map[string]uint32

// minSizedSet is the fewest elements a set is given a size for (ruleset.Set.Size).
const minSizedSet = 1024

// setSize is the size a set of n elements is made with when the table is replaced: none below
// minSizedSet elements, else the power of two at or above twice n, so that the set can double
// before it outgrows it.
func setSize(n int) uint32 {
	if n < minSizedSet {
		return 0
	}
	return 1 << bits.Len(uint(2*n-1))
}

// put gives a set put into the table the size its name has.
func (z setSizes) put(s *ruleset.Set) { s.Size = z[s.Name] }

// resize gives every set of t its setSize, before t is written whole.
func (z setSizes) resize(t *ruleset.Table) {
	clear(z)
	for name, s := range t.Sets {
		s.Size = 0
		if !s.Interval {
			s.Size = setSize(s.Len())
		}
		if s.Size > 0 {
			z[name] = s.Size
		}
	}
}

// outgrown reports whether a set of t holds more elements than its size: the kernel would
// refuse them, and only a new set takes a new size, so the table is replaced (rarely: the set
// has doubled since).
func (z setSizes) outgrown(t *ruleset.Table) bool {
	for name, size := range z {
		if s, ok := t.Sets[name]; ok && s.Len() > int(size) {
			return true
		}
	}
	return false
}
