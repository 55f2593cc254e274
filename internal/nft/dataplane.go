package nft

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/setmap"
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

// Names of the fixed objects of the table.
const (
	chainForwardEgress  = "forward_egress"
	chainForwardIngress = "forward_ingress"
	chainInput          = "input_host"
	chainOutput         = "output_host"
	mapIngressV4        = "ingress_v4"
	mapIngressV6        = "ingress_v6"
	mapEgressV4         = "egress_v4"
	mapEgressV6         = "egress_v6"
	setSourcesV4        = "sources_v4"
	setSourcesV6        = "sources_v6"
	chainSpoofed        = "deny_spoofed"
	chainUnprogrammed   = "deny_unprogrammed"
)

// Config configures a Dataplane.
type Config struct {
	// Table is the table's name (DefaultTable when empty).
	Table string
	// NetNSFD is an open handle of the network namespace to program; < 0 means the current one.
	NetNSFD int
	// WorkloadPrefixes are the name prefixes of the interfaces that lead to pods ("veth",
	// "cali"). A packet forwarded from such an interface passes only if its source address is
	// one of the local endpoint's that the interface leads to: a spoofed source, or any traffic
	// of a workload interface whose endpoint is not programmed yet, is dropped (fail closed).
	// A prefix is checked from the moment a local pod is seen behind an interface of it (the
	// pod's host route leaves through it): with a bridge CNI pod traffic arrives on the bridge,
	// no pod is ever seen behind a veth, and nothing is checked. Empty: no such check.
	WorkloadPrefixes []string
	Logger           *slog.Logger
	// CompileBudget bounds the work of one group's compile (DefaultCompileBudget when 0).
	CompileBudget int64
	// DenyLog, if set, makes the deny chains log what they drop (denylog.go).
	DenyLog *DenyLog
	// CountAllowed makes every accepting rule and every set or map element that accepts count
	// its packets (counts.go); deny chains always count.
	CountAllowed bool
	// Rejected, if set, is called for each policy the dataplane stops enforcing as written
	// (State.reject): the compile of a group it is in exceeded the compiler's budget, or the
	// kernel refused an object of such a group when the table was written whole. reason says
	// which, and what. It is also logged.
	Rejected func(key model.PolicyKey, reason string)
}

// Committer is the kernel side (ruleset.Conn); nil in offline mode (render).
type Committer interface {
	Commit(desired *ruleset.Table, changes *ruleset.Changes) error
	Replace(desired *ruleset.Table) error
	Verify() (drift bool, err error)
	DeleteTable(name string) error
	Close() error
}

// Dataplane folds the graph's messages into the desired table and commits each apply's difference
// in one transaction. Apply, Resync, Repair and Cleanup are called from one goroutine;
// DeniedPackets from any, at any time.
type Dataplane struct {
	// netnsFD is the namespace programmed (< 0: the current one), for DeniedPackets.
	netnsFD int
	// denied is what DeniedPackets reads, replaced after each commit: it never waits for an
	// apply, however long its compile.
	denied   atomic.Pointer[denyChains]
	prefixes []string
	rejected func(key model.PolicyKey, reason string)
	// rejectedNow are the policies rejected during the current recompute: their groups are
	// recompiled before the commit.
	rejectedNow map[model.PolicyKey]struct{}
	// activePrefixes are the workload prefixes behind which a local pod has been seen (its
	// host route leaves through such an interface): only those are checked (see Config).
	activePrefixes map[string]bool
	log            *slog.Logger
	conn           Committer
	state          *State
	table          *ruleset.Table

	endpoints map[model.EndpointKey]*endpoint
	groups    map[string]*group // by chain name
	classes   map[string]int    // class chain name → number of groups using it
	shared    map[string]int    // shared set name → number of listed groups using it (shared.go)
	denies    map[string]int    // deny chain name → number of class chains using it
	// denyReasons holds each deny chain's reason, whole
	denyReasons map[string]string
	denyLog     *DenyLog
	// policyTiers holds each policy's key and tier by its key's String, for ReasonOrigin, which
	// reads it on any goroutine
	policyTiers sync.Map
	// countAllowed: see Config.CountAllowed
	countAllowed bool

	// indexes for incremental work
	setPolicies    map[dataplane.SetID]map[model.PolicyKey]struct{}
	policyGroups   map[model.PolicyKey]map[string]struct{}
	policyEndpoint map[model.PolicyKey]map[model.EndpointKey]struct{}
	localAddrs     map[netip.Addr]model.EndpointKey // address of a local endpoint → endpoint

	// pending work of the current apply
	dirtyPolicies  map[model.PolicyKey]struct{}
	dirtyEndpoints map[model.EndpointKey]struct{}
	pendingGroups  map[string]struct{} // groups marked stale or with dirty peers
	changes        ruleset.Changes

	inSync       bool
	committed    bool // the table has been written once by this process
	transactions uint64
	// sizes holds the size of each set that has one (setSize), as the last replace chose it:
	// a set put under that name again keeps it, and a set that outgrows it has the table
	// replaced.
	sizes map[string]uint32
}

