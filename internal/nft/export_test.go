package nft

import (
	"reflect"
	"slices"
)

// CountedByWalk is what Counted returns when it walks the table: the reference its kept
// snapshots are compared with.
func (b *Builder) CountedByWalk() *Counted { return b.countAll() }

// SameCounted reports whether two snapshots name the same objects alike.
func SameCounted(x, y *Counted) bool {
	norm := func(c *Counted) Counted {
		n := *c
		n.countChains, n.countSets = slices.Sorted(slices.Values(c.countChains)), slices.Sorted(slices.Values(c.countSets))
		return n
	}
	return reflect.DeepEqual(norm(x), norm(y))
}

// DomainSetsKnown is how many domain sets the builder remembers a pattern of (Builder.domains).
func (b *Builder) DomainSetsKnown() int { return len(b.domains) }
