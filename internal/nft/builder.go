package nft

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// DefaultTable is the name of the one table nftpolicy owns.
const DefaultTable = "nftpolicy"

// Priorities of the base chains (filter = 0). kube-proxy's nftables mode filters at 0 and DNATs
// at -100, Felix's nftables mode uses its own table at filter priorities ±0, kube-network-policies
// queues packets from the postrouting hook (srcnat - 5) of its own table; 7 and 8 on the forward
// hook are used by none of them. Egress is judged at 7, ingress at 8: an accept in the egress
// chain ends only that base chain, so the ingress chain still judges same-node traffic.
const (
	PriorityEgress  int32 = 7
	PriorityIngress int32 = 8
)

// The base chains on the forward hook, where traffic between pods and to other nodes is judged:
// the chains a walk of the table (internal/explain) starts from.
const (
	ChainForwardEgress  = "forward_egress"
	ChainForwardIngress = "forward_ingress"
	// ChainInputHost and ChainOutputHost are the base chains of the node's own traffic, to
	// it (input hook) and from it (output hook): where host endpoints are judged (host.go).
	ChainInputHost  = chainInput
	ChainOutputHost = chainOutput
)

// Names of the other fixed objects of the table.
const (
	chainInput        = "input_host"
	chainOutput       = "output_host"
	mapIngressV4      = "ingress_v4"
	mapIngressV6      = "ingress_v6"
	mapEgressV4       = "egress_v4"
	mapEgressV6       = "egress_v6"
	setSourcesV4      = "sources_v4"
	setSourcesV6      = "sources_v6"
	chainSpoofed      = "deny_spoofed"
	chainUnprogrammed = "deny_unprogrammed"
)

// Config configures a Builder.
type Config struct {
	// Table is the table's name (DefaultTable when empty).
	Table string
	// WorkloadPrefixes are the name prefixes of the interfaces that lead to pods ("veth",
	// "cali"). A packet forwarded from such an interface passes only if its source address is
	// one of the local endpoint's that the interface leads to: a spoofed source, or any traffic
	// of a workload interface whose endpoint is not programmed yet, is dropped (fail closed).
	// A prefix is checked from the moment a local pod is seen behind an interface of it (the
	// pod's host route, or its bridge port, leads to it); on a bridge the inet hooks see the
	// bridge, and internal/nft/kernel's bridge companion checks the ports by the same prefixes
	// and sources. Empty: no such check.
	WorkloadPrefixes []string
	Logger           *slog.Logger
	// CompileBudget bounds the work of one group's compile (DefaultCompileBudget when 0).
	CompileBudget int64
	// DenyLog, if set, makes the deny chains log what they drop (denylog.go).
	DenyLog *DenyLog
	// CountAllowed makes every accepting rule and every set or map element that accepts count
	// its packets (counts.go); deny chains always count.
	CountAllowed bool
	// Rejected, if set, is called for each policy the builder stops enforcing as written
	// (State.reject): the compile of a group it is in exceeded the compiler's budget, or the
	// kernel refused an object of such a group when the table was written whole (Refused).
	// reason says which, and what. It is also logged.
	Rejected func(key model.PolicyKey, reason string)
	// Host configures the policing of the node's own traffic (host endpoints, host.go).
	Host HostConfig
}

// options are the settings of a Builder that shape the table it builds.
type options struct {
	prefixes     []string // Config.WorkloadPrefixes
	denyLog      *DenyLog
	countAllowed bool
	rejected     func(key model.PolicyKey, reason string)
	log          *slog.Logger
	noUnion      bool // compile union-shaped groups as plans (tests compare the two)
	host         HostConfig
}