type endpoint struct {
	msg     dataplane.EndpointUpdated
	groups  map[dispatchKey]string // dispatch element → group chain name
	sources []ruleset.ElementKey   // its interface . address elements (anti-spoofing)
}

// dispatchKey is one local address in one direction: one element of a dispatch map.
type dispatchKey struct {
	dir  model.Direction
	addr netip.Addr
}

// group is one decision structure: the endpoints (addresses) with equal GroupKeys for a direction
// and family share it.
type group struct {
	name    string
	dir     model.Direction
	is4     bool
	tiers   []dataplane.TierPolicies
	members map[dispatchKey]struct{}
	// classUse counts the references (peer elements, intervals, the default) to each class
	// chain; the group holds one reference of the Dataplane's count per chain it uses.
	classUse map[string]int
	stale    bool      // needs a full recompile (its policies or tiers changed, or it is new)
	compiled *compiled // the last full compile, updated peer by peer
	// dirtyPeers are addresses whose membership of a referenced set changed since the last
	// compile: only their peers elements are recomputed.
	dirtyPeers map[netip.Addr]struct{}
	// listed: the group has the listed shape (list.go), compiled is nil and its peers are the
	// members of the shared sets it holds references to.
	listed bool
	shared []string
}

// New opens the dataplane on a network namespace. Nothing is written before the first in-sync
// apply; a table left by a previous run stays in force until then.
func New(cfg Config) (*Dataplane, error) {
	conn, err := ruleset.Open(cfg.NetNSFD)
	if err != nil {
		return nil, fmt.Errorf("opening nftables connection: %w", err)
	}
	d := newDataplane(cfg, conn)
	if cfg.NetNSFD >= 0 {
		// a handle of our own: DeniedPackets may run after the caller closed its one
		if d.netnsFD, err = unix.FcntlInt(uintptr(cfg.NetNSFD), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("duplicating netns handle %d: %w", cfg.NetNSFD, err)
		}
	}
	return d, nil
}

// NewWithCommitter returns a dataplane committing through c (tests use a fake).
func NewWithCommitter(cfg Config, c Committer) *Dataplane { return newDataplane(cfg, c) }

// NewOffline returns a dataplane that only computes the table (for `nftpolicy render` and tests).
func NewOffline(cfg Config) *Dataplane { return newDataplane(cfg, nil) }

func newDataplane(cfg Config, conn Committer) *Dataplane {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Dataplane{
		prefixes:       cfg.WorkloadPrefixes,
		rejected:       cfg.Rejected,
		netnsFD:        -1,
		activePrefixes: map[string]bool{},
		log:            cfg.Logger,
		conn:           conn,
		state:          NewState(),
		table:          ruleset.NewTable(cfg.Table),
		endpoints:      map[model.EndpointKey]*endpoint{},
		groups:         map[string]*group{},
		classes:        map[string]int{},
		shared:         map[string]int{},
		denies:         map[string]int{},
		denyReasons:    map[string]string{},
		denyLog:        cfg.DenyLog,
		countAllowed:   cfg.CountAllowed,
		setPolicies:    map[dataplane.SetID]map[model.PolicyKey]struct{}{},
		policyGroups:   map[model.PolicyKey]map[string]struct{}{},
		policyEndpoint: map[model.PolicyKey]map[model.EndpointKey]struct{}{},
		localAddrs:     map[netip.Addr]model.EndpointKey{},
		sizes:          map[string]uint32{},
	}
	if cfg.CompileBudget > 0 {
		d.state.compileBudget = cfg.CompileBudget
	}
	d.resetPending()
	d.addSkeleton()
	return d
}

