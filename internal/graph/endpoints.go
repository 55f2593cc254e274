package graph

import (
	"iter"
	"maps"
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// This file is the label index's records: the endpoints, their namespaces and service
// accounts, the network sets, and the life cycles of the namespaces and service accounts
// (endpointStore).

// endpoint is what the graph keeps of a model.Endpoint: its labels as the update handed them
// over, its addresses and named ports packed (not its node, which local says, nor its service
// account's name, which sa's key holds). The label index owns it; inSets is the set
// calculator's.
type endpoint struct {
	name   string // the pod's; its namespace is ns's
	labels model.Labels
	net    netInfo
	ns     *namespace
	sa     *account // nil without a service account
	local  bool
	// host: a host endpoint (in namespace "", which no Kubernetes namespace can be named)
	host bool
	// inSets counts the sets over the matchers matching the endpoint (set calculator, set.go).
	inSets int32
	// matches holds every live matcher that matches the endpoint.
	matches matchSet
}

// key is e's namespace and name.
func (e *endpoint) key() model.EndpointKey {
	return model.EndpointKey{Namespace: e.ns.name, Name: e.name}
}

// account is the name of e's service account ("" for none).
func (e *endpoint) account() string {
	if e.sa == nil {
		return ""
	}
	return e.sa.key.name
}

// holds reports whether a is one of e's addresses.
func (e *endpoint) holds(a netip.Addr) bool {
	for b := range e.net.addrs() {
		if b == a {
			return true
		}
	}
	return false
}

type namespace struct {
	name      string
	labels    selector.Map // nil while the namespace object is unknown
	exists    bool
	endpoints map[string]*endpoint // by pod name: the graph's one map of endpoints
	netSets   map[string]*netSet   // its network sets by name (nil: none)
}

// netSet is what the graph keeps of a model.NetworkSet: its labels and nets as the update
// handed them over. ns is its namespace, nil for a cluster-scoped one (GlobalNetworkSet).
type netSet struct {
	name   string
	ns     *namespace
	labels model.Labels
	nets   []netip.Prefix
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

// endpointStore holds every endpoint, by namespace, and the namespaces and service accounts
// they or the sources name. A namespace or account exists while its object does or an
// endpoint refers to it.
type endpointStore struct {
	namespaces map[string]*namespace
	accounts   map[accountKey]*account
	// globalNets are the cluster-scoped network sets by name; namespaced ones are their
	// namespace's.
	globalNets map[string]*netSet
}

func newEndpointStore() endpointStore {
	return endpointStore{namespaces: map[string]*namespace{}, accounts: map[accountKey]*account{},
		globalNets: map[string]*netSet{}}
}

// netSet returns the network set of k, nil if there is none.
func (st *endpointStore) netSet(k model.NetworkSetKey) *netSet {
	if k.Namespace == "" {
		return st.globalNets[k.Name]
	}
	if ns := st.namespaces[k.Namespace]; ns != nil {
		return ns.netSets[k.Name]
	}
	return nil
}

// putNetSet stores n (new or replacing the set of its key), holding its namespace.
func (st *endpointStore) putNetSet(in model.NetworkSet) *netSet {
	n := &netSet{name: in.Key.Name, labels: in.Labels, nets: in.Nets}
	if in.Key.Namespace == "" {
		st.globalNets[n.name] = n
		return n
	}
	n.ns = st.namespaceOf(in.Key.Namespace)
	if n.ns.netSets == nil {
		n.ns.netSets = map[string]*netSet{}
	}
	n.ns.netSets[n.name] = n
	return n
}

// removeNetSet drops n.
func (st *endpointStore) removeNetSet(n *netSet) {
	if n.ns == nil {
		delete(st.globalNets, n.name)
		return
	}
	delete(n.ns.netSets, n.name)
	if len(n.ns.netSets) == 0 {
		n.ns.netSets = nil
	}
	st.gcNamespace(n.ns)
}

// netSetsIn yields the network sets of namespace name ("" for the cluster-scoped ones).
func (st *endpointStore) netSetsIn(name string) iter.Seq[*netSet] {
	if name == "" {
		return maps.Values(st.globalNets)
	}
	if ns := st.namespaces[name]; ns != nil {
		return maps.Values(ns.netSets)
	}
	return func(func(*netSet) bool) {}
}

// namespacedNetSets yields every namespaced network set.
func (st *endpointStore) namespacedNetSets() iter.Seq[*netSet] {
	return func(yield func(*netSet) bool) {
		for _, ns := range st.namespaces {
			for _, n := range ns.netSets {
				if !yield(n) {
					return
				}
			}
		}
	}
}

// endpoint returns the endpoint of k, nil if there is none.
func (st *endpointStore) endpoint(k model.EndpointKey) *endpoint {
	if ns := st.namespaces[k.Namespace]; ns != nil {
		return ns.endpoints[k.Name]
	}
	return nil
}

// add stores a new endpoint of m with net, in its namespace and service account.
func (st *endpointStore) add(m *model.Endpoint, net netInfo, local bool) *endpoint {
	e := &endpoint{name: m.Key.Name, labels: m.Labels, net: net, local: local, host: m.Host != nil}
	e.ns = st.namespaceOf(m.Key.Namespace)
	e.ns.endpoints[e.name] = e
	st.setAccount(e, m.ServiceAccount)
	return e
}

// remove drops e from its namespace and service account.
func (st *endpointStore) remove(e *endpoint) {
	delete(e.ns.endpoints, e.name)
	st.gcNamespace(e.ns)
	st.setAccount(e, "")
}

// setAccount moves e to its namespace's service account name ("" for none).
func (st *endpointStore) setAccount(e *endpoint, name string) {
	if e.sa != nil {
		e.sa.endpoints--
		st.gcAccount(e.sa)
		e.sa = nil
	}
	if name != "" {
		e.sa = st.accountOf(accountKey{e.ns.name, name})
		e.sa.endpoints++
	}
}

// all yields every endpoint, namespace by namespace.
func (st *endpointStore) all() iter.Seq[*endpoint] { return endpointsOf(maps.Values(st.namespaces)) }

// inNamespace yields the endpoints of namespace name.
func (st *endpointStore) inNamespace(name string) iter.Seq[*endpoint] {
	if ns := st.namespaces[name]; ns != nil {
		return maps.Values(ns.endpoints)
	}
	return func(func(*endpoint) bool) {}
}

// endpointsOf yields the endpoints of the namespaces nss.
func endpointsOf(nss iter.Seq[*namespace]) iter.Seq[*endpoint] {
	return func(yield func(*endpoint) bool) {
		for ns := range nss {
			for _, e := range ns.endpoints {
				if !yield(e) {
					return
				}
			}
		}
	}
}

func (st *endpointStore) namespaceOf(name string) *namespace {
	ns := st.namespaces[name]
	if ns == nil {
		ns = &namespace{name: name, endpoints: map[string]*endpoint{}}
		st.namespaces[name] = ns
	}
	return ns
}

func (st *endpointStore) gcNamespace(ns *namespace) {
	if !ns.exists && len(ns.endpoints) == 0 && len(ns.netSets) == 0 {
		delete(st.namespaces, ns.name)
	}
}

func (st *endpointStore) accountOf(k accountKey) *account {
	a := st.accounts[k]
	if a == nil {
		a = &account{key: k}
		st.accounts[k] = a
	}
	return a
}

func (st *endpointStore) gcAccount(a *account) {
	if !a.exists && a.endpoints == 0 {
		delete(st.accounts, a.key)
	}
}

// relabelNamespace sets the namespace object's presence and labels.
func (st *endpointStore) relabelNamespace(ns *namespace, labels map[string]string, present bool) {
	ns.exists = present
	ns.labels = copyLabels(labels)
	if !present {
		ns.labels = nil
	}
}

// relabelAccount sets the account object's presence and labels; it reports whether it changed.
func (st *endpointStore) relabelAccount(a *account, labels map[string]string, present bool) bool {
	if present == a.exists && sameLabels(a.labels, labels) {
		return false
	}
	a.exists = present
	a.labels = copyLabels(labels)
	if !present {
		a.labels = nil
	}
	return true
}

// ofAccount yields the endpoints of a.
func (st *endpointStore) ofAccount(a *account) iter.Seq[*endpoint] {
	return func(yield func(*endpoint) bool) {
		ns := st.namespaces[a.key.namespace]
		if ns == nil || a.endpoints == 0 {
			return
		}
		for _, e := range ns.endpoints {
			if e.sa == a && !yield(e) {
				return
			}
		}
	}
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

// keepEndpoint is the endpoint as the graph keeps it: the update's labels, addresses and named
// ports are kept as they are (updates are handed over, see model.Update); addresses are copied
// only when they need normalising (invalid ones dropped, IPv4-mapped ones unmapped, zones
// dropped: set members are plain addresses).
func keepEndpoint(in model.Endpoint) model.Endpoint {
	m := in
	if slices.ContainsFunc(in.Addrs, func(a netip.Addr) bool { return !a.IsValid() || a.Is4In6() || a.Zone() != "" }) {
		m.Addrs = make([]netip.Addr, 0, len(in.Addrs))
		for _, a := range in.Addrs {
			if a.IsValid() {
				m.Addrs = append(m.Addrs, a.Unmap().WithZone(""))
			}
		}
	}
	return m
}