// Builder folds the graph's messages into the desired table: it holds the State, lays its
// compiled groups out as chains, maps and elements of a ruleset.Table, and reports each apply's
// changes for a committer. It touches no kernel. Its methods are called from one goroutine;
// ReasonOrigin from any.
type Builder struct {
	opts    options
	state   *State
	table   *ruleset.Table
	layout  layout  // endpoints, groups, active workload prefixes
	objects objects // the reference-counted shared objects: class chains, shared sets, deny chains
	index   index   // what incremental work looks up
	pending pending // the work and changes of the current apply
	sizes   setSizes
	// policyTiers holds each policy's key and tier by its key's String, for ReasonOrigin, which
	// reads it on any goroutine
	policyTiers policyTiers
	// counted is the snapshot Counted returned last (nil before the first)
	counted *Counted
	inSync  bool
	// domains maps the name of each domain set the table declares to its pattern (DomainNames);
	// a set's entry goes when its last reference does, so it holds 2 × the patterns in use
	domains map[string]string
}

// NewBuilder returns a builder of an empty table: its fixed part (base chains, dispatch maps).
func NewBuilder(cfg Config) *Builder {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Builder{
		opts: options{prefixes: cfg.WorkloadPrefixes, denyLog: cfg.DenyLog, countAllowed: cfg.CountAllowed,
			rejected: cfg.Rejected, log: cfg.Logger, host: cfg.Host},
		state:   NewState(),
		table:   ruleset.NewTable(cfg.Table),
		layout:  newLayout(),
		objects: newObjects(),
		index:   newIndex(),
		pending: newPending(),
		sizes:   setSizes{},
	}
	if cfg.CompileBudget > 0 {
		b.state.compileBudget = cfg.CompileBudget
	}
	b.state.logs = cfg.DenyLog != nil // Log rules log to the deny log's group
	b.addSkeleton()
	return b
}

// Table returns the desired table (read-only for the caller).
func (b *Builder) Table() *ruleset.Table { return b.table }

// Render returns the desired table in `nft -f` syntax.
func (b *Builder) Render() string { return ruleset.Render(b.table) }

// InSync reports whether the graph's first flush is complete (dataplane.InSync was applied):
// only from then on does Apply build the table.
func (b *Builder) InSync() bool { return b.inSync }

// Apply folds messages into the desired table and, once in sync, brings the table up to date
// and returns the changes since the previous Apply that returned some (the objects the
// committer must look at, ruleset.Changes); before in-sync it only folds and returns nil.
// Apply consumes msgs: it clears each entry once folded, so that the member lists of a first
// flush (every member of every set, O(cluster's pods)) are not held through the compile.
func (b *Builder) Apply(msgs []dataplane.Message) *ruleset.Changes {
	for i, m := range msgs {
		b.fold(m)
		msgs[i] = nil
	}
	if !b.inSync {
		return nil
	}
	b.recompute()
	return b.pending.take()
}

// Refused answers the kernel's refusal of the whole table (ruleset.KernelError naming the
// object it refused): it rejects the costliest policy of the groups that object belongs to (as
// for the compile budget, reported through Config.Rejected) and brings the table up to date, so
// that it can be written again with every other policy enforced. It reports false when err
// names no object or no group's policy can be blamed (a fixed part of the table).
func (b *Builder) Refused(err error) bool {
	var ke *ruleset.KernelError
	if !errors.As(err, &ke) || !b.rejectRefused(ke) {
		return false
	}
	b.pending.requeueRejected()
	b.recompute()
	b.pending.take() // the table is written whole
	return true
}

// ResizeSets gives every set of the table its size for a write of the whole table (setSizes).
func (b *Builder) ResizeSets() { b.sizes.resize(b.table) }

// RegrowSets gives each set that holds more elements than the size it was made with a size for
// its elements now, and returns their names: a commit that names them writes each set anew
// (ruleset.Conn.Commit), not the table.
func (b *Builder) RegrowSets() []string { return b.sizes.regrow(b.table) }

