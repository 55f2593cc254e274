package ruleset

import (
	"fmt"
	"math/rand"
	"net/netip"
	"testing"
)

// TestTallyMatchesStats: along random changes of a table — chains put with other rules,
// dropped, sets put, dropped and changed in place — a Tally told the chains and sets of each
// step's changes gives the table's Stats after every step.
func TestTallyMatchesStats(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	tab := NewTable("t")
	var y Tally
	y.Reset(tab)
	for step := range 500 {
		ch := &Changes{Sets: map[string]struct{}{}, Chains: map[string]struct{}{}}
		for range rng.Intn(4) {
			name := fmt.Sprint("c", rng.Intn(20))
			if rng.Intn(3) == 0 {
				delete(tab.Chains, name)
			} else {
				tab.Chains[name] = &Chain{Name: name, Rules: make([]Rule, rng.Intn(5))}
			}
			ch.Chains[name] = struct{}{}
		}
		for range rng.Intn(3) {
			name := fmt.Sprint("s", rng.Intn(10))
			switch s := tab.Sets[name]; {
			case rng.Intn(4) == 0:
				delete(tab.Sets, name)
				ch.Sets[name] = struct{}{}
			case s == nil:
				tab.Sets[name] = newSet(name, KeyIPDaddr, false, false, "")
				ch.Sets[name] = struct{}{}
			default: // in place: the changes do not name it
				k := AddrKey(netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.Intn(8))}))
				if rng.Intn(2) == 0 {
					s.Put(Element{ElementKey: k})
				} else {
					s.Delete(k)
				}
			}
		}
		y.Update(tab, ch)
		if got, want := y.Stats(tab), tab.Stats(); got != want {
			t.Fatalf("step %d: Tally gives %+v, the table %+v", step, got, want)
		}
	}
}
