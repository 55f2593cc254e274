package nft

import (
	"math/bits"

	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// setSizes holds the size of each set that has one (setSize), as the last write of the whole
// table or the set's own regrowth chose it: a set put under that name again keeps it (put), and
// a set that outgrows it is given a new one (regrow).
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

// regrow gives each set of t that holds more elements than its size its setSize, and returns
// their names: a commit deletes each and adds it anew with that size (ruleset.Conn.Commit), at a
// cost of the set's elements and the rules that look it up, not the table's. It costs a look at
// every sized set.
func (z setSizes) regrow(t *ruleset.Table) []string {
	var grown []string
	for name, size := range z {
		if s, ok := t.Sets[name]; ok && s.Len() > int(size) {
			s.Size = setSize(s.Len())
			z[name] = s.Size
			grown = append(grown, name)
		}
	}
	return grown
}
