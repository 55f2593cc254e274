package sync

import (
	"fmt"
	"strings"
	gosync "sync"
	"testing"
	"unsafe"
)

func sameBytes(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// TestInterner: every string asked for again gets the copy handed out before, while it is in use
// (a working set asked for at least once per internHeadroom new strings), and the interner holds
// at most that working set plus twice internHeadroom, however many distinct strings pass.
func TestInterner(t *testing.T) {
	for _, c := range []struct {
		name    string
		working int // strings asked for in every round
		churn   int // new strings in every round, never asked for again
		rounds  int
		// the working set keeps its copies: asked for at least once per internHeadroom new strings
		kept bool
	}{
		{"working set only", 100, 0, 3, true},
		{"churn only", 0, 1000, 50, true},
		{"working set and churn", 1000, 1000, 50, true},
		{"working set as large as the headroom", internHeadroom, 100, 50, true},
		{"more churn than headroom per round", 100, 2 * internHeadroom, 5, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := newInterner()
			first := map[string]string{} // the copy each working-set string got first
			for round := range c.rounds {
				for i := range c.working {
					s := fmt.Sprint("node-", i) // a new allocation each time, as decoded
					got := in.intern(s)
					if got != s || sameBytes(got, s) {
						t.Fatalf("round %d: intern(%q) = %q, sharing its bytes: %v", round, s, got, sameBytes(got, s))
					}
					if f, ok := first[s]; !ok {
						first[s] = got
					} else if c.kept && !sameBytes(f, got) {
						t.Fatalf("round %d: %q got a new copy while in use", round, s)
					}
				}
				for i := range c.churn {
					s := fmt.Sprint("ns-", round, "-", i)
					if got := in.intern(s); got != s {
						t.Fatalf("intern(%q) = %q", s, got)
					}
					if n := len(in.strs); n > c.working+2*internHeadroom {
						t.Fatalf("round %d: %d strings held, bound %d", round, n, c.working+2*internHeadroom)
					}
				}
			}
		})
	}
	if got := newInterner().intern(""); got != "" {
		t.Errorf(`intern("") = %q`, got)
	}
}

// TestInternerConcurrent: transforms of several informers intern at once (run with -race); each
// string still has one copy.
func TestInternerConcurrent(t *testing.T) {
	in := newInterner()
	const goroutines, strs = 4, 1000
	got := make([][]string, goroutines)
	var wg gosync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range strs {
				got[g] = append(got[g], in.intern(strings.Clone(fmt.Sprint("sa-", i))))
			}
		})
	}
	wg.Wait()
	for g := 1; g < goroutines; g++ {
		for i := range strs {
			if !sameBytes(got[g][i], got[0][i]) {
				t.Fatalf("goroutines 0 and %d got different copies of %q", g, got[0][i])
			}
		}
	}
}
