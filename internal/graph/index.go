package graph

import (
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
	"github.com/nftpolicy/nftpolicy/internal/setmap"
)

// This file is the label index: which endpoints each matcher (a scoped selector tuple) matches,
// maintained incrementally.

// endpoint is what the graph keeps of a model.Endpoint: its labels as the update handed them
// over, its addresses and named ports packed (not its node, which local says, nor its service
// account's name, which sa's key holds).
type endpoint struct {
	name   string // the pod's; its namespace is ns's
	labels model.Labels
	net    netInfo
	ns     *namespace
	sa     *account // nil without a service account
	local  bool
	// inSets counts the sets over the matchers matching the endpoint; while it is positive the
	// endpoint is in the address index (see set.go).
	inSets int32
	// matches holds every live matcher that matches the endpoint.
	matches matchSet
}

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

type namespace struct {
	name      string
	labels    selector.Map // nil while the namespace object is unknown
	exists    bool
	endpoints map[string]*endpoint // by pod name: the graph's one map of endpoints
}

type accountKey struct{ namespace, name string }

type account struct {
	key    accountKey
	labels selector.Map
	exists bool
	// endpoints counts the endpoints of the account, which are among its namespace's (a map of
	// them would cost an entry per endpoint, for a walk made only when the account's labels
	// change)
	endpoints int
}

// spec is a scoped selector tuple: an endpoint matches when it is in namespace scope (if set),
// its labels match ep, its namespace's labels match ns and its service account's labels match
// sa (nil: no constraint). Equal specs are one matcher, hence one set.
type spec struct {
	ep, ns, sa *selector.Selector
	scope      string
}

func normSel(s *selector.Selector) *selector.Selector {
	if s == nil || s.String() == selector.All().String() {
		return nil
	}
	return s
}