func (d *Dataplane) resetPending() {
	d.dirtyPolicies = map[model.PolicyKey]struct{}{}
	d.dirtyEndpoints = map[model.EndpointKey]struct{}{}
	d.pendingGroups = map[string]struct{}{}
	d.changes = ruleset.Changes{Sets: map[string]struct{}{}, Chains: map[string]struct{}{}}
}

// Table returns the desired table (read-only for the caller).
func (d *Dataplane) Table() *ruleset.Table { return d.table }

// Render returns the desired table in `nft -f` syntax.
func (d *Dataplane) Render() string { return ruleset.Render(d.table) }

// Stats counts the desired (after a successful apply: committed) table's objects.
func (d *Dataplane) Stats() (ruleset.Stats, uint64) { return d.table.Stats(), d.transactions }

// Apply folds messages into the desired table and, once in sync, commits the difference in one
// transaction. On error the desired state is kept; Resync retries it. Apply consumes msgs: it
// clears each entry once folded, so that the member lists of a first flush (every member of
// every set, O(cluster's pods)) are not held through the compile and the commit.
func (d *Dataplane) Apply(msgs []dataplane.Message) error {
	for i, m := range msgs {
		d.fold(m)
		msgs[i] = nil
	}
	if !d.inSync {
		return nil
	}
	d.recompute()
	return d.commit()
}

func (d *Dataplane) commit() error {
	if d.conn == nil {
		d.resetPending()
		return nil
	}
	if !d.committed || d.outgrown() {
		return d.replace()
	}
	defer d.resetPending() // on failure too: the next Resync replaces the whole table
	if err := d.conn.Commit(d.table, &d.changes); err != nil {
		d.committed = false
		return fmt.Errorf("committing table %s: %w", d.table.Name, err)
	}
	d.transactions++
	d.noteDenies()
	return nil
}

// replace writes the whole desired table in one transaction, every set sized anew. When the
// kernel refuses it and names the object it refused (ruleset.KernelError), the costliest policy
// of the groups that object belongs to is rejected (rejectRefused) and the table written again:
// every other policy stays enforced. At most maxRefusals policies are rejected so per replace.
func (d *Dataplane) replace() error {
	defer d.resetPending()
	for refusals := 0; ; refusals++ {
		d.sizeSets()
		err := d.conn.Replace(d.table)
		if err == nil {
			break
		}
		d.committed = false
		var ke *ruleset.KernelError
		if refusals == maxRefusals || !errors.As(err, &ke) || !d.rejectRefused(ke) {
			return fmt.Errorf("replacing table %s: %w", d.table.Name, err)
		}
		d.dirtyPolicies, d.rejectedNow = d.rejectedNow, nil
		d.recompute()
	}
	d.transactions++
	d.committed = true
	d.noteDenies()
	return nil
}

// maxRefusals bounds the policies one replace rejects for objects the kernel refused.
const maxRefusals = 16

// rejectRefused rejects the costliest policy of the groups whose objects include the one the
// kernel refused: a group's chain and maps, the class chains it uses, the shared sets it looks
// up. It reports false when no group's policy can be blamed (a fixed part of the table).
func (d *Dataplane) rejectRefused(ke *ruleset.KernelError) bool {
	name := ke.Object.Name
	var blamed []*group
	for _, gname := range slices.Sorted(maps.Keys(d.groups)) {
		g := d.groups[gname]
		owns := name == g.name || strings.HasPrefix(name, g.name+"_") || slices.Contains(g.shared, name)
		for c := range g.classUse {
			owns = owns || name == c || strings.HasPrefix(name, c+"_")
		}
		if owns {
			blamed = append(blamed, g)
		}
	}
	for _, g := range blamed {
		if d.rejectCostliest(g, "refused by the kernel", fmt.Sprintf("the kernel refused %s of %s (%v)", ke.Object, g.describe(), ke.Errno)) {
			return true
		}
	}
	d.log.Error("the kernel refused part of the table that no policy can be blamed for", "object", ke.Object.String(), "errno", ke.Errno.Error())
	return false
}

