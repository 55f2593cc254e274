package graph

import (
	"iter"
	"maps"
	"slices"
)

// smallSet is a set held as a list while it holds at most smallSetListed members, and as a map
// once it grows past that (until emptied). The index's sets are mostly small — the few pods of
// one app under a label value, the one matcher under most anchors — and a map of a few entries
// costs ≈ 300 bytes where a list costs 8 bytes a member. add and remove cost O(smallSetListed)
// as a list, O(1) as a map.
type smallSet[T comparable] struct {
	list []T
	m    map[T]struct{}
}

const smallSetListed = 16

func (s *smallSet[T]) add(x T) {
	switch {
	case s.m != nil:
		s.m[x] = struct{}{}
	case slices.Contains(s.list, x):
	case len(s.list) < smallSetListed:
		s.list = append(s.list, x)
	default:
		s.m = make(map[T]struct{}, 2*smallSetListed)
		for _, y := range s.list {
			s.m[y] = struct{}{}
		}
		s.m[x] = struct{}{}
		s.list = nil
	}
}

func (s *smallSet[T]) remove(x T) {
	if s.m != nil {
		delete(s.m, x)
		return
	}
	if i := slices.Index(s.list, x); i >= 0 {
		last := len(s.list) - 1
		var zero T
		s.list[i], s.list[last] = s.list[last], zero
		s.list = s.list[:last]
	}
}

func (s *smallSet[T]) len() int {
	if s.m != nil {
		return len(s.m)
	}
	return len(s.list)
}

// all yields the members (none for nil); the set must not change while it is walked.
func (s *smallSet[T]) all() iter.Seq[T] {
	switch {
	case s == nil:
		return func(func(T) bool) {}
	case s.m != nil:
		return maps.Keys(s.m)
	}
	return slices.Values(s.list)
}

// each calls f for every member; the set must not change meanwhile. Unlike ranging over all,
// it makes no closure of the caller's loop body: the index's hot paths call it.
func (s *smallSet[T]) each(f func(T)) {
	for _, x := range s.list {
		f(x)
	}
	for x := range s.m {
		f(x)
	}
}

// fileUnder adds x to the set of key k in sets, which it makes when k has none.
func fileUnder[K, T comparable](sets map[K]*smallSet[T], k K, x T) {
	s := sets[k]
	if s == nil {
		s = &smallSet[T]{}
		sets[k] = s
	}
	s.add(x)
}

// unfileFrom removes x from the set of key k in sets, and the set once empty.
func unfileFrom[K, T comparable](sets map[K]*smallSet[T], k K, x T) {
	if s := sets[k]; s != nil {
		if s.remove(x); s.len() == 0 {
			delete(sets, k)
		}
	}
}
