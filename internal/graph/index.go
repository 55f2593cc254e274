package graph

import (
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
	"github.com/nftpolicy/nftpolicy/internal/setmap"
)

// This file is the label index (stage 1): which endpoints each matcher (a scoped selector
// tuple) matches, maintained incrementally, and the updates of endpoints, namespaces and service
// accounts that change it. Its records are in endpoints.go.

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

// chooseAnchor is the anchor a matcher of s is filed under. Automatic labels that every
// endpoint carries (isUniversal) tell nothing apart and are not anchors, but for a selector
// requiring projectcalico.org/namespace == "x", which is filed as if scoped to namespace x.
func chooseAnchor(s spec) anchor {
	scope := s.scope
	if scope == "" && s.ep != nil {
		for _, eq := range s.ep.RequiredEqualities() {
			if eq.Key == labelNamespace {
				scope = eq.Value
				break
			}
		}
	}
	if scope != "" {
		// a namespaced selector with a required label equality is filed under both, so that a
		// pod event tests only the selectors of its namespace that its labels can satisfy
		// (not every selector of the namespace)
		if eq, ok := requiredEquality(s.ep); ok {
			return scopeEq(scope, eq.Key, eq.Value)
		}
		return anchor{kind: anchorScope, key: scope}
	}
	if eq, ok := requiredEquality(s.ep); ok {
		return anchor{kind: anchorEpEq, key: eq.Key, value: eq.Value}
	}
	if eq, ok := requiredEquality(s.ns); ok {
		return anchor{kind: anchorNsEq, key: eq.Key, value: eq.Value}
	}
	if k, ok := requiredKey(s.ep); ok {
		return anchor{kind: anchorEpKey, key: k}
	}
	if k, ok := requiredKey(s.ns); ok {
		return anchor{kind: anchorNsKey, key: k}
	}
	return anchor{kind: anchorNone}
}

// requiredEquality is the first key == value that every label set sel matches satisfies, of
// a key that tells label sets apart (not isUniversal).
func requiredEquality(sel *selector.Selector) (selector.KV, bool) {
	if sel != nil {
		for _, eq := range sel.RequiredEqualities() {
			if !isUniversal(eq.Key) {
				return eq, true
			}
		}
	}
	return selector.KV{}, false
}

// requiredKey is the first key that every label set sel matches carries, of a key that tells
// label sets apart (not isUniversal).
func requiredKey(sel *selector.Selector) (string, bool) {
	if sel != nil {
		for _, k := range sel.RequiredKeys() {
			if !isUniversal(k) {
				return k, true
			}
		}
	}
	return "", false
}

// matcher is a spec with the index's state. It does not list the endpoints it matches: each
// endpoint lists its matchers (e.matches), and membersOf finds a matcher's among the candidates
// of its anchor (a map of members per matcher would hold an entry per membership, for walks that
// happen only when a set is made, listed or dropped, and when a policy's selector changes).
// The stages that use a matcher keep their part of it here (one pointer each, no map per
// matcher in each stage): policies is the active policies stage's, sets the set calculator's.
type matcher struct {
	spec   spec
	key    string
	anchor anchor
	refs   int // policy selector uses + sets built on it
	// local counts the local endpoints matched.
	local int
	mark  uint64

	policies map[*policy]struct{} // active policies: the policies whose selector this is (nil: none)
	sets     []*set               // set calculator: the sets over this matcher
}

func (m *matcher) match(e *endpoint) bool {
	s := &m.spec
	if e.host && (!s.hosts || s.scope != "" || s.ns != nil || s.sa != nil) {
		return false
	}
	if s.scope != "" && e.ns.name != s.scope {
		return false
	}
	if s.ep != nil && !s.ep.Evaluate(e) {
		return false
	}
	if s.ns != nil && !s.ns.Evaluate(e.ns) {
		return false
	}
	return s.sa == nil || s.sa.Evaluate(e.sa)
}

// endpointListener is told of every change of an endpoint: its own update (added, changed,
// removed) or a change of its memberships by its namespace's or service account's labels. When
// it is told, the index is up to date (e.matches, m.local, e.net).
type endpointListener interface {
	onEndpoint(e *endpoint, ch endpointChange)
}

