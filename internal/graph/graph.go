package graph

import (
	"net/netip"
	"sort"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Config configures a Graph.
type Config struct {
	// NodeName is this node: endpoints with Endpoint.Node == NodeName are local.
	NodeName string
}

// Problem is a diagnostic about bad input (an unparseable selector, an unknown tier, …). The
// object it names is handled fail-closed; every other object is unaffected.
type Problem struct {
	// Object names the input object, e.g. "NetworkPolicy/ns/name".
	Object  string
	Message string
}

func (p Problem) String() string { return p.Object + ": " + p.Message }

// Graph is the calculation graph. It is not safe for concurrent use: one goroutine feeds it
// updates (OnUpdate) and asks for the resulting messages (Flush).
type Graph struct {
	cfg Config
	// scratch holds the packed addresses and named ports of the endpoint being set (appendNet)
	scratch []byte

	inSync     bool
	sentInSync bool

	local      map[model.EndpointKey]*endpoint
	namespaces map[string]*namespace
	accounts   map[accountKey]*account
	policies   map[model.PolicyKey]*policy
	tiers      map[string]model.Tier
	routes     map[netip.Addr]string
	hostAddrs  map[netip.Addr]struct{}

	idx     index
	holders addrIndex
	owners  addrOwners
	sets    map[dataplane.SetID]*set

	queue []*policy // policies whose activity or rules must be re-settled

	dirtySets      map[dataplane.SetID]struct{}
	dirtyPolicies  map[model.PolicyKey]struct{}
	dirtyEndpoints map[model.EndpointKey]struct{}

	sentSets      map[dataplane.SetID]struct{}
	sentPolicies  map[model.PolicyKey]*dataplane.PolicyUpdated
	sentEndpoints map[model.EndpointKey]*dataplane.EndpointUpdated
}

// New returns an empty graph holding model.DefaultTiers.
func New(cfg Config) *Graph {
	g := &Graph{
		cfg:            cfg,
		local:          map[model.EndpointKey]*endpoint{},
		namespaces:     map[string]*namespace{},
		accounts:       map[accountKey]*account{},
		policies:       map[model.PolicyKey]*policy{},
		tiers:          map[string]model.Tier{},
		routes:         map[netip.Addr]string{},
		hostAddrs:      map[netip.Addr]struct{}{},
		idx:            newIndex(),
		holders:        newAddrIndex(),
		owners:         newAddrOwners(),
		sets:           map[dataplane.SetID]*set{},
		dirtySets:      map[dataplane.SetID]struct{}{},
		dirtyPolicies:  map[model.PolicyKey]struct{}{},
		dirtyEndpoints: map[model.EndpointKey]struct{}{},
		sentSets:       map[dataplane.SetID]struct{}{},
		sentPolicies:   map[model.PolicyKey]*dataplane.PolicyUpdated{},
		sentEndpoints:  map[model.EndpointKey]*dataplane.EndpointUpdated{},
	}
	for _, t := range model.DefaultTiers() {
		g.tiers[t.Name] = t
	}
	return g
}

// OnUpdate applies one model update. Its effects are emitted by the next Flush.
func (g *Graph) OnUpdate(u model.Update) {
	switch u := u.(type) {
	case model.EndpointSet:
		g.setEndpoint(u.Endpoint)
	case model.EndpointDeleted:
		g.deleteEndpoint(u.Key)
	case model.NamespaceSet:
		g.setNamespace(u.Namespace.Name, u.Namespace.Labels, true)
	case model.NamespaceDeleted:
		g.setNamespace(u.Name, nil, false)
	case model.ServiceAccountSet:
		sa := u.ServiceAccount
		g.setAccount(accountKey{sa.Namespace, sa.Name}, sa.Labels, true)
	case model.ServiceAccountDeleted:
		g.setAccount(accountKey{u.Namespace, u.Name}, nil, false)
	case model.PolicySet:
		g.setPolicy(u.Policy)
	case model.PolicyDeleted:
		g.deletePolicy(u.Key)
	case model.TierSet:
		g.setTier(u.Tier, true)
	case model.TierDeleted:
		g.setTier(model.Tier{Name: u.Name}, false)
	case model.RouteSet:
		g.setRoute(u.Dst, u.Interface, true)
	case model.RouteDeleted:
		g.setRoute(u.Dst, "", false)
	case model.HostAddrSet:
		g.hostAddrs[u.Addr.Unmap()] = struct{}{}
	case model.HostAddrDeleted:
		delete(g.hostAddrs, u.Addr.Unmap())
	case model.SyncStatusUpdate:
		if u.Status == model.InSync {
			g.inSync = true
		}
	}
	g.settle()
}

// Problems returns the current diagnostics about bad input, sorted.
func (g *Graph) Problems() []Problem {
	var out []Problem
	for _, p := range g.policies {
		out = append(out, p.problems...)
		if _, ok := g.tiers[p.m.Tier]; !ok {
			out = append(out, Problem{Object: p.key.String(), Message: "unknown tier " + quote(p.m.Tier) + ": policy not applied"})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Object != out[j].Object {
			return out[i].Object < out[j].Object
		}
		return out[i].Message < out[j].Message
	})
	return out
}

func (g *Graph) setTier(t model.Tier, present bool) {
	if present {
		g.tiers[t.Name] = t
	} else {
		delete(g.tiers, t.Name)
	}
	// Tier order and default actions appear in every local endpoint's lists.
	for k := range g.local {
		g.dirtyEndpoints[k] = struct{}{}
	}
	for _, p := range g.policies {
		if p.m.Tier == t.Name {
			g.enqueue(p)
		}
	}
}

func (g *Graph) setRoute(dst netip.Prefix, iface string, present bool) {
	if !dst.IsValid() || !dst.IsSingleIP() {
		return
	}
	a := dst.Addr().Unmap()
	if present {
		g.routes[a] = iface
	} else {
		delete(g.routes, a)
	}
	g.dirtyHolders(a)
}