// fold applies one message to the state and records what it makes dirty.
func (b *Builder) fold(m dataplane.Message) {
	switch m := m.(type) {
	case dataplane.SetReplaced:
		b.state.Apply(m)
		b.setReplaced(m.ID)
	case dataplane.SetRemoved:
		b.state.Apply(m)
		b.setReplaced(m.ID)
	case dataplane.SetMembersChanged:
		b.state.Apply(m)
		for _, mbs := range [][]dataplane.Member{m.Removed, m.Added} {
			for _, mb := range mbs {
				b.memberChanged(m.ID, mb.Addr.Unmap())
				b.sharedMemberChanged(m.ID, mb)
			}
		}
	case dataplane.PolicyUpdated:
		if old := b.state.Policies[m.Key]; old != nil {
			b.index.policySets(old, false)
		}
		b.policyTiers.store(m.Key, m.Tier)
		b.state.Apply(m)
		b.index.policySets(b.state.Policies[m.Key], true)
		b.pending.policies[m.Key] = struct{}{}
	case dataplane.PolicyRemoved:
		if old := b.state.Policies[m.Key]; old != nil {
			b.index.policySets(old, false)
		}
		b.policyTiers.delete(m.Key)
		b.state.Apply(m)
		b.pending.policies[m.Key] = struct{}{}
	case dataplane.EndpointUpdated:
		b.endpointUpdated(m)
	case dataplane.EndpointRemoved:
		if e := b.layout.endpoints[m.Key]; e != nil {
			b.index.endpoint(m.Key, &e.msg, nil)
			b.layout.nameInterface(m.Key, nil)
			e.msg = dataplane.EndpointUpdated{} // removed(): regroup releases its groups
			b.pending.endpoints[m.Key] = struct{}{}
		}
	case dataplane.InSync:
		b.inSync = true
	}
}

// endpointUpdated records an endpoint's new facts (addresses unmapped) for its regroup.
func (b *Builder) endpointUpdated(m dataplane.EndpointUpdated) {
	e := b.layout.endpoints[m.Key]
	var old *dataplane.EndpointUpdated
	if e == nil {
		e = &endpoint{groups: map[dispatchKey]string{}}
		b.layout.endpoints[m.Key] = e
	} else {
		prev := e.msg
		old = &prev
	}
	e.msg = m
	e.msg.Addrs = make([]netip.Addr, len(m.Addrs))
	for i, a := range m.Addrs {
		e.msg.Addrs[i] = a.Unmap()
	}
	b.index.endpoint(m.Key, old, &e.msg)
	b.layout.nameInterface(m.Key, &e.msg)
	b.pending.endpoints[m.Key] = struct{}{}
}

// setReplaced recompiles whatever uses a set that was replaced or removed as a whole, and
// rebuilds its shared sets.
func (b *Builder) setReplaced(id dataplane.SetID) {
	for k := range b.index.setPolicies[id] {
		b.pending.policies[k] = struct{}{}
	}
	b.sharedSetReplaced(id)
}

// memberChanged records that set id's membership of address a may have changed: a local
// endpoint with that address may change group (its local-side facts), and the groups whose
// rules reference the set recompute that one peer.
func (b *Builder) memberChanged(id dataplane.SetID, a netip.Addr) {
	if k, ok := b.index.localAddrs[a]; ok {
		b.pending.endpoints[k] = struct{}{}
	}
	for k := range b.index.hostAddrs[a] {
		b.pending.endpoints[k] = struct{}{}
	}
	for p := range b.index.setPolicies[id] {
		for name := range b.index.policyGroups[p] {
			g := b.layout.groups[name]
			if g == nil || g.is4 != a.Is4() || g.listed {
				continue // a listed group's peers are its shared sets' members
			}
			b.pending.groups[name] = struct{}{}
			if g.union != nil {
				g.union.dirty[a] = append(g.union.dirty[a], id)
				continue
			}
			if g.compiled == nil {
				g.stale = true
				continue
			}
			g.compiled.peerChanged(id, a)
			g.dirtyPeers[a] = struct{}{}
		}
	}
}

// recompute brings the desired table up to date with the state: it regroups the endpoints whose
// facts may have changed and recompiles the groups whose policies changed — again for the
// policies a compile rejected meanwhile (each pass rejects at least one policy more, so this
// ends).
func (b *Builder) recompute() {
	for {
		b.recomputeOnce()
		if len(b.pending.rejected) == 0 {
			return
		}
		b.pending.requeueRejected()
	}
}

