package netns

import (
	"fmt"
	"slices"
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
// Rows are sources ("ns/name"), columns destinations. The expecting calls are upstream's; they
// panic on a key the table does not have (a transcription error, which upstream fails too: the
// cell would be kept and never compared).
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

// check panics on a key the table does not have.
func (r *Reachability) check(keys ...string) {
	for _, k := range keys {
		if !slices.Contains(r.Keys, k) {
			panic(fmt.Sprintf("reachability: pod %q is not in the table %v", k, r.Keys))
		}
	}
}

// Get returns the expected cell from→to.
func (r *Reachability) Get(from, to string) bool {
	r.check(from, to)
	v, _ := r.Expected.Get(from, to)
	return v
}

// Expect sets one expected cell.
func (r *Reachability) Expect(from, to string, ok bool) {
	r.check(from, to)
	r.Expected.Set(from, to, ok)
}

// Peer matches pods by namespace and/or name; an empty field matches everything.
type Peer struct {
	Namespace string
	Pod       string
}

func (p *Peer) matches(key string) bool {
	ns, name, _ := strings.Cut(key, "/")
	return (p.Namespace == "" || p.Namespace == ns) && (p.Pod == "" || p.Pod == name)
}

// ExpectPeer sets every expected cell whose source matches from and destination matches to.
func (r *Reachability) ExpectPeer(from, to *Peer, ok bool) {
	for _, f := range r.Keys {
		for _, t := range r.Keys {
			if from.matches(f) && to.matches(t) {
				r.Expected.Set(f, t, ok)
			}
		}
	}
}

// ExpectAllEgress sets the expected row of from: all traffic out of it.
func (r *Reachability) ExpectAllEgress(from string, ok bool) {
	r.check(from)
	for _, to := range r.Keys {
		r.Expected.Set(from, to, ok)
	}
}

// ExpectAllIngress sets the expected column of to: all traffic into it.
func (r *Reachability) ExpectAllIngress(to string, ok bool) {
	r.check(to)
	for _, from := range r.Keys {
		r.Expected.Set(from, to, ok)
	}
}

// Observe records one probe result.
func (r *Reachability) Observe(from, to string, ok bool) { r.Observed.Set(from, to, ok) }

// Compare is Summary of the expected table against observed, asked of every cell but the self
// cells (loopback: never observed, never counted); r's own observed table is left as it is.
func (r *Reachability) Compare(observed func(from, to string) bool) (wrong int, report string) {
	c := &Reachability{Keys: r.Keys, Expected: r.Expected, Observed: NewTruthTable(r.Keys, nil)}
	for _, f := range c.Keys {
		for _, t := range c.Keys {
			if f != t {
				c.Observe(f, t, observed(f, t))
			}
		}
	}
	return c.Summary()
}

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
