package netns

import (
	"fmt"
	"strings"
	"text/tabwriter"
)

// TruthTable is a square table of booleans over keys: rows are sources, columns destinations.
type TruthTable struct {
	Keys   []string
	values map[[2]string]bool
}

// NewTruthTable returns a table of keys; with a default, every cell holds it, otherwise every
// cell is unset.
func NewTruthTable(keys []string, def *bool) *TruthTable {
	t := &TruthTable{Keys: append([]string(nil), keys...), values: map[[2]string]bool{}}
	if def != nil {
		for _, f := range keys {
			for _, to := range keys {
				t.values[[2]string{f, to}] = *def
			}
		}
	}
	return t
}

// Set sets one cell.
func (t *TruthTable) Set(from, to string, v bool) { t.values[[2]string{from, to}] = v }

// Get returns one cell and whether it is set.
func (t *TruthTable) Get(from, to string) (v, set bool) {
	v, set = t.values[[2]string{from, to}]
	return v, set
}

// String prints the table the way upstream's netpol e2e does: '.' connected, 'X' blocked,
// '?' unset.
func (t *TruthTable) String() string {
	return t.render(func(from, to string) string {
		v, set := t.Get(from, to)
		switch {
		case !set:
			return "?"
		case v:
			return "."
		default:
			return "X"
		}
	})
}

func (t *TruthTable) render(cell func(from, to string) string) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprint(w, "-")
	for _, k := range t.Keys {
		fmt.Fprint(w, "\t"+k)
	}
	fmt.Fprintln(w)
	for _, from := range t.Keys {
		fmt.Fprint(w, from)
		for _, to := range t.Keys {
			fmt.Fprint(w, "\t"+cell(from, to))
		}
		fmt.Fprintln(w)
	}
	w.Flush()
	return b.String()
}

// Reachability pairs the expected truth table with the observed one, as upstream's netpol e2e.
// Rows are sources ("ns/name"), columns destinations.
type Reachability struct {
	Keys     []string
	Expected *TruthTable
	Observed *TruthTable
}

// NewReachability expects defaultExpect everywhere and has observed nothing yet.
func NewReachability(keys []string, defaultExpect bool) *Reachability {
	return &Reachability{
		Keys:     append([]string(nil), keys...),
		Expected: NewTruthTable(keys, &defaultExpect),
		Observed: NewTruthTable(keys, nil),
	}
}

// Expect sets one expected cell.
func (r *Reachability) Expect(from, to string, ok bool) { r.Expected.Set(from, to, ok) }

// ExpectAllFrom sets the expected row of from.
func (r *Reachability) ExpectAllFrom(from string, ok bool) {
	for _, to := range r.Keys {
		r.Expected.Set(from, to, ok)
	}
}

// ExpectAllTo sets the expected column of to.
func (r *Reachability) ExpectAllTo(to string, ok bool) {
	for _, from := range r.Keys {
		r.Expected.Set(from, to, ok)
	}
}

// Observe records one probe result.
func (r *Reachability) Observe(from, to string, ok bool) { r.Observed.Set(from, to, ok) }

// Summary counts the wrong cells — observed differently than expected, or never observed (except
// the self cells, which are ignored when not observed, as upstream ignores loopback) — and
// renders the expected, observed and comparison tables plus a list of the wrong cells, for a
// failure message. In the comparison '.' is right, 'X' wrong, '?' not observed.
func (r *Reachability) Summary() (wrong int, table string) {
	var cells []string
	cmp := r.Expected.render(func(from, to string) string {
		exp, _ := r.Expected.Get(from, to)
		obs, set := r.Observed.Get(from, to)
		switch {
		case !set && from == to:
			return "-"
		case !set:
			wrong++
			cells = append(cells, fmt.Sprintf("  %s -> %s: expected %s, not observed", from, to, verdict(exp)))
			return "?"
		case obs != exp:
			wrong++
			cells = append(cells, fmt.Sprintf("  %s -> %s: expected %s, observed %s", from, to, verdict(exp), verdict(obs)))
			return "X"
		default:
			return "."
		}
	})
	var b strings.Builder
	fmt.Fprintf(&b, "expected ('.' connected, 'X' blocked):\n%s", r.Expected)
	fmt.Fprintf(&b, "observed:\n%s", r.Observed)
	fmt.Fprintf(&b, "comparison ('.' right, 'X' wrong, '?' not observed): %d wrong\n%s", wrong, cmp)
	if len(cells) > 0 {
		fmt.Fprintf(&b, "wrong cells:\n%s\n", strings.Join(cells, "\n"))
	}
	return wrong, b.String()
}

func verdict(ok bool) string {
	if ok {
		return "connected"
	}
	return "blocked"
}