func (b *Builder) recomputeOnce() {
	for k := range b.pending.policies {
		for ek := range b.index.policyEndpoint[k] {
			b.pending.endpoints[ek] = struct{}{}
		}
		for gname := range b.index.policyGroups[k] {
			if g := b.layout.groups[gname]; g != nil {
				g.stale = true
				b.pending.groups[gname] = struct{}{}
				if g.union != nil {
					g.union.touched[k] = struct{}{} // compiled again, whatever the tier lists say
				}
			}
		}
	}
	clear(b.pending.policies)
	keys := make([]model.EndpointKey, 0, len(b.pending.endpoints))
	for k := range b.pending.endpoints {
		keys = append(keys, k)
	}
	clear(b.pending.endpoints)
	slices.SortFunc(keys, func(a, b model.EndpointKey) int { return strings.Compare(a.String(), b.String()) })
	b.regroup(keys)
	// a stale group is compiled in full (which covers its dirty peers), another one peer by peer
	names := slices.Sorted(maps.Keys(b.pending.groups))
	clear(b.pending.groups)
	pre := b.precompile(names)
	for _, name := range names {
		switch g := b.layout.groups[name]; {
		case g == nil: // left by its last endpoint meanwhile
		case g.stale:
			b.compileGroup(g, pre[name])
		case g.union != nil && len(g.union.dirty) > 0:
			b.compileUnionPeers(g)
		case len(g.dirtyPeers) > 0:
			b.compilePeers(g)
		}
	}
}

// compileResult is a group's compiled form: a rule list (listed shape), a union or a decision;
// domain, for a union or a decision, the accepting rules of its domain-name rules in front of
// it (domainRules; a listed group's are its first rules).
type compileResult struct {
	list   *ruleList
	union  *union
	cp     *compiled
	domain []listRule
}

// precompile compiles the stale groups among names on all processors: a compile only reads the
// State (and its own plan), so groups compile at once, and compileGroup then lays each out in
// the table, one at a time and in name order, as without it. Nothing when fewer than two.
func (b *Builder) precompile(names []string) map[string]*compileResult {
	var todo []*group
	for _, name := range names {
		if g := b.layout.groups[name]; g != nil && g.stale && len(g.members) > 0 {
			todo = append(todo, g)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(todo))
	if workers < 2 {
		return nil
	}
	out := make([]*compileResult, len(todo))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(todo); i = int(next.Add(1) - 1) {
				out[i] = b.state.compileResult(todo[i], !b.opts.noUnion)
			}
		})
	}
	wg.Wait()
	m := make(map[string]*compileResult, len(todo))
	for i, g := range todo {
		m[g.name] = out[i]
	}
	return m
}

// rejectRefused rejects the costliest policy of the groups whose objects include the one the
// kernel refused: a group's chain and maps, the class chains it uses, the shared sets it looks
// up. It reports false when no group's policy can be blamed (a fixed part of the table).
func (b *Builder) rejectRefused(ke *ruleset.KernelError) bool {
	name := ke.Object.Name
	var blamed []*group
	for _, gname := range slices.Sorted(maps.Keys(b.layout.groups)) {
		g := b.layout.groups[gname]
		owns := name == g.name || strings.HasPrefix(name, g.name+"_") || slices.Contains(g.shared, name)
		for c := range g.classUse {
			owns = owns || name == c || strings.HasPrefix(name, c+"_")
		}
		if owns {
			blamed = append(blamed, g)
		}
	}
	for _, g := range blamed {
		if b.rejectCostliest(g, "refused by the kernel", fmt.Sprintf("the kernel refused %s of %s (%v)", ke.Object, g.describe(), ke.Errno)) {
			return true
		}
	}
	b.opts.log.Error("the kernel refused part of the table that no policy can be blamed for", "object", ke.Object.String(), "errno", ke.Errno.Error())
	return false
}
