package graph

import "slices"

// matchSet is a set of matchers: a slice, as most endpoints match a few (a map each would cost
// ≈ 200 bytes an endpoint). Once it grows past matchSetIndexed, the positions of its matchers
// are kept in a matchPositions (the index's, not a field of every endpoint: 8 bytes an endpoint
// saved) so that adding and removing stay O(1) for an endpoint that many selectors match.
type matchSet struct {
	list []*matcher
}

// matchPositions holds the position of each matcher in each indexed matchSet.
type matchPositions map[*matchSet]map[*matcher]int

const matchSetIndexed = 16

func (s *matchSet) has(m *matcher, pos matchPositions) bool {
	if p := pos[s]; p != nil {
		_, ok := p[m]
		return ok
	}
	return slices.Contains(s.list, m)
}

func (s *matchSet) add(m *matcher, pos matchPositions) {
	if s.has(m, pos) {
		return
	}
	s.list = append(s.list, m)
	switch p := pos[s]; {
	case p != nil:
		p[m] = len(s.list) - 1
	case len(s.list) > matchSetIndexed:
		p = make(map[*matcher]int, len(s.list))
		for i, x := range s.list {
			p[x] = i
		}
		pos[s] = p
	}
}

func (s *matchSet) remove(m *matcher, pos matchPositions) {
	i := -1
	p := pos[s]
	if p != nil {
		if j, ok := p[m]; ok {
			i = j
			delete(p, m)
		}
	} else {
		i = slices.Index(s.list, m)
	}
	if i < 0 {
		return
	}
	last := len(s.list) - 1
	if i != last {
		s.list[i] = s.list[last]
		if p != nil {
			p[s.list[i]] = i
		}
	}
	s.list[last] = nil
	s.list = s.list[:last]
	if len(s.list) == 0 {
		s.list = nil
		delete(pos, s)
	}
}

// all yields the matchers; the set must not change while it is walked.
func (s *matchSet) all() []*matcher { return s.list }