// key is the injective identity of a spec (length-prefixed parts).
func (s spec) key() string {
	var b strings.Builder
	part := func(tag string, v string) {
		b.WriteString(tag)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	if s.ep != nil {
		part("e", s.ep.String())
	}
	if s.ns != nil {
		part("n", s.ns.String())
	}
	if s.sa != nil {
		part("s", s.sa.String())
	}
	if s.scope != "" {
		part("i", s.scope)
	}
	return b.String()
}

// describe is the human form of a spec, for set comments.
func (s spec) describe() string {
	var parts []string
	if s.ep != nil {
		parts = append(parts, s.ep.String())
	}
	if s.ns != nil {
		parts = append(parts, "namespace("+s.ns.String()+")")
	}
	if s.sa != nil {
		parts = append(parts, "serviceaccount("+s.sa.String()+")")
	}
	if s.scope != "" {
		parts = append(parts, "in namespace "+quote(s.scope))
	}
	if len(parts) == 0 {
		return "all()"
	}
	return strings.Join(parts, " && ")
}

func quote(s string) string { return strconv.Quote(s) }

type anchorKind uint8

const (
	anchorNone anchorKind = iota
	anchorScope
	anchorScopeEq // scope: namespace; key, value: a label
	anchorEpEq
	anchorEpKey
	anchorNsEq
	anchorNsKey
	anchorKinds // the number of kinds
)

// anchor is the one index entry under which a matcher is filed: a condition every endpoint it
// matches satisfies, so only matchers filed under an endpoint's anchors are candidates for it.
type anchor struct {
	kind       anchorKind
	scope      string // anchorScopeEq's namespace (a field of its own: a pod event builds no string)
	key, value string
}

// matcher is a spec with the index's state. It does not list the endpoints it matches: each
// endpoint lists its matchers (e.matches), and membersOf finds a matcher's among the candidates
// of its anchor (a map of members per matcher would hold an entry per membership, for walks that
// happen only when a set is made, listed or dropped, and when a policy's selector changes).
type matcher struct {
	spec   spec
	key    string
	anchor anchor
	refs   int // policy selector uses + sets built on it
	// local counts the local endpoints matched.
	local    int
	policies map[*policy]struct{} // policies applied to the endpoints this matcher matches
	sets     []*set
	mark     uint64
}

func (m *matcher) match(e *endpoint) bool {
	s := &m.spec
	if s.scope != "" && e.ns.name != s.scope {
		return false
	}
	if s.ep != nil && !s.ep.Evaluate(&e.labels) {
		return false
	}
	if s.ns != nil && !s.ns.Evaluate(e.ns.labels) {
		return false
	}
	if s.sa != nil {
		var l selector.Map
		if e.sa != nil {
			l = e.sa.labels
		}
		if !s.sa.Evaluate(l) {
			return false
		}
	}
	return true
}

type index struct {
	matchers map[string]*matcher
	byAnchor map[anchor]map[*matcher]struct{}
	// ofKind counts the matchers filed under each kind of anchor: a pod event looks up only the
	// kinds some matcher uses (each lookup hashes the anchor's strings; ≈ 15 per pod otherwise)
	ofKind [anchorKinds]int
	// epByAnchor files endpoints under the anchorScopeEq/anchorEpEq/anchorEpKey anchors that
	// matchers are filed under (an entry, possibly empty, exists exactly while byAnchor has the
	// anchor): most labels (pod-template-hash) are never selected on, and filing every label of
	// every endpoint would cost a map entry per label of every pod. An entry is built by one scan
	// of the endpoints (of its namespace, for anchorScopeEq) when its first matcher appears. The
	// members of a matcher are found among these candidates (membersOf): a namespaced selector of
	// 100 pods in a namespace of 10,000 walks 100, not 10,000. nsByAnchor files namespaces under
	// anchorNsEq/anchorNsKey of their labels.
	epByAnchor map[anchor]map[*endpoint]struct{}
	nsByAnchor map[anchor]map[*namespace]struct{}
	// pos indexes the endpoints' large matchSets
	pos matchPositions
	gen uint64
}

func newIndex() index {
	return index{
		matchers:   map[string]*matcher{},
		byAnchor:   map[anchor]map[*matcher]struct{}{},
		epByAnchor: map[anchor]map[*endpoint]struct{}{},
		nsByAnchor: map[anchor]map[*namespace]struct{}{},
		pos:        matchPositions{},
	}
}

func chooseAnchor(s spec) anchor {
	if s.scope != "" {
		// a namespaced selector with a required label equality is filed under both, so that a
		// pod event tests only the selectors of its namespace that its labels can satisfy
		// (not every selector of the namespace)
		if s.ep != nil {
			if eq := s.ep.RequiredEqualities(); len(eq) > 0 {
				return scopeEq(s.scope, eq[0].Key, eq[0].Value)
			}
		}
		return anchor{kind: anchorScope, key: s.scope}
	}
	if s.ep != nil {
		if eq := s.ep.RequiredEqualities(); len(eq) > 0 {
			return anchor{kind: anchorEpEq, key: eq[0].Key, value: eq[0].Value}
		}
	}
	if s.ns != nil {
		if eq := s.ns.RequiredEqualities(); len(eq) > 0 {
			return anchor{kind: anchorNsEq, key: eq[0].Key, value: eq[0].Value}
		}
	}
	if s.ep != nil {
		if ks := s.ep.RequiredKeys(); len(ks) > 0 {
			return anchor{kind: anchorEpKey, key: ks[0]}
		}
	}
	if s.ns != nil {
		if ks := s.ns.RequiredKeys(); len(ks) > 0 {
			return anchor{kind: anchorNsKey, key: ks[0]}
		}
	}
	return anchor{kind: anchorNone}
}

// acquireMatcher returns the matcher of s with one more reference, creating it (and computing
// its members from the candidate endpoints of its anchor) if needed.
func (g *Graph) acquireMatcher(s spec) *matcher {
	k := s.key()
	if m := g.idx.matchers[k]; m != nil {
		m.refs++
		return m
	}
	m := &matcher{spec: s, key: k, anchor: chooseAnchor(s), refs: 1, policies: map[*policy]struct{}{}}
	g.idx.matchers[k] = m
	setmap.Add(g.idx.byAnchor, m.anchor, m)
	g.idx.ofKind[m.anchor.kind]++
	if a := m.anchor; filesEndpoints(a.kind) && g.idx.epByAnchor[a] == nil {
		eps := map[*endpoint]struct{}{}
		all := g.allEndpoints()
		if a.kind == anchorScopeEq {
			all = g.namespaceEndpoints(a.scope)
		}
		for e := range all {
			if v, ok := e.labels.Get(a.key); ok && (a.kind == anchorEpKey || v == a.value) {
				eps[e] = struct{}{}
			}
		}
		g.idx.epByAnchor[a] = eps
	}
	for e := range g.candidatesOf(m) {
		if m.match(e) {
			e.matches.add(m, g.idx.pos)
			if e.local {
				m.local++
			}
		}
	}
	return m
}

// candidatesOf yields the endpoints filed under m's anchor: every endpoint m can match.
func (g *Graph) candidatesOf(m *matcher) iter.Seq[*endpoint] {
	switch m.anchor.kind {
	case anchorScope:
		return g.namespaceEndpoints(m.spec.scope)
	case anchorScopeEq, anchorEpEq, anchorEpKey:
		return maps.Keys(g.idx.epByAnchor[m.anchor])
	case anchorNsEq, anchorNsKey:
		return endpointsOf(maps.Keys(g.idx.nsByAnchor[m.anchor]))
	}
	return g.allEndpoints()
}

// membersOf yields the endpoints m matches: the candidates of its anchor that list m. The index
// must be settled (no endpoint between its anchors' filing and its re-evaluation), as it is
// wherever a matcher's members are walked. A walk costs the candidates, not the members: equal
// for most anchors, but a selector whose only required part is a key (`app in (a, b)`) walks
// every endpoint with that key, and one with none walks every endpoint.
func (g *Graph) membersOf(m *matcher) iter.Seq[*endpoint] {
	return func(yield func(*endpoint) bool) {
		for e := range g.candidatesOf(m) {
			if e.matches.has(m, g.idx.pos) && !yield(e) {
				return
			}
		}
	}
}

func scopeEq(namespace, key, value string) anchor {
	return anchor{kind: anchorScopeEq, scope: namespace, key: key, value: value}
}

func (g *Graph) releaseMatcher(m *matcher) {
	m.refs--
	if m.refs > 0 {
		return
	}
	for e := range g.candidatesOf(m) { // before its anchor's candidates may go
		e.matches.remove(m, g.idx.pos)
	}
	delete(g.idx.matchers, m.key)
	setmap.Remove(g.idx.byAnchor, m.anchor, m)
	g.idx.ofKind[m.anchor.kind]--
	if _, ok := g.idx.byAnchor[m.anchor]; !ok {
		delete(g.idx.epByAnchor, m.anchor)
	}
}

// setMember records that m now does (in) or no longer does match e, and tells its users.
func (g *Graph) setMember(m *matcher, e *endpoint, in bool) {
	if in {
		e.matches.add(m, g.idx.pos)
	} else {
		e.matches.remove(m, g.idx.pos)
	}
	if e.local {
		if in {
			m.local++
		} else {
			m.local--
		}
		if len(m.policies) > 0 {
			g.dirtyEndpoints[e.key()] = struct{}{}
			for p := range m.policies {
				g.enqueue(p)
			}
		}
	}
	for _, s := range m.sets {
		g.contribute(s, e, in)
	}
	if in {
		g.addInSets(e, len(m.sets))
	} else {
		g.addInSets(e, -len(m.sets))
	}
}

// candidates calls f for every matcher filed under an anchor that e satisfies; every matcher
// that can match e is among them, and each is visited once (a matcher has one anchor).
func (g *Graph) candidates(e *endpoint, f func(*matcher)) {
	visit := func(a anchor) {
		if g.idx.ofKind[a.kind] == 0 {
			return
		}
		for m := range g.idx.byAnchor[a] {
			f(m)
		}
	}
	visit(anchor{kind: anchorNone})
	visit(anchor{kind: anchorScope, key: e.ns.name})
	for k, v := range e.labels.All() {
		visit(scopeEq(e.ns.name, k, v))
		visit(anchor{kind: anchorEpEq, key: k, value: v})
		visit(anchor{kind: anchorEpKey, key: k})
	}
	for k, v := range e.ns.labels {
		visit(anchor{kind: anchorNsEq, key: k, value: v})
		visit(anchor{kind: anchorNsKey, key: k})
	}
}

// reevaluate brings e's memberships up to date after its labels, namespace labels or service
// account labels changed (or it is new): only candidate matchers and current matches are tested.
func (g *Graph) reevaluate(e *endpoint) {
	g.idx.gen++
	gen := g.idx.gen
	var added []*matcher
	g.candidates(e, func(m *matcher) {
		if m.match(e) {
			m.mark = gen
			if !e.matches.has(m, g.idx.pos) {
				added = append(added, m)
			}
		}
	})
	var removed []*matcher
	for _, m := range e.matches.all() {
		if m.mark != gen {
			removed = append(removed, m)
		}
	}
	for _, m := range removed {
		g.setMember(m, e, false)
	}
	for _, m := range added {
		g.setMember(m, e, true)
	}
}

// filesEndpoints reports whether epByAnchor files endpoints under anchors of kind.
func filesEndpoints(kind anchorKind) bool {
	return kind == anchorScopeEq || kind == anchorEpEq || kind == anchorEpKey
}

func (g *Graph) fileEndpoint(e *endpoint, add bool) {
	if len(g.idx.epByAnchor) == 0 {
		return
	}
	for k, v := range e.labels.All() {
		for _, a := range [3]anchor{scopeEq(e.ns.name, k, v), {kind: anchorEpEq, key: k, value: v}, {kind: anchorEpKey, key: k}} {
			if g.idx.ofKind[a.kind] == 0 {
				continue
			}
			if eps := g.idx.epByAnchor[a]; eps != nil { // only the anchors matchers use
				if add {
					eps[e] = struct{}{}
				} else {
					delete(eps, e)
				}
			}
		}
	}
}

func (g *Graph) fileNamespace(ns *namespace, add bool) {
	for k, v := range ns.labels {
		if add {
			setmap.Add(g.idx.nsByAnchor, anchor{kind: anchorNsEq, key: k, value: v}, ns)
			setmap.Add(g.idx.nsByAnchor, anchor{kind: anchorNsKey, key: k}, ns)
		} else {
			setmap.Remove(g.idx.nsByAnchor, anchor{kind: anchorNsEq, key: k, value: v}, ns)
			setmap.Remove(g.idx.nsByAnchor, anchor{kind: anchorNsKey, key: k}, ns)
		}
	}
}

func (g *Graph) namespaceOf(name string) *namespace {
	ns := g.namespaces[name]
	if ns == nil {
		ns = &namespace{name: name, endpoints: map[string]*endpoint{}}
		g.namespaces[name] = ns
	}
	return ns
}

func (g *Graph) gcNamespace(ns *namespace) {
	if !ns.exists && len(ns.endpoints) == 0 {
		delete(g.namespaces, ns.name)
	}
}

func (g *Graph) accountOf(k accountKey) *account {
	a := g.accounts[k]
	if a == nil {
		a = &account{key: k}
		g.accounts[k] = a
	}
	return a
}

func (g *Graph) gcAccount(a *account) {
	if !a.exists && a.endpoints == 0 {
		delete(g.accounts, a.key)
	}
}

func (g *Graph) setNamespace(name string, labels map[string]string, present bool) {
	ns := g.namespaceOf(name)
	if present == ns.exists && sameLabels(ns.labels, labels) {
		return
	}
	g.fileNamespace(ns, false)
	ns.exists = present
	ns.labels = copyLabels(labels)
	if !present {
		ns.labels = nil
	}
	g.fileNamespace(ns, true)
	for _, e := range ns.endpoints {
		g.reevaluate(e)
	}
	g.gcNamespace(ns)
}

func (g *Graph) setAccount(k accountKey, labels map[string]string, present bool) {
	a := g.accountOf(k)
	if present == a.exists && sameLabels(a.labels, labels) {
		return
	}
	a.exists = present
	a.labels = copyLabels(labels)
	if !present {
		a.labels = nil
	}
	if ns := g.namespaces[k.namespace]; ns != nil && a.endpoints > 0 {
		for _, e := range ns.endpoints {
			if e.sa == a {
				g.reevaluate(e)
			}
		}
	}
	g.gcAccount(a)
}

func sameLabels(a selector.Map, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if w, ok := a[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func copyLabels(m map[string]string) selector.Map {
	c := make(selector.Map, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