// endpointChange says what changed of an endpoint.
type endpointChange struct {
	// left and joined are the matchers e no longer and now matches.
	left, joined []*matcher
	// updated: the change is e's own update (then added or removed may be set); else only
	// its memberships changed.
	updated        bool
	added, removed bool
	// netChanged: its addresses or named ports changed; old is what they were (e.net now).
	netChanged bool
	old        netInfo
	// claim ranks the endpoint for the addresses it shares (its own update only).
	claim model.AddrClaim
	// host is a host endpoint's own part (its own update only; nil for a pod).
	host *model.HostEndpoint
}

// labelIndex is stage 1: the endpoints, namespaces and service accounts (store) and the
// matchers, with who matches what. It tells next (the active policies) of every endpoint
// change, once per endpoint, with the memberships it changed.
type labelIndex struct {
	node    string
	store   endpointStore
	scratch []byte // the packed addresses and named ports of the endpoint being set (appendNet)

	matchers map[string]*matcher
	byAnchor map[anchor]*setmap.Small[*matcher]
	// ofKind counts the matchers filed under each kind of anchor: a pod event looks up only the
	// kinds some matcher uses (each lookup hashes the anchor's strings; ≈ 15 per pod otherwise)
	ofKind [anchorKinds]int
	// epByAnchor files endpoints under the anchorEpKey anchors that matchers are filed under (an
	// entry, possibly empty, exists exactly while byAnchor has the anchor), and epByValue under
	// the anchorScopeEq/anchorEpEq anchors, by key: while some matcher is filed under
	// (namespace,) key == value for some value, every endpoint (of that namespace) with the key is
	// filed under its value. Most labels (pod-template-hash) are never selected on, and filing
	// every label of every endpoint would cost a map entry per label of every pod; filing by key
	// costs an entry per pod for each selected key, and a new anchor of an already filed key —
	// the thousandth selector `peer == 'p<i>'` of a namespace — costs no scan. An entry is built
	// by one scan of the endpoints (of its namespace, for anchorScopeEq) when its first matcher
	// appears. The members of a matcher are found among these candidates (membersOf): a
	// namespaced selector of 100 pods in a namespace of 10,000 walks 100, not 10,000. nsByAnchor
	// files namespaces under anchorNsEq/anchorNsKey of their labels.
	epByAnchor map[anchor]map[*endpoint]struct{}
	epByValue  map[anchor]*valueIndex
	nsByAnchor map[anchor]*setmap.Small[*namespace]
	// pos indexes the endpoints' large matchSets
	pos matchPositions
	gen uint64
	// left and joined are reevaluate's lists, reused
	left, joined []*matcher

	next endpointListener
	nets netSetListener
}

// netSetListener is told of every change of a network set and of a relabel of a namespace
// holding network sets (which namespace selectors pick them), after the store is updated.
type netSetListener interface {
	// onNetSet: old is the set before (nil when new), now after (nil when deleted).
	onNetSet(old, now *netSet)
	onNetSetNamespace(ns *namespace)
}

func newLabelIndex(node string) *labelIndex {
	return &labelIndex{
		node:       node,
		store:      newEndpointStore(),
		matchers:   map[string]*matcher{},
		byAnchor:   map[anchor]*setmap.Small[*matcher]{},
		epByAnchor: map[anchor]map[*endpoint]struct{}{},
		epByValue:  map[anchor]*valueIndex{},
		nsByAnchor: map[anchor]*setmap.Small[*namespace]{},
		pos:        matchPositions{},
	}
}

func (x *labelIndex) wire(next endpointListener, nets netSetListener) { x.next, x.nets = next, nets }

// setEndpoint applies an endpoint's update: its record and memberships, then tells next.
func (x *labelIndex) setEndpoint(in model.Endpoint) {
	m := keepEndpoint(in)
	local := m.Node == x.node
	e := x.store.endpoint(m.Key)
	if e != nil && (e.local != local || e.host != (m.Host != nil)) {
		// Moving between local and remote is rare: handle it as delete + add.
		x.deleteEndpoint(m.Key)
		e = nil
	}
	x.scratch = appendNet(x.scratch[:0], m.Addrs, m.NamedPorts)
	if e == nil {
		e = x.store.add(&m, netInfo(x.scratch), local)
		x.fileEndpoint(e, true)
		ch := endpointChange{updated: true, added: true, claim: m.Claim(), host: m.Host}
		ch.left, ch.joined = x.reevaluate(e)
		x.tell(e, ch)
		return
	}
	ch := endpointChange{updated: true, claim: m.Claim(), host: m.Host}
	if e.labels != m.Labels || m.ServiceAccount != e.account() {
		x.fileEndpoint(e, false) // under its labels before: the service account's is one
		if m.ServiceAccount != e.account() {
			x.store.setAccount(e, m.ServiceAccount)
		}
		e.labels = m.Labels
		x.fileEndpoint(e, true)
		ch.left, ch.joined = x.reevaluate(e)
	}
	if string(x.scratch) != string(e.net) {
		ch.old, ch.netChanged = e.net, true
		e.net = netInfo(x.scratch)
	}
	x.tell(e, ch)
}

