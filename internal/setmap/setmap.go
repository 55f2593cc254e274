// Package setmap holds the operations on a map of sets, the index shape the graph and the
// dataplane both keep, in two forms: map[K]map[V]struct{} (Add, Remove; the dataplane's policy →
// groups, set → policies) and map[K]*Small[V] (AddSmall, RemoveSmall), whose sets are lists while
// they are small (the graph's label index: a label value → its endpoints, an anchor → its
// matchers). Invariant: a key is present only while its set is not empty.
package setmap

// Add puts v in k's set, creating the set.
func Add[K, V comparable](m map[K]map[V]struct{}, k K, v V) {
	s := m[k]
	if s == nil {
		s = map[V]struct{}{}
		m[k] = s
	}
	s[v] = struct{}{}
}

// Remove takes v out of k's set, dropping the set when it empties.
func Remove[K, V comparable](m map[K]map[V]struct{}, k K, v V) {
	if s := m[k]; s != nil {
		delete(s, v)
		if len(s) == 0 {
			delete(m, k)
		}
	}
}
