package graph

import (
	"sort"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Config configures a Graph.
type Config struct {
	// NodeName is this node: endpoints with Endpoint.Node == NodeName are local.
	NodeName string
	// ReportHost, if set, is called from Flush with each problem of a local host endpoint
	// (Problems lists them) when the endpoint first has it: once, not at every flush.
	ReportHost func(Problem)
}

// Problem is a diagnostic about bad input (an unparseable selector, an unknown tier, …). The
// object it names is handled fail-closed; every other object is unaffected.
type Problem struct {
	// Object names the input object, e.g. "NetworkPolicy/ns/name".
	Object  string
	Message string
}

func (p Problem) String() string { return p.Object + ": " + p.Message }

// Graph is the calculation graph: its stages, wired by New. It is not safe for concurrent use:
// one goroutine feeds it updates (OnUpdate) and asks for the resulting messages (Flush).
type Graph struct {
	index    *labelIndex
	policies *activePolicies
	sets     *setCalculator
	resolver *resolver
	seq      *sequencer
}

// New returns an empty graph holding model.DefaultTiers. It is the picture of the graph. Each
// update enters the first stage that cares (OnUpdate), and events flow downstream only (→):
//
//	endpoint, namespace, service account, network set → labelIndex
//	labelIndex →onEndpoint→ activePolicies →onEndpoint→ setCalculator →onEndpoint→ resolver
//	labelIndex →onNetSet→ activePolicies
//	policy, tier → activePolicies →acquireSet/releaseSet→ setCalculator
//	                              →onTiers→ resolver
//	route, host address → resolver
//	activePolicies, setCalculator, resolver →changes→ sequencer → Flush
//
// Upstream there are only queries: activePolicies and setCalculator ask labelIndex for matchers
// and their members, resolver asks activePolicies which policies select an endpoint and for
// tiers, and sequencer asks the stages for their objects' messages.
func New(cfg Config) *Graph {
	seq := newSequencer()
	index := newLabelIndex(cfg.NodeName)
	sets := newSetCalculator(index, seq)
	policies := newActivePolicies(index, sets, seq)
	res := newResolver(policies, seq)
	res.report = cfg.ReportHost
	index.wire(policies, policies)
	policies.wire(sets, res)
	sets.wire(res)
	seq.wire(sets, policies, res)
	return &Graph{index: index, policies: policies, sets: sets, resolver: res, seq: seq}
}

// OnUpdate applies one model update: it enters the first stage that cares, which tells the
// next; the active policies then settle what the update changed. Its effects are emitted by
// the next Flush.
func (g *Graph) OnUpdate(u model.Update) {
	switch u := u.(type) {
	case model.EndpointSet:
		g.index.setEndpoint(u.Endpoint)
	case model.EndpointDeleted:
		g.index.deleteEndpoint(u.Key)
	case model.NamespaceSet:
		g.index.setNamespace(u.Namespace.Name, u.Namespace.Labels, true)
	case model.NamespaceDeleted:
		g.index.setNamespace(u.Name, nil, false)
	case model.ServiceAccountSet:
		sa := u.ServiceAccount
		g.index.setAccount(accountKey{sa.Namespace, sa.Name}, sa.Labels, true)
	case model.ServiceAccountDeleted:
		g.index.setAccount(accountKey{u.Namespace, u.Name}, nil, false)
	case model.NetworkSetSet:
		g.index.setNetworkSet(u.NetworkSet)
	case model.NetworkSetDeleted:
		g.index.deleteNetworkSet(u.Key)
	case model.PolicySet:
		g.policies.setPolicy(u.Policy)
	case model.PolicyDeleted:
		g.policies.deletePolicy(u.Key)
	case model.TierSet:
		g.policies.setTier(u.Tier, true)
	case model.TierDeleted:
		g.policies.setTier(model.Tier{Name: u.Name}, false)
	case model.RouteSet:
		g.resolver.setRoute(u.Dst, u.Interface, true)
	case model.RouteDeleted:
		g.resolver.setRoute(u.Dst, "", false)
	case model.HostAddrSet:
		g.resolver.setHostAddr(u, true)
	case model.HostAddrDeleted:
		g.resolver.setHostAddr(model.HostAddrSet(u), false)
	case model.SyncStatusUpdate:
		if u.Status == model.InSync {
			g.seq.inSync = true
		}
	}
	g.policies.settle()
}

// Flush returns the messages that bring the dataplane from the state of the previous Flush to
// the current one, in the dependency order of internal/dataplane. Before the first
// SyncStatusUpdate{InSync} it returns nothing (changes accumulate); the first flush after it
// returns the full state followed by InSync{}.
func (g *Graph) Flush() []dataplane.Message { return g.seq.flush() }

// Problems returns the current diagnostics about bad input, sorted.
func (g *Graph) Problems() []Problem {
	out := append(g.policies.problems(), g.resolver.hostProblems()...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Object != out[j].Object {
			return out[i].Object < out[j].Object
		}
		return out[i].Message < out[j].Message
	})
	return out
}