// tell tells next of e's change, then clears reevaluate's lists.
func (x *labelIndex) tell(e *endpoint, ch endpointChange) {
	x.next.onEndpoint(e, ch)
	clear(x.left)
	clear(x.joined)
}

func (x *labelIndex) deleteEndpoint(k model.EndpointKey) {
	e := x.store.endpoint(k)
	if e == nil {
		return
	}
	left := slices.Clone(e.matches.all())
	for _, m := range left {
		x.setMember(m, e, false)
	}
	x.fileEndpoint(e, false)
	x.store.remove(e)
	x.next.onEndpoint(e, endpointChange{updated: true, removed: true, left: left})
}

// setNamespace applies a namespace's update: a relabel of each of its endpoints.
func (x *labelIndex) setNamespace(name string, labels map[string]string, present bool) {
	ns := x.store.namespaceOf(name)
	if present == ns.exists && sameLabels(ns.labels, labels) {
		return
	}
	x.fileNamespace(ns, false)
	x.store.relabelNamespace(ns, labels, present)
	x.fileNamespace(ns, true)
	for _, e := range ns.endpoints {
		x.relabel(e)
	}
	if len(ns.netSets) > 0 {
		x.nets.onNetSetNamespace(ns)
	}
	x.store.gcNamespace(ns)
}

// setNetworkSet applies a network set's update and tells nets. A network set is not filed
// under anchors: the few there are are walked when a peer's picks are computed (netSetsOf).
func (x *labelIndex) setNetworkSet(in model.NetworkSet) {
	old := x.store.netSet(in.Key)
	if old != nil && old.labels == in.Labels && slices.Equal(old.nets, in.Nets) {
		return
	}
	x.nets.onNetSet(old, x.store.putNetSet(in))
}

func (x *labelIndex) deleteNetworkSet(k model.NetworkSetKey) {
	if old := x.store.netSet(k); old != nil {
		x.store.removeNetSet(old)
		x.nets.onNetSet(old, nil)
	}
}

// appendPickedNets appends to dst the nets of every network set p picks, in no order.
func (x *labelIndex) appendPickedNets(dst []netip.Prefix, p *netPick) []netip.Prefix {
	add := func(sets iter.Seq[*netSet]) {
		for n := range sets {
			if p.picks(n) {
				dst = append(dst, n.nets...)
			}
		}
	}
	switch {
	case p.global:
		add(x.store.netSetsIn(""))
	case p.scope != "":
		add(x.store.netSetsIn(p.scope))
	case p.namespaced:
		add(x.store.namespacedNetSets())
	default:
		add(x.store.netSetsIn(""))
		add(x.store.namespacedNetSets())
	}
	return dst
}

// setAccount applies a service account's update: a relabel of each of its endpoints.
func (x *labelIndex) setAccount(k accountKey, labels map[string]string, present bool) {
	a := x.store.accountOf(k)
	if x.store.relabelAccount(a, labels, present) {
		for e := range x.store.ofAccount(a) {
			x.relabel(e)
		}
	}
	x.store.gcAccount(a)
}

// acquireMatcher returns the matcher of s with one more reference, creating it (and computing
// its members from the candidate endpoints of its anchor) if needed. Its members are not told
// downstream: the caller is the matcher's new user.
func (x *labelIndex) acquireMatcher(s spec) *matcher {
	k := s.key()
	if m := x.matchers[k]; m != nil {
		m.refs++
		return m
	}
	m := &matcher{spec: s, key: k, anchor: chooseAnchor(s), refs: 1}
	x.matchers[k] = m
	_, filed := x.byAnchor[m.anchor]
	setmap.AddSmall(x.byAnchor, m.anchor, m)
	x.ofKind[m.anchor.kind]++
	if !filed {
		x.fileAnchor(m.anchor)
	}
	for e := range x.candidatesOf(m) {
		if m.match(e) {
			e.matches.add(m, x.pos)
			if e.local {
				m.local++
			}
		}
	}
	return m
}

