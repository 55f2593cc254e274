package setmap

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSmallSet runs random adds and removes, across the list/map threshold both ways, against
// a map: after every step the set holds exactly the map's members, each once.
func TestSmallSet(t *testing.T) {
	for _, universe := range []int{3, SmallListed, SmallListed + 1, 4 * SmallListed} {
		rng := rand.New(rand.NewPCG(1, uint64(universe)))
		var s Small[int]
		want := map[int]struct{}{}
		for step := range 5000 {
			x := rng.IntN(universe)
			if rng.IntN(3) == 0 {
				s.Remove(x)
				delete(want, x)
			} else {
				s.Add(x)
				want[x] = struct{}{}
			}
			got := slices.Sorted(s.All())
			if w := slices.Sorted(maps.Keys(want)); !slices.Equal(got, w) || s.Len() != len(w) {
				t.Fatalf("universe %d, step %d: set holds %v (len %d), want %v", universe, step, got, s.Len(), w)
			}
			var each []int
			s.Each(func(x int) { each = append(each, x) })
			if slices.Sort(each); !slices.Equal(each, got) {
				t.Fatalf("universe %d, step %d: Each yields %v, All %v", universe, step, each, got)
			}
			if s.m == nil && len(s.list) > SmallListed {
				t.Fatalf("universe %d, step %d: a list of %d members", universe, step, len(s.list))
			}
		}
	}
}

// TestAddRemoveSmall: a key's set is made by its first member and dropped with its last.
func TestAddRemoveSmall(t *testing.T) {
	sets := map[string]*Small[int]{}
	AddSmall(sets, "a", 1)
	AddSmall(sets, "a", 2)
	RemoveSmall(sets, "a", 1)
	RemoveSmall(sets, "b", 1) // absent: nothing
	if len(sets) != 1 || sets["a"].Len() != 1 {
		t.Fatalf("after two adds and a remove: %v", sets)
	}
	RemoveSmall(sets, "a", 2)
	if _, ok := sets["a"]; ok {
		t.Fatal("an emptied set stays")
	}
	if n := len(slices.Collect(sets["b"].All())); n != 0 {
		t.Fatalf("a missing key's set yields %d members", n)
	}
}
