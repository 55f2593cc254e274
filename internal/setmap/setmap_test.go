package setmap

import "testing"

func TestAddRemove(t *testing.T) {
	m := map[string]map[int]struct{}{}
	Add(m, "a", 1)
	Add(m, "a", 2)
	Add(m, "b", 1)
	Remove(m, "a", 1)
	Remove(m, "c", 1) // absent: nothing
	if len(m["a"]) != 1 || len(m["b"]) != 1 {
		t.Fatalf("after adds and one remove: %v", m)
	}
	Remove(m, "a", 2)
	if _, ok := m["a"]; ok {
		t.Fatalf("an emptied set stays: %v", m)
	}
}
