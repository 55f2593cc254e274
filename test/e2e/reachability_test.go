package e2e

// Expected connectivity the upstream way (after netpol/reachability.go and truthtable.go,
// Apache-2.0), on the harness's expected/observed tables (netns.Reachability): start from a
// default, then override with Expect, ExpectPeer (empty fields are wildcards), ExpectAllIngress
// (a column) and ExpectAllEgress (a row). Loopback cells are never compared (upstream
// ignoreLoopback, k/k issue #95879).

import (
	"fmt"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// Peer matches pods by namespace and/or name; an empty field matches everything.
type Peer struct {
	Namespace string
	Pod       string
}

func (p *Peer) matches(key string) bool {
	ns, name := splitKey(key)
	return (p.Namespace == "" || p.Namespace == ns) && (p.Pod == "" || p.Pod == name)
}

// Reachability is the expected truth table of one probe over a fixed list of pod keys "ns/name".
type Reachability struct{ *netns.Reachability }

// NewReachability returns a table over pods with every cell expected def.
func NewReachability(pods []string, def bool) *Reachability {
	return &Reachability{netns.NewReachability(pods, def)}
}

// check panics on a key the table does not have: as upstream fails the test, it is a
// transcription error (netns's table would keep the cell and never compare it).
func (r *Reachability) check(pods ...string) {
	for _, p := range pods {
		if !slices.Contains(r.Keys, p) {
			panic(fmt.Sprintf("reachability: pod %q is not in the table %v", p, r.Keys))
		}
	}
}

// Pods returns the keys of the table, in order.
func (r *Reachability) Pods() []string { return slices.Clone(r.Keys) }

// Get returns the expected cell from→to.
func (r *Reachability) Get(from, to string) bool {
	r.check(from, to)
	v, _ := r.Expected.Get(from, to)
	return v
}

// Expect sets one cell.
func (r *Reachability) Expect(from, to string, connected bool) {
	r.check(from, to)
	r.Reachability.Expect(from, to, connected)
}

// ExpectPeer sets every cell whose source matches from and destination matches to.
func (r *Reachability) ExpectPeer(from, to *Peer, connected bool) {
	for _, f := range r.Keys {
		for _, t := range r.Keys {
			if from.matches(f) && to.matches(t) {
				r.Reachability.Expect(f, t, connected)
			}
		}
	}
}

// ExpectAllIngress sets the column of pod: all traffic into it.
func (r *Reachability) ExpectAllIngress(pod string, connected bool) {
	r.check(pod)
	r.ExpectAllTo(pod, connected)
}

// ExpectAllEgress sets the row of pod: all traffic out of it.
func (r *Reachability) ExpectAllEgress(pod string, connected bool) {
	r.check(pod)
	r.ExpectAllFrom(pod, connected)
}

// compare returns the number of non-loopback cells where observed differs from expected, and
// the report: expected, observed and comparison tables and the wrong cells.
func compare(expected *Reachability, observed func(from, to string) bool) (wrong int, report string) {
	r := &netns.Reachability{Keys: expected.Keys, Expected: expected.Expected, Observed: netns.NewTruthTable(expected.Keys, nil)}
	for _, f := range r.Keys {
		for _, t := range r.Keys {
			if f != t { // loopback: never observed, never counted
				r.Observe(f, t, observed(f, t))
			}
		}
	}
	return r.Summary()
}