// candidatesOf yields the endpoints filed under m's anchor: every endpoint m can match.
func (x *labelIndex) candidatesOf(m *matcher) iter.Seq[*endpoint] {
	switch m.anchor.kind {
	case anchorScope:
		return x.store.inNamespace(m.anchor.key)
	case anchorScopeEq, anchorEpEq:
		if vi := x.epByValue[byKey(m.anchor)]; vi != nil {
			return vi.values[m.anchor.value].All()
		}
		return (*setmap.Small[*endpoint])(nil).All()
	case anchorEpKey:
		return maps.Keys(x.epByAnchor[m.anchor])
	case anchorNsEq, anchorNsKey:
		return endpointsOf(x.nsByAnchor[m.anchor].All())
	}
	return x.store.all()
}

// membersOf is the endpoints m matches: the candidates of its anchor that list m, walked by
// members.all. The index must be settled (no endpoint between its anchors' filing and its
// re-evaluation), as it is wherever a matcher's members are walked. A walk costs the
// candidates, not the members: equal for most anchors, but a selector whose only required part
// is a key (`app in (a, b)`) walks every endpoint with that key, and one with none walks every
// endpoint.
func (x *labelIndex) membersOf(m *matcher) members { return members{x, m} }

// members is a matcher's members (membersOf). It is a value, not a closure, so that a stage
// asking for them through an interface allocates nothing to walk them.
type members struct {
	x *labelIndex
	m *matcher
}

// all yields the members.
func (ms members) all(yield func(*endpoint) bool) {
	for e := range ms.x.candidatesOf(ms.m) {
		if e.matches.has(ms.m, ms.x.pos) && !yield(e) {
			return
		}
	}
}

// matchedBy reports whether m matches e.
func (x *labelIndex) matchedBy(e *endpoint, m *matcher) bool { return e.matches.has(m, x.pos) }

func scopeEq(namespace, key, value string) anchor {
	return anchor{kind: anchorScopeEq, scope: namespace, key: key, value: value}
}

func (x *labelIndex) releaseMatcher(m *matcher) {
	m.refs--
	if m.refs > 0 {
		return
	}
	for e := range x.candidatesOf(m) { // before its anchor's candidates may go
		e.matches.remove(m, x.pos)
	}
	delete(x.matchers, m.key)
	setmap.RemoveSmall(x.byAnchor, m.anchor, m)
	x.ofKind[m.anchor.kind]--
	if _, ok := x.byAnchor[m.anchor]; !ok {
		x.unfileAnchor(m.anchor)
	}
}

// valueIndex files the endpoints with one label key (in one namespace, for anchorScopeEq) by
// the key's value, for the anchors of that key that matchers are filed under (anchors).
type valueIndex struct {
	anchors int
	values  map[string]*setmap.Small[*endpoint]
}

// byKey is the epByValue entry of an anchorScopeEq or anchorEpEq anchor: a without its value.
func byKey(a anchor) anchor {
	a.value = ""
	return a
}

// fileAnchor files the endpoints under a, the anchor of a new matcher that no other matcher
// has: one scan of the candidate endpoints when a is the first anchor of its key, else none.
func (x *labelIndex) fileAnchor(a anchor) {
	switch a.kind {
	case anchorScopeEq, anchorEpEq:
		if vi := x.epByValue[byKey(a)]; vi != nil {
			vi.anchors++
			return
		}
		vi := &valueIndex{anchors: 1, values: map[string]*setmap.Small[*endpoint]{}}
		all := x.store.all()
		if a.kind == anchorScopeEq {
			all = x.store.inNamespace(a.scope)
		}
		for e := range all {
			if v, ok := e.Get(a.key); ok {
				setmap.AddSmall(vi.values, v, e)
			}
		}
		x.epByValue[byKey(a)] = vi
	case anchorEpKey:
		eps := map[*endpoint]struct{}{}
		for e := range x.store.all() {
			if _, ok := e.Get(a.key); ok {
				eps[e] = struct{}{}
			}
		}
		x.epByAnchor[a] = eps
	}
}

// unfileAnchor drops what fileAnchor filed once a's last matcher is gone.
func (x *labelIndex) unfileAnchor(a anchor) {
	switch a.kind {
	case anchorScopeEq, anchorEpEq:
		if vi := x.epByValue[byKey(a)]; vi != nil {
			if vi.anchors--; vi.anchors == 0 {
				delete(x.epByValue, byKey(a))
			}
		}
	case anchorEpKey:
		delete(x.epByAnchor, a)
	}
}

