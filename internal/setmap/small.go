package setmap

import (
	"iter"
	"maps"
	"slices"
)

// Small is a set held as a list while it holds at most SmallListed members, and as a map once it
// grows past that (until emptied). For indexes whose sets are mostly a few members — the pods of
// one app under a label value, the one matcher under an anchor — where a map of a few entries
// costs ≈ 300 bytes and a list 8 bytes a member. Add and Remove cost O(SmallListed) as a list,
// O(1) as a map. The zero value is an empty set.
type Small[T comparable] struct {
	list []T
	m    map[T]struct{}
}

// SmallListed is the most members a Small holds as a list.
const SmallListed = 16

// Add puts x in the set.
func (s *Small[T]) Add(x T) {
	switch {
	case s.m != nil:
		s.m[x] = struct{}{}
	case slices.Contains(s.list, x):
	case len(s.list) < SmallListed:
		s.list = append(s.list, x)
	default:
		s.m = make(map[T]struct{}, 2*SmallListed)
		for _, y := range s.list {
			s.m[y] = struct{}{}
		}
		s.m[x] = struct{}{}
		s.list = nil
	}
}

// Remove takes x out of the set.
func (s *Small[T]) Remove(x T) {
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

// Len is the number of members.
func (s *Small[T]) Len() int {
	if s.m != nil {
		return len(s.m)
	}
	return len(s.list)
}

// All yields the members (none for nil); the set must not change while it is walked.
func (s *Small[T]) All() iter.Seq[T] {
	switch {
	case s == nil:
		return func(func(T) bool) {}
	case s.m != nil:
		return maps.Keys(s.m)
	}
	return slices.Values(s.list)
}

// Each calls f for every member (none for nil); the set must not change meanwhile. Unlike
// ranging over All, which hands the caller's loop body to an iterator chosen at run time (a
// closure made on the heap), it makes nothing: for hot paths.
func (s *Small[T]) Each(f func(T)) {
	if s == nil {
		return
	}
	for _, x := range s.list {
		f(x)
	}
	for x := range s.m {
		f(x)
	}
}

// AddSmall is Add for a map of Small sets: it puts x in k's set, creating the set.
func AddSmall[K, T comparable](m map[K]*Small[T], k K, x T) {
	s := m[k]
	if s == nil {
		s = &Small[T]{}
		m[k] = s
	}
	s.Add(x)
}

// RemoveSmall is Remove for a map of Small sets: it takes x out of k's set, dropping the set when
// it empties.
func RemoveSmall[K, T comparable](m map[K]*Small[T], k K, x T) {
	if s := m[k]; s != nil {
		if s.Remove(x); s.Len() == 0 {
			delete(m, k)
		}
	}
}
