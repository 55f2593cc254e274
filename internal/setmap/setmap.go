// Package setmap holds the two operations on a map of sets (map[K]map[V]struct{}), the index
// shape the graph and the dataplane both keep (anchor → matchers, policy → groups, set →
// policies). Invariant: a key is present only while its set is not empty.
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