// Resync reads the table back and, on drift or after a failed apply, replaces it with the desired
// table in one transaction. It reports whether a repair was needed.
func (d *Dataplane) Resync() (bool, error) {
	if d.conn == nil || !d.inSync {
		return false, nil
	}
	if d.committed {
		drift, err := d.conn.Verify()
		if err == nil && !drift {
			return false, nil
		}
		if err != nil {
			d.log.Warn("reading back the table failed; replacing it", "table", d.table.Name, "error", err)
		}
	}
	return true, d.replace()
}

// Cleanup removes the table from the kernel.
func (d *Dataplane) Cleanup() error {
	if d.conn == nil {
		return nil
	}
	d.committed = false
	d.denied.Store(nil)
	return d.conn.DeleteTable(d.table.Name)
}

// Close releases the netlink connection; the table stays in force.
func (d *Dataplane) Close() error {
	if d.conn == nil {
		return nil
	}
	err := d.conn.Close()
	if d.netnsFD >= 0 {
		err = errors.Join(err, unix.Close(d.netnsFD))
		d.netnsFD = -1
	}
	return err
}

// fold applies one message to the state and records what it makes dirty.
func (d *Dataplane) fold(m dataplane.Message) {
	switch m := m.(type) {
	case dataplane.SetReplaced:
		d.state.Apply(m)
		d.setReplaced(m.ID)
		d.sharedSetReplaced(m.ID)
	case dataplane.SetRemoved:
		d.state.Apply(m)
		d.setReplaced(m.ID)
		d.sharedSetReplaced(m.ID)
	case dataplane.SetMembersChanged:
		d.state.Apply(m)
		for _, mbs := range [][]dataplane.Member{m.Removed, m.Added} {
			for _, mb := range mbs {
				d.memberChanged(m.ID, mb.Addr.Unmap())
				d.sharedMemberChanged(m.ID, mb)
			}
		}
	case dataplane.PolicyUpdated:
		if old := d.state.Policies[m.Key]; old != nil {
			d.indexPolicySets(old, false)
		}
		d.policyTiers.Store(m.Key.String(), policyTier{m.Key, m.Tier})
		d.state.Apply(m)
		d.indexPolicySets(d.state.Policies[m.Key], true)
		d.dirtyPolicies[m.Key] = struct{}{}
	case dataplane.PolicyRemoved:
		if old := d.state.Policies[m.Key]; old != nil {
			d.indexPolicySets(old, false)
		}
		d.policyTiers.Delete(m.Key.String())
		d.state.Apply(m)
		d.dirtyPolicies[m.Key] = struct{}{}
	case dataplane.EndpointUpdated:
		e := d.endpoints[m.Key]
		if e == nil {
			e = &endpoint{groups: map[dispatchKey]string{}}
			d.endpoints[m.Key] = e
		} else {
			d.indexEndpointPolicies(m.Key, &e.msg, false)
			d.indexLocalAddrs(m.Key, &e.msg, false)
		}
		e.msg = m
		e.msg.Addrs = make([]netip.Addr, len(m.Addrs))
		for i, a := range m.Addrs {
			e.msg.Addrs[i] = a.Unmap()
		}
		d.indexEndpointPolicies(m.Key, &e.msg, true)
		d.indexLocalAddrs(m.Key, &e.msg, true)
		d.dirtyEndpoints[m.Key] = struct{}{}
	case dataplane.EndpointRemoved:
		if e := d.endpoints[m.Key]; e != nil {
			d.indexEndpointPolicies(m.Key, &e.msg, false)
			d.indexLocalAddrs(m.Key, &e.msg, false)
			e.msg = dataplane.EndpointUpdated{} // removed(): regroup releases its groups
			d.dirtyEndpoints[m.Key] = struct{}{}
		}
	case dataplane.InSync:
		d.inSync = true
	}
}

