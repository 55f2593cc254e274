package graph

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSmallSet runs random adds and removes, across the list/map threshold both ways, against
// a map: after every step the set holds exactly the map's members, each once.
func TestSmallSet(t *testing.T) {
	for _, universe := range []int{3, smallSetListed, smallSetListed + 1, 4 * smallSetListed} {
		rng := rand.New(rand.NewPCG(1, uint64(universe)))
		var s smallSet[int]
		want := map[int]struct{}{}
		for step := range 5000 {
			x := rng.IntN(universe)
			if rng.IntN(3) == 0 {
				s.remove(x)
				delete(want, x)
			} else {
				s.add(x)
				want[x] = struct{}{}
			}
			got := slices.Sorted(s.all())
			if w := slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) || s.len() != len(w) {
				t.Fatalf("universe %d, step %d: set holds %v (len %d), want %v", universe, step, got, s.len(), w)
			}
			if s.m == nil && len(s.list) > smallSetListed {
				t.Fatalf("universe %d, step %d: a list of %d members", universe, step, len(s.list))
			}
		}
	}
}

// TestFileUnder: a key's set is made by its first member and dropped with its last.
func TestFileUnder(t *testing.T) {
	sets := map[string]*smallSet[int]{}
	fileUnder(sets, "a", 1)
	fileUnder(sets, "a", 2)
	unfileFrom(sets, "a", 1)
	unfileFrom(sets, "b", 1) // absent: nothing
	if len(sets) != 1 || sets["a"].len() != 1 {
		t.Fatalf("after two adds and a remove: %v", sets)
	}
	unfileFrom(sets, "a", 2)
	if _, ok := sets["a"]; ok {
		t.Fatal("an emptied set stays")
	}
	if n := len(slices.Collect(sets["b"].all())); n != 0 {
		t.Fatalf("a missing key's set yields %d members", n)
	}
}
