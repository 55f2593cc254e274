package graph

import (
	"math/rand"
	"testing"
)

// TestMatchSet: random adds and removes across the indexed threshold keep the set equal to a
// map's, with its index (once built) pointing at each matcher's place.
func TestMatchSet(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	ms := make([]*matcher, 40)
	for i := range ms {
		ms[i] = &matcher{}
	}
	var s matchSet
	pos := matchPositions{}
	indexed := false
	want := map[*matcher]bool{}
	for step := range 5000 {
		m := ms[rng.Intn(len(ms))]
		if rng.Intn(2) == 0 {
			s.add(m, pos)
			want[m] = true
		} else {
			s.remove(m, pos)
			delete(want, m)
		}
		if len(s.all()) != len(want) {
			t.Fatalf("step %d: %d matchers, want %d", step, len(s.all()), len(want))
		}
		for _, x := range ms {
			if s.has(x, pos) != want[x] {
				t.Fatalf("step %d: has = %v, want %v", step, s.has(x, pos), want[x])
			}
		}
		if p := pos[&s]; p != nil {
			indexed = true
			if len(p) != len(s.all()) {
				t.Fatalf("step %d: the index has %d matchers, the set %d", step, len(p), len(s.all()))
			}
		}
		for i, x := range s.all() {
			if p := pos[&s]; p != nil && p[x] != i {
				t.Fatalf("step %d: index says %d for the matcher at %d", step, p[x], i)
			}
		}
		if len(s.all()) == 0 && len(pos) != 0 {
			t.Fatalf("step %d: an empty set is still indexed", step)
		}
	}
	if !indexed {
		t.Error("the index was never built") // the walk must cross the threshold to test it
	}
}