// relabel re-evaluates e after its namespace's or service account's labels changed and tells
// next what changed.
func (x *labelIndex) relabel(e *endpoint) {
	var ch endpointChange
	if ch.left, ch.joined = x.reevaluate(e); len(ch.left) > 0 || len(ch.joined) > 0 {
		x.tell(e, ch)
	}
}

// setMember records that m now does (in) or no longer does match e.
func (x *labelIndex) setMember(m *matcher, e *endpoint, in bool) {
	if in {
		e.matches.add(m, x.pos)
	} else {
		e.matches.remove(m, x.pos)
	}
	if e.local {
		if in {
			m.local++
		} else {
			m.local--
		}
	}
}

// candidates calls f for every matcher filed under an anchor that e satisfies; every matcher
// that can match e is among them, and each is visited once (a matcher has one anchor).
func (x *labelIndex) candidates(e *endpoint, f func(*matcher)) {
	visit := func(a anchor) {
		if x.ofKind[a.kind] == 0 {
			return
		}
		x.byAnchor[a].Each(f)
	}
	visit(anchor{kind: anchorNone})
	visit(anchor{kind: anchorScope, key: e.ns.name})
	for k, v := range e.allLabels() {
		if isUniversal(k) {
			continue // no anchor (chooseAnchor)
		}
		visit(scopeEq(e.ns.name, k, v))
		visit(anchor{kind: anchorEpEq, key: k, value: v})
		visit(anchor{kind: anchorEpKey, key: k})
	}
	for k, v := range e.ns.allLabels() {
		visit(anchor{kind: anchorNsEq, key: k, value: v})
		visit(anchor{kind: anchorNsKey, key: k})
	}
}

// reevaluate brings e's memberships up to date after its labels, namespace labels or service
// account labels changed (or it is new): only candidate matchers and current matches are tested.
// It returns the matchers e left and joined, in the index's scratch lists (valid until tell).
func (x *labelIndex) reevaluate(e *endpoint) (left, joined []*matcher) {
	x.gen++
	gen := x.gen
	added := x.joined[:0]
	x.candidates(e, func(m *matcher) {
		if m.match(e) {
			m.mark = gen
			if !e.matches.has(m, x.pos) {
				added = append(added, m)
			}
		}
	})
	removed := x.left[:0]
	for _, m := range e.matches.all() {
		if m.mark != gen {
			removed = append(removed, m)
		}
	}
	for _, m := range removed {
		x.setMember(m, e, false)
	}
	for _, m := range added {
		x.setMember(m, e, true)
	}
	x.left, x.joined = removed, added
	return removed, added
}

func (x *labelIndex) fileEndpoint(e *endpoint, add bool) {
	if len(x.epByAnchor) == 0 && len(x.epByValue) == 0 {
		return
	}
	for k, v := range e.allLabels() {
		if isUniversal(k) {
			continue // no anchor (chooseAnchor)
		}
		for _, a := range [2]anchor{{kind: anchorScopeEq, scope: e.ns.name, key: k}, {kind: anchorEpEq, key: k}} {
			if x.ofKind[a.kind] == 0 {
				continue
			}
			if vi := x.epByValue[a]; vi != nil { // only the keys matchers use
				if add {
					setmap.AddSmall(vi.values, v, e)
				} else {
					setmap.RemoveSmall(vi.values, v, e)
				}
			}
		}
		if x.ofKind[anchorEpKey] == 0 {
			continue
		}
		if eps := x.epByAnchor[anchor{kind: anchorEpKey, key: k}]; eps != nil {
			if add {
				eps[e] = struct{}{}
			} else {
				delete(eps, e)
			}
		}
	}
}

func (x *labelIndex) fileNamespace(ns *namespace, add bool) {
	for k, v := range ns.allLabels() {
		if add {
			setmap.AddSmall(x.nsByAnchor, anchor{kind: anchorNsEq, key: k, value: v}, ns)
			setmap.AddSmall(x.nsByAnchor, anchor{kind: anchorNsKey, key: k}, ns)
		} else {
			setmap.RemoveSmall(x.nsByAnchor, anchor{kind: anchorNsEq, key: k, value: v}, ns)
			setmap.RemoveSmall(x.nsByAnchor, anchor{kind: anchorNsKey, key: k}, ns)
		}
	}
}