// setReplaced recompiles whatever uses a set that was replaced or removed as a whole.
func (d *Dataplane) setReplaced(id dataplane.SetID) {
	for k := range d.setPolicies[id] {
		d.dirtyPolicies[k] = struct{}{}
	}
}

// memberChanged records that set id's membership of address a may have changed: a local
// endpoint with that address may change group (its local-side facts), and the groups whose
// rules reference the set recompute that one peer.
func (d *Dataplane) memberChanged(id dataplane.SetID, a netip.Addr) {
	if k, ok := d.localAddrs[a]; ok {
		d.dirtyEndpoints[k] = struct{}{}
	}
	for p := range d.setPolicies[id] {
		for name := range d.policyGroups[p] {
			g := d.groups[name]
			if g == nil || g.is4 != a.Is4() || g.listed {
				continue // a listed group's peers are its shared sets' members
			}
			d.pendingGroups[name] = struct{}{}
			if g.compiled == nil {
				g.stale = true
				continue
			}
			g.compiled.peerChanged(id, a)
			g.dirtyPeers[a] = struct{}{}
		}
	}
}

func (d *Dataplane) indexLocalAddrs(k model.EndpointKey, m *dataplane.EndpointUpdated, add bool) {
	for _, a := range m.Addrs {
		if add {
			d.localAddrs[a] = k
		} else if d.localAddrs[a] == k {
			delete(d.localAddrs, a)
		}
	}
}

func (d *Dataplane) indexPolicySets(p *dataplane.PolicyUpdated, add bool) {
	for _, id := range policySets(p) {
		if add {
			setmap.Add(d.setPolicies, id, p.Key)
		} else {
			setmap.Remove(d.setPolicies, id, p.Key)
		}
	}
}

func (d *Dataplane) indexEndpointPolicies(k model.EndpointKey, m *dataplane.EndpointUpdated, add bool) {
	for _, tiers := range [][]dataplane.TierPolicies{m.Ingress, m.Egress} {
		for _, t := range tiers {
			for _, p := range t.Policies {
				if add {
					setmap.Add(d.policyEndpoint, p, k)
				} else {
					setmap.Remove(d.policyEndpoint, p, k)
				}
			}
		}
	}
}

// policySets lists every set a policy's rules reference.
func policySets(p *dataplane.PolicyUpdated) []dataplane.SetID {
	var ids []dataplane.SetID
	for _, rules := range [][]dataplane.Rule{p.Ingress, p.Egress} {
		for i := range rules {
			for _, m := range []*dataplane.Match{&rules[i].Src, &rules[i].Dst} {
				ids = append(ids, m.Sets...)
				ids = append(ids, m.NotSets...)
				ids = append(ids, m.NamedPortSets...)
				ids = append(ids, m.NotNamedPortSets...)
			}
		}
	}
	return ids
}

// recompute brings the desired table up to date with the state: it regroups the endpoints whose
// facts may have changed and recompiles the groups whose policies changed — again for the
// policies a compile rejected meanwhile (each pass rejects at least one policy more, so this
// ends).
func (d *Dataplane) recompute() {
	for {
		d.recomputeOnce()
		if len(d.rejectedNow) == 0 {
			return
		}
		d.dirtyPolicies, d.rejectedNow = d.rejectedNow, nil
	}
}

func (d *Dataplane) recomputeOnce() {
	for k := range d.dirtyPolicies {
		for ek := range d.policyEndpoint[k] {
			d.dirtyEndpoints[ek] = struct{}{}
		}
		for gname := range d.policyGroups[k] {
			if g := d.groups[gname]; g != nil {
				g.stale = true
				d.pendingGroups[gname] = struct{}{}
			}
		}
	}
	keys := make([]model.EndpointKey, 0, len(d.dirtyEndpoints))
	for k := range d.dirtyEndpoints {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b model.EndpointKey) int { return strings.Compare(a.String(), b.String()) })
	d.regroup(keys)
	// a stale group is compiled in full (which covers its dirty peers), another one peer by peer
	names := slices.Sorted(maps.Keys(d.pendingGroups))
	pre := d.precompile(names)
	for _, name := range names {
		switch g := d.groups[name]; {
		case g == nil: // left by its last endpoint meanwhile
		case g.stale:
			d.compileGroup(g, pre[name])
		case len(g.dirtyPeers) > 0:
			d.compilePeers(g)
		}
	}
}

