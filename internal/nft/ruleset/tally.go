package ruleset

// Tally keeps a table's Stats as it changes: the rules of each chain are counted when the
// changes of an apply name the chain (Update), so a small apply costs O(chains it names) plus
// O(sets) for the elements (Set.Len is O(1), and sets change in place without the changes
// naming them), not a walk of every chain's rules. Stats then equals the table's Stats.
type Tally struct {
	rules map[string]int // chain → its rules, as last counted
	total int            // the sum of rules
}

// Reset counts every chain of t anew.
func (y *Tally) Reset(t *Table) {
	y.rules = make(map[string]int, len(t.Chains))
	y.total = 0
	for name, c := range t.Chains {
		y.rules[name] = len(c.Rules)
		y.total += len(c.Rules)
	}
}

// Update counts anew the chains that changes names, t as it is now. A nil changes, or a Tally
// never Reset, counts every chain.
func (y *Tally) Update(t *Table, changes *Changes) {
	if changes == nil || y.rules == nil {
		y.Reset(t)
		return
	}
	for name := range changes.Chains {
		y.total -= y.rules[name]
		delete(y.rules, name)
		if c, ok := t.Chains[name]; ok {
			y.rules[name] = len(c.Rules)
			y.total += len(c.Rules)
		}
	}
}

// Stats counts t's objects: what t.Stats gives, for a t whose every chain put or dropped since
// the last Reset was named to Update. A Tally never Reset counts every chain first.
func (y *Tally) Stats(t *Table) Stats {
	if y.rules == nil {
		y.Reset(t)
	}
	s := Stats{Chains: len(t.Chains), Sets: len(t.Sets), Rules: y.total}
	for _, st := range t.Sets {
		s.Elements += st.Len()
	}
	return s
}
