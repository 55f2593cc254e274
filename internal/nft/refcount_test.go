package nft

import (
	"maps"
	"slices"
	"testing"
)

// TestRefs: acquire reports exactly the first holder and release exactly the last, after which
// the key is forgotten; releasing a key nobody holds changes nothing.
func TestRefs(t *testing.T) {
	r := newRefs[string]()
	if !r.acquire("a") {
		t.Fatal("first acquire of a: not reported first")
	}
	if r.acquire("a") {
		t.Fatal("second acquire of a: reported first")
	}
	r.acquire("b")
	if got := slices.Sorted(r.keys); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("keys %v, want [a b]", got)
	}
	if r.release("a") {
		t.Fatal("release of a with two holders: reported last")
	}
	if !r.release("a") {
		t.Fatal("release of a's last holder: not reported last")
	}
	if r.release("a") || r.release("none") {
		t.Fatal("release of a key nobody holds: reported last")
	}
	if !maps.Equal(r.n, map[string]int{"b": 1}) {
		t.Fatalf("counts %v, want only b once", r.n)
	}
	if !r.acquire("a") {
		t.Fatal("acquire of a after its last release: not reported first")
	}
}
