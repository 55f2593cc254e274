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
	want := map[*matcher]bool{}
	for step := range 5000 {
		m := ms[rng.Intn(len(ms))]
		if rng.Intn(2) == 0 {
			s.add(m)
			want[m] = true
		} else {
			s.remove(m)
			delete(want, m)
		}
		if len(s.all()) != len(want) {
			t.Fatalf("step %d: %d matchers, want %d", step, len(s.all()), len(want))
		}
		for _, x := range ms {
			if s.has(x) != want[x] {
				t.Fatalf("step %d: has = %v, want %v", step, s.has(x), want[x])
			}
		}
		for i, x := range s.all() {
			if s.pos != nil && s.pos[x] != i {
				t.Fatalf("step %d: index says %d for the matcher at %d", step, s.pos[x], i)
			}
		}
	}
	if s.pos == nil {
		t.Error("the index was never built") // the walk must cross the threshold to test it
	}
}