// compileResult is a group's compiled form: a rule list (listed shape) or a decision.
type compileResult struct {
	list *ruleList
	cp   *compiled
}

// precompile compiles the stale groups among names on all processors: a compile only reads the
// State (and its own plan), so groups compile at once, and compileGroup then lays each out in
// the table, one at a time and in name order, as without it. Nothing when fewer than two.
func (d *Dataplane) precompile(names []string) map[string]*compileResult {
	var todo []*group
	for _, name := range names {
		if g := d.groups[name]; g != nil && g.stale && len(g.members) > 0 {
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
				out[i] = d.state.compileResult(todo[i])
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

// regroup recomputes the dispatch elements, group memberships and anti-spoofing elements of
// the endpoints keys in two passes: each endpoint first withdraws what it no longer wants, then
// each puts what it wants. An address whose owner changes within one apply (the graph names one
// owner per address) is thus withdrawn by the old owner before the new one puts it, whatever
// the order of their keys: the old owner's delete never takes the new owner's element.
func (d *Dataplane) regroup(keys []model.EndpointKey) {
	wants := make([]map[dispatchKey]string, len(keys))
	for i, k := range keys {
		if e := d.endpoints[k]; e != nil {
			wants[i] = d.wantedGroups(e)
			d.withdraw(e, wants[i])
		}
	}
	for i, k := range keys {
		if e := d.endpoints[k]; e != nil {
			d.join(k, e, wants[i])
		}
	}
}

// wantedGroups is the group chain of each dispatch element the endpoint needs: one per address
// and direction with policy (none after it is removed).
func (d *Dataplane) wantedGroups(e *endpoint) map[dispatchKey]string {
	want := map[dispatchKey]string{}
	if e.removed() {
		return want
	}
	for _, dir := range []model.Direction{model.Ingress, model.Egress} {
		tiers := e.tiers(dir)
		if len(tiers) == 0 {
			continue // no policy applies: allowed, no dispatch element
		}
		for _, a := range e.msg.Addrs {
			want[dispatchKey{dir, a}] = groupName(dir, d.state.GroupKey(dir, tiers, a))
		}
	}
	return want
}

// tiers is the endpoint's tier list of a direction.
func (e *endpoint) tiers(dir model.Direction) []dataplane.TierPolicies {
	if dir == model.Egress {
		return e.msg.Egress
	}
	return e.msg.Ingress
}

// withdraw leaves the groups and deletes the dispatch and anti-spoofing elements that the
// endpoint has and no longer wants.
func (d *Dataplane) withdraw(e *endpoint, want map[dispatchKey]string) {
	for dk, old := range e.groups {
		if want[dk] != old {
			d.leaveGroup(old, dk)
			d.deleteDispatch(dk)
			delete(e.groups, dk)
		}
	}
	if len(d.prefixes) == 0 {
		return
	}
	keep := e.wantedSources()
	for _, k := range e.sources {
		if !slices.Contains(keep, k) {
			d.table.Sets[sourcesSet(k.Addr)].Delete(k)
		}
	}
}

// join puts the dispatch and anti-spoofing elements the endpoint wants and joins their
// groups; a removed endpoint is forgotten.
func (d *Dataplane) join(k model.EndpointKey, e *endpoint, want map[dispatchKey]string) {
	for dk, name := range want {
		if e.groups[dk] == name {
			continue
		}
		g := d.groups[name]
		if g == nil {
			g = &group{name: name, dir: dk.dir, is4: dk.addr.Is4(), tiers: e.tiers(dk.dir),
				members: map[dispatchKey]struct{}{}, classUse: map[string]int{}, stale: true,
				dirtyPeers: map[netip.Addr]struct{}{}}
			d.groups[name] = g
			d.pendingGroups[name] = struct{}{}
			for _, t := range g.tiers {
				for _, p := range t.Policies {
					setmap.Add(d.policyGroups, p, name)
				}
			}
		}
		g.members[dk] = struct{}{}
		e.groups[dk] = name
		d.setDispatch(dk, name, k)
	}
	d.putSources(e)
	if e.removed() {
		delete(d.endpoints, k)
	}
}

// wantedSources is the endpoint's interface . address elements of the anti-spoofing sets: one
// per address once its interface is known, none after it is removed.
func (e *endpoint) wantedSources() []ruleset.ElementKey {
	if e.removed() || e.msg.Interface == "" {
		return nil
	}
	want := make([]ruleset.ElementKey, 0, len(e.msg.Addrs))
	for _, a := range e.msg.Addrs {
		want = append(want, ruleset.ElementKey{Ifname: e.msg.Interface, Addr: a, AddrEnd: a})
	}
	return want
}

// putSources puts the endpoint's anti-spoofing elements (withdraw deleted the ones it no longer
// wants). A Put of an element the set holds unchanged changes nothing.
func (d *Dataplane) putSources(e *endpoint) {
	if len(d.prefixes) == 0 {
		return
	}
	want := e.wantedSources()
	if len(want) > 0 {
		d.activatePrefix(e.msg.Interface)
	}
	for _, k := range want {
		d.table.Sets[sourcesSet(k.Addr)].Put(ruleset.Element{ElementKey: k, Value: ruleset.Value{Comment: ruleset.Comment(e.msg.Key.String())}})
	}
	e.sources = want
}

// activatePrefix starts checking the workload prefix of ifname, once a local pod is seen behind
// such an interface; it stays checked.
func (d *Dataplane) activatePrefix(ifname string) {
	for _, p := range d.prefixes {
		if strings.HasPrefix(ifname, p) && !d.activePrefixes[p] {
			d.activePrefixes[p] = true
			d.putForwardEgress()
			d.putForwardIngress()
			d.log.Info("anti-spoofing: checking workload interfaces", "prefix", p+"*", "first", ifname)
		}
	}
}

func sourcesSet(a netip.Addr) string {
	if a.Is4() {
		return setSourcesV4
	}
	return setSourcesV6
}

// sample is the group endpoint address whose local-side facts the compile reads (all members
// have equal ones): the lowest, so that the choice is deterministic.
func (g *group) sample() netip.Addr {
	var sample netip.Addr
	for dk := range g.members {
		if !sample.IsValid() || dk.addr.Less(sample) {
			sample = dk.addr
		}
	}
	return sample
}

func (e *endpoint) removed() bool { return e.msg.Key == (model.EndpointKey{}) }

func (d *Dataplane) leaveGroup(name string, dk dispatchKey) {
	g := d.groups[name]
	if g == nil {
		return
	}
	delete(g.members, dk)
	if len(g.members) > 0 {
		if g.compiled != nil && g.compiled.local == dk.addr {
			// the compile's sample endpoint left (its facts changed): peers recompiled later
			// must see the facts of an endpoint that still has the group's key
			g.compiled.local = g.sample()
		}
		return
	}
	// unused: remove its chain and maps, release its classes
	for _, t := range g.tiers {
		for _, p := range t.Policies {
			setmap.Remove(d.policyGroups, p, name)
		}
	}
	for c := range g.classUse {
		d.releaseClass(c)
	}
	d.releaseShared(g, nil)
	delete(d.groups, name)
	d.dropChain(name)
	d.dropMapSets(g)
}

// dropMapSets drops the sets of a group's map shape (layout.go) that the table holds.
func (d *Dataplane) dropMapSets(g *group) {
	for _, suffix := range []string{"_allow", "_peers", "_nets"} {
		d.dropSet(g.name + suffix)
	}
}

func dispatchMap(dk dispatchKey) string {
	switch {
	case dk.dir == model.Ingress && dk.addr.Is4():
		return mapIngressV4
	case dk.dir == model.Ingress:
		return mapIngressV6
	case dk.addr.Is4():
		return mapEgressV4
	}
	return mapEgressV6
}

func (d *Dataplane) setDispatch(dk dispatchKey, chain string, k model.EndpointKey) {
	name := dispatchMap(dk)
	ek := ruleset.AddrKey(dk.addr)
	d.table.Sets[name].Put(ruleset.Element{ElementKey: ek, Value: ruleset.Value{
		Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: chain},
		Comment: ruleset.Comment(k.String()),
	}})
}

func (d *Dataplane) deleteDispatch(dk dispatchKey) {
	name := dispatchMap(dk)
	ek := ruleset.AddrKey(dk.addr)
	d.table.Sets[name].Delete(ek)
}

func (d *Dataplane) dropChain(name string) {
	delete(d.table.Chains, name)
	d.changes.Chains[name] = struct{}{}
}

// dropSet removes a set from the table, if the table holds it.
func (d *Dataplane) dropSet(name string) {
	if _, ok := d.table.Sets[name]; !ok {
		return
	}
	delete(d.table.Sets, name)
	d.changes.Sets[name] = struct{}{}
}

func (d *Dataplane) putChain(c *ruleset.Chain) {
	d.table.Chains[c.Name] = c
	d.changes.Chains[c.Name] = struct{}{}
}

func (d *Dataplane) putSet(s *ruleset.Set) {
	s.Size = d.sizes[s.Name]
	d.table.Sets[s.Name] = s
	d.changes.Sets[s.Name] = struct{}{}
}

// minSizedSet is the fewest elements a set is given a size for (ruleset.Set.Size).
const minSizedSet = 1024

// setSize is the size a set of n elements is made with when the table is replaced: none below
// minSizedSet elements, else the power of two at or above twice n, so that the set can double
// before it outgrows it.
func setSize(n int) uint32 {
	if n < minSizedSet {
		return 0
	}
	return 1 << bits.Len(uint(2*n-1))
}

// sizeSets gives every set of the table its setSize, before the table is written whole.
func (d *Dataplane) sizeSets() {
	clear(d.sizes)
	for name, s := range d.table.Sets {
		s.Size = 0
		if !s.Interval {
			s.Size = setSize(s.Len())
		}
		if s.Size > 0 {
			d.sizes[name] = s.Size
		}
	}
}

// outgrown reports whether a set holds more elements than its size: the kernel would refuse
// them, and only a new set takes a new size, so the table is replaced (rarely: the set has
// doubled since).
func (d *Dataplane) outgrown() bool {
	for name, size := range d.sizes {
		if s, ok := d.table.Sets[name]; ok && s.Len() > int(size) {
			return true
		}
	}
	return false
}

// groupName is a group chain's name: direction and a hash of the group key.
func groupName(dir model.Direction, key string) string {
	prefix := "in_"
	if dir == model.Egress {
		prefix = "eg_"
	}
	return prefix + shortHash(key)
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}

// denyChains names the committed table's deny chains and the reason each counts, and, with
// CountAllowed, the chains and sets that count what they accept.
type denyChains struct {
	table   string
	reasons map[string]string // chain → reason (its comment)
	full    map[string]string // chain → reason, whole
	// counting: the chains with counting accept rules and the counting sets (counts.go)
	countChains, countSets []string
}

// noteDenies records the deny chains of the table just committed, for DeniedPackets, DenyChain
// and PolicyPackets.
func (d *Dataplane) noteDenies() {
	dc := &denyChains{table: d.table.Name, reasons: make(map[string]string, len(d.denies)),
		full: make(map[string]string, len(d.denies))}
	for name := range d.denies {
		if c, ok := d.table.Chains[name]; ok {
			dc.reasons[name] = c.Comment
			dc.full[name] = d.denyReasons[name]
		}
	}
	if d.countAllowed {
		dc.countChains, dc.countSets = d.counting()
	}
	d.denied.Store(dc)
}

// DeniedPackets reads the kernel's counters of the deny chains: packets dropped per reason. It
// may be called from any goroutine, during an apply too: it reads the table last committed, on a
// netlink connection of its own.
func (d *Dataplane) DeniedPackets() (map[string]uint64, error) {
	dc := d.denied.Load()
	if d.conn == nil || dc == nil {
		return nil, nil
	}
	counters, err := ruleset.ReadCounters(d.netnsFD, dc.table, slices.Sorted(maps.Keys(dc.reasons)))
	if err != nil {
		return nil, fmt.Errorf("reading counters: %w", err)
	}
	out := map[string]uint64{}
	for name, reason := range dc.reasons {
		out[reason] += counters[name].Packets
	}
	return out, nil
}
