package e2e

// Expected connectivity the upstream way (after netpol/reachability.go and truthtable.go,
// Apache-2.0): start from a default, then override with Expect, ExpectPeer (empty fields are
// wildcards), ExpectAllIngress (a column) and ExpectAllEgress (a row). Loopback cells are never
// compared (upstream ignoreLoopback, k/k issue #95879).

import (
	"fmt"
	"strings"
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

// Reachability is a from×to truth table over a fixed list of pod keys "ns/name".
type Reachability struct {
	pods  []string
	index map[string]int
	cells [][]bool
}

// NewReachability returns a table over pods with every cell set to def.
func NewReachability(pods []string, def bool) *Reachability {
	r := &Reachability{pods: append([]string(nil), pods...), index: map[string]int{}}
	for i, p := range pods {
		r.index[p] = i
		row := make([]bool, len(pods))
		for j := range row {
			row[j] = def
		}
		r.cells = append(r.cells, row)
	}
	return r
}

func (r *Reachability) idx(pod string) int {
	i, ok := r.index[pod]
	if !ok {
		// Upstream fails the test on an unknown key too: it is a transcription error.
		panic(fmt.Sprintf("reachability: pod %q is not in the table %v", pod, r.pods))
	}
	return i
}

// Pods returns the keys of the table, in order.
func (r *Reachability) Pods() []string { return append([]string(nil), r.pods...) }

// Get returns the cell from→to.
func (r *Reachability) Get(from, to string) bool { return r.cells[r.idx(from)][r.idx(to)] }

// Expect sets one cell.
func (r *Reachability) Expect(from, to string, connected bool) {
	r.cells[r.idx(from)][r.idx(to)] = connected
}

// ExpectPeer sets every cell whose source matches from and destination matches to.
func (r *Reachability) ExpectPeer(from, to *Peer, connected bool) {
	for i, f := range r.pods {
		if !from.matches(f) {
			continue
		}
		for j, t := range r.pods {
			if to.matches(t) {
				r.cells[i][j] = connected
			}
		}
	}
}

// ExpectAllIngress sets the column of pod: all traffic into it.
func (r *Reachability) ExpectAllIngress(pod string, connected bool) {
	j := r.idx(pod)
	for i := range r.pods {
		r.cells[i][j] = connected
	}
}

// ExpectAllEgress sets the row of pod: all traffic out of it.
func (r *Reachability) ExpectAllEgress(pod string, connected bool) {
	i := r.idx(pod)
	for j := range r.pods {
		r.cells[i][j] = connected
	}
}

// compare returns the number of non-loopback cells where observed differs from expected, and
// the upstream-style report: expected, observed and comparison tables.
func compare(expected *Reachability, observed func(from, to string) bool) (wrong int, report string) {
	obs := NewReachability(expected.pods, false)
	cmp := NewReachability(expected.pods, true)
	for _, f := range expected.pods {
		for _, t := range expected.pods {
			o := observed(f, t)
			obs.Expect(f, t, o)
			if f != t && o != expected.Get(f, t) {
				cmp.Expect(f, t, false)
				wrong++
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "reachability: incorrect: %d (loopback ignored)\n\n", wrong)
	fmt.Fprintf(&b, "expected:\n\n%s\n", expected.pretty(". ", "X "))
	fmt.Fprintf(&b, "observed:\n\n%s\n", obs.pretty(". ", "X "))
	fmt.Fprintf(&b, "comparison (X = wrong):\n\n%s", cmp.pretty(". ", "X "))
	return wrong, b.String()
}

// pretty prints the table like upstream's TruthTable.PrettyPrint: rows are sources, columns
// destinations; loopback cells show '-'.
func (r *Reachability) pretty(yes, no string) string {
	var b strings.Builder
	b.WriteString("-\t")
	b.WriteString(strings.Join(r.pods, "\t"))
	b.WriteString("\n")
	for i, f := range r.pods {
		b.WriteString(f)
		for j := range r.pods {
			b.WriteString("\t")
			switch {
			case i == j:
				b.WriteString("- ")
			case r.cells[i][j]:
				b.WriteString(yes)
			default:
				b.WriteString(no)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
