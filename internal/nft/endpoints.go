package nft

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// layout is where the local endpoints stand in the table: each endpoint's dispatch elements and
// the group each leads to, the groups by chain name and by key, and the workload prefixes being
// checked.
type layout struct {
	endpoints map[model.EndpointKey]*endpoint
	groups    map[string]*group // by chain name
	byKey     map[keyID]*group  // by group key (its hash)
	// activePrefixes are the workload prefixes behind which a local pod has been seen (its
	// host route leaves through such an interface): only those are checked (see Config).
	activePrefixes map[string]bool
	// hostsActive: a host endpoint has had a dispatch element; the host objects are in the
	// table from then on (host.go)
	hostsActive bool
	// stages are the host endpoint stages whose objects are in the table, marking whether one
	// of them sets markAccepted; stageAll is the group chain of each "*" endpoint's stage
	// element (hoststage.go).
	stages   map[dataplane.Stage]bool
	marking  bool
	stageAll map[dispatchKey]string
	// namedIfs are the interfaces of the named host endpoints, namedIfsChanged whether they
	// changed since host_named_if was written.
	namedIfs        map[model.EndpointKey][]string
	namedIfsChanged bool
}

func newLayout() layout {
	return layout{endpoints: map[model.EndpointKey]*endpoint{}, groups: map[string]*group{},
		byKey: map[keyID]*group{}, activePrefixes: map[string]bool{}, stages: map[dataplane.Stage]bool{}, stageAll: map[dispatchKey]string{},
		namedIfs: map[model.EndpointKey][]string{}}
}

type endpoint struct {
	msg     dataplane.EndpointUpdated
	groups  map[dispatchKey]string // dispatch element → group chain name
	sources []ruleset.ElementKey   // its interface . address elements (anti-spoofing)
}

// dispatchKey is one local address in one direction and stage: one element of a dispatch map.
// For a host endpoint, ifname is its interface (model.HostInterfaceAll for all): its elements
// are in the host dispatch maps (host.go), those of the other stages (hoststage.go) with the
// unspecified address of their family; a pod's ifname is "".
type dispatchKey struct {
	dir    model.Direction
	addr   netip.Addr
	ifname string
	stage  dataplane.Stage
}

// less orders dispatch keys by address, then interface, then stage.
func (dk dispatchKey) less(o dispatchKey) bool {
	if dk.addr != o.addr {
		return dk.addr.Less(o.addr)
	}
	if dk.ifname != o.ifname {
		return dk.ifname < o.ifname
	}
	return dk.stage < o.stage
}

// keyID identifies a group by the SHA-256 of its direction and key (GroupKey): a key spells out
// the group's policies, as long as they are many.
type keyID [sha256.Size]byte

// groupID is what a dispatch element's group is known by: its key, and the part of it that
// the local-side facts make.
type groupID struct{ key, facts keyID }

// group is one decision structure: the endpoints (addresses) with equal GroupKeys for a direction
// and family share it. Its name, hence its chain's and maps', is that of its lowest dispatch
// element (groupName), not of its key: a group whose key changes (a policy added to or removed
// from the endpoints it holds) keeps its name, and its next compile finds its previous objects in
// the table under it (placement).
type group struct {
	key     keyID
	facts   keyID // the local-side facts' part of the key
	dir     model.Direction
	is4     bool
	tiers   []dataplane.TierPolicies
	members map[dispatchKey]model.EndpointKey
	stale   bool // needs a full recompile (its policies or tiers changed, or it is new)
	placement
}

// placement is what a group holds in the table under its name: its chain and maps, its
// references to class chains and shared sets, and the compiled form they were laid out from.
// When a group gives up its name (its key changed, or its lowest address left) the group that
// takes the name next takes the placement too, so that its compile changes the objects in place
// and a commit sends what differs.
type placement struct {
	name string
	// low is the group's lowest dispatch element, which name is made of (groupName): the
	// group's sample address and its chain's comment
	low dispatchKey
	// classUse counts the references (peer elements, intervals, the default) to each class
	// chain; the group holds one reference of objects.classes per chain it uses.
	classUse map[string]int
	compiled *compiled // the last full compile (map shape), updated peer by peer
	union    *union    // the union shape's grants (union.go), updated peer by peer
	// dirtyPeers are addresses whose membership of a referenced set changed since the last
	// compile: only their peers elements are recomputed.
	dirtyPeers map[netip.Addr]struct{}
	// listed: the group has the listed shape (list.go), compiled is nil and its peers are the
	// members of the shared sets it holds references to.
	listed bool
	shared []string
}

func newPlacement(name string, low dispatchKey) placement {
	return placement{name: name, low: low, classUse: map[string]int{}, dirtyPeers: map[netip.Addr]struct{}{}}
}

// regroup recomputes the dispatch elements, group memberships and anti-spoofing elements of
// the endpoints keys in passes: each endpoint first withdraws what it no longer wants, then
// each joins the groups of its keys, then the groups whose members changed are named (place).
// An address whose owner changes within one apply (the graph names one owner per address) is
// thus withdrawn by the old owner before the new one puts it, whatever the order of their keys:
// the old owner's delete never takes the new owner's element.
func (b *Builder) regroup(keys []model.EndpointKey) {
	wants := make([]map[dispatchKey]groupID, len(keys))
	touched := map[*group]struct{}{}
	for i, k := range keys {
		if e := b.layout.endpoints[k]; e != nil {
			wants[i] = b.wantedKeys(e)
			b.withdraw(e, wants[i], touched)
		}
	}
	for i, k := range keys {
		if e := b.layout.endpoints[k]; e != nil {
			b.join(k, e, wants[i], touched)
		}
	}
	b.place(touched)
	if b.layout.namedIfsChanged {
		b.putNamedIfs()
	}
}

// wantedKeys is the group key of each dispatch element the endpoint needs: one per address and
// direction with policy (none after it is removed).
func (b *Builder) wantedKeys(e *endpoint) map[dispatchKey]groupID {
	want := map[dispatchKey]groupID{}
	if e.removed() {
		return want
	}
	for _, dir := range []model.Direction{model.Ingress, model.Egress} {
		tiers := e.msg.Tiers(dataplane.StageLocal, dir)
		ifnames := []string{""}
		if e.msg.Host {
			ifnames = e.msg.HostInterfaces() // an element per interface, of one group per address
		}
		if len(tiers) == 0 {
			ifnames = nil // no policy applies: allowed, no dispatch element
		}
		for _, ifname := range ifnames {
			for _, a := range e.msg.Addrs {
				key, facts := b.state.groupKey(dir, tiers, a)
				want[dispatchKey{dir: dir, addr: a, ifname: ifname}] = groupID{key, facts}
			}
		}
		if !e.msg.Host {
			continue
		}
		for _, st := range dataplane.Stages {
			tiers := e.msg.Tiers(st, dir)
			if st == dataplane.StageLocal || len(tiers) == 0 {
				continue
			}
			addrs := []netip.Addr{stageAll(true), stageAll(false)}
			if st != dataplane.StageForward {
				addrs = append(addrs, e.msg.Addrs...) // the node's own traffic before DNAT or conntrack
			}
			for _, ifname := range e.msg.HostInterfaces() {
				for _, a := range addrs {
					key, facts := b.state.groupKey(dir, tiers, a)
					want[dispatchKey{dir: dir, addr: a, ifname: ifname, stage: st}] = groupID{key, facts}
				}
			}
		}
	}
	return want
}

// withdraw leaves the groups whose key the endpoint's dispatch elements no longer have, deletes
// the dispatch elements it no longer wants and the anti-spoofing elements it no longer has.
func (b *Builder) withdraw(e *endpoint, want map[dispatchKey]groupID, touched map[*group]struct{}) {
	for dk, name := range e.groups {
		g := b.layout.groups[name]
		id, wanted := want[dk]
		if wanted && g.key == id.key {
			continue
		}
		delete(g.members, dk)
		touched[g] = struct{}{}
		delete(e.groups, dk)
		if !wanted {
			b.deleteDispatch(dk)
		}
	}
	if len(b.opts.prefixes) == 0 {
		return
	}
	keep := e.wantedSources()
	for _, k := range e.sources {
		if !slices.Contains(keep, k) {
			b.table.Sets[sourcesSet(k.Addr)].Delete(k)
		}
	}
}

// join makes the endpoint's dispatch elements members of the groups of their keys (place names
// them and puts the elements) and puts its anti-spoofing elements; a removed endpoint is
// forgotten.
func (b *Builder) join(k model.EndpointKey, e *endpoint, want map[dispatchKey]groupID, touched map[*group]struct{}) {
	for dk, id := range want {
		if _, in := e.groups[dk]; in {
			continue // withdraw kept it: same key
		}
		g := b.layout.byKey[id.key]
		if g == nil {
			g = &group{key: id.key, facts: id.facts, dir: dk.dir, is4: dk.addr.Is4(), tiers: e.msg.Tiers(dk.stage, dk.dir),
				members: map[dispatchKey]model.EndpointKey{}}
			b.layout.byKey[id.key] = g
		}
		g.members[dk] = k
		touched[g] = struct{}{}
	}
	b.putSources(e)
	if e.removed() {
		delete(b.layout.endpoints, k)
	}
}

// place names the groups whose members changed after their lowest dispatch element (groupName)
// and points their members' dispatch elements at them. A group that gives up a name releases its
// placement; the group that takes the name takes the placement with it (it is recompiled, and
// its compile changes the objects in place); a placement no group takes is dropped from the
// table. A group left without members is forgotten.
func (b *Builder) place(touched map[*group]struct{}) {
	gs := slices.SortedFunc(maps.Keys(touched), func(x, y *group) int { return bytes.Compare(x.key[:], y.key[:]) })
	type release struct {
		placement
		tiers []dataplane.TierPolicies // of the group that held it, as the index files it
	}
	released := map[string]release{}
	var moved []*group
	type naming struct {
		name string
		low  dispatchKey // the element name is made of
	}
	wants := map[*group]naming{}
	for _, g := range gs {
		want, low := "", dispatchKey{}
		if len(g.members) > 0 {
			low = g.lowest()
			want = groupName(g.dir, low)
		}
		if want == g.name {
			continue
		}
		if g.name != "" {
			delete(b.layout.groups, g.name)
			released[g.name] = release{g.placement, g.tiers}
			g.placement = placement{}
		}
		if want == "" {
			delete(b.layout.byKey, g.key)
			continue
		}
		wants[g] = naming{want, low}
		moved = append(moved, g)
	}
	for _, g := range moved {
		name, low := wants[g].name, wants[g].low
		if r, ok := released[name]; ok { // a placement of this name has this low
			g.placement = r.placement
			b.index.groupTiers(name, r.tiers, g.tiers)
			delete(released, name)
		} else {
			g.placement = newPlacement(name, low)
			b.index.group(name, g.tiers, true)
		}
		g.stale = true
		b.layout.groups[name] = g
		b.pending.groups[name] = struct{}{}
	}
	for _, name := range slices.Sorted(maps.Keys(released)) {
		b.index.group(name, released[name].tiers, false)
		b.dropPlacement(released[name].placement)
	}
	for _, g := range gs {
		for dk, k := range g.members {
			if e := b.layout.endpoints[k]; e.groups[dk] != g.name {
				e.groups[dk] = g.name
				b.setDispatch(dk, g.name, k)
			}
		}
	}
}

// wantedSources is the endpoint's interface . address elements of the anti-spoofing sets: one
// per address once its interface is known, none after it is removed (none for a host endpoint).
func (e *endpoint) wantedSources() []ruleset.ElementKey {
	if e.removed() || e.msg.Interface == "" || e.msg.Host {
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
func (b *Builder) putSources(e *endpoint) {
	if len(b.opts.prefixes) == 0 {
		return
	}
	want := e.wantedSources()
	if len(want) > 0 {
		b.activatePrefix(e.msg.Interface)
	}
	for _, k := range want {
		b.table.Sets[sourcesSet(k.Addr)].Put(ruleset.Element{ElementKey: k, Value: ruleset.Value{Comment: ruleset.Comment(e.msg.Key.String())}})
	}
	e.sources = want
}

// activatePrefix starts checking the workload prefix of ifname, once a local pod is seen behind
// such an interface; it stays checked.
func (b *Builder) activatePrefix(ifname string) {
	for _, p := range b.opts.prefixes {
		if strings.HasPrefix(ifname, p) && !b.layout.activePrefixes[p] {
			b.layout.activePrefixes[p] = true
			b.putForwardEgress()
			b.putForwardIngress()
			b.opts.log.Info("anti-spoofing: checking workload interfaces", "prefix", p+"*", "first", ifname)
		}
	}
}

// CheckedPrefixes are the workload prefixes being checked, sorted; the anti-spoofing elements are
// the sources sets' (SourcesV4, SourcesV6). internal/nft/kernel's bridge companion checks bridge
// ports by both.
func (b *Builder) CheckedPrefixes() []string {
	return slices.Sorted(maps.Keys(b.layout.activePrefixes))
}

// The anti-spoofing sets of the table: interface . address of each local pod whose interface is
// known, commented with the pod.
const (
	SourcesV4 = setSourcesV4
	SourcesV6 = setSourcesV6
)

func sourcesSet(a netip.Addr) string {
	if a.Is4() {
		return setSourcesV4
	}
	return setSourcesV6
}

// sample is the group endpoint address whose local-side facts the compile reads (all members
// have equal ones): the lowest, so that the choice is deterministic.
func (g *group) sample() netip.Addr { return g.low.addr }

// lowest is the group's lowest dispatch element, which names it.
func (g *group) lowest() dispatchKey {
	var low dispatchKey
	for dk := range g.members {
		if !low.addr.IsValid() || dk.less(low) {
			low = dk
		}
	}
	return low
}

func (e *endpoint) removed() bool { return e.msg.Key == (model.EndpointKey{}) }

// dropPlacement removes a placement no group took: its chain and maps, its references to class
// chains and shared sets.
func (b *Builder) dropPlacement(p placement) {
	for c := range p.classUse {
		b.releaseClass(c)
	}
	for _, name := range p.shared {
		if b.objects.shared.release(name) {
			b.dropSet(name)
			delete(b.domains, name)
		}
	}
	b.dropChain(p.name)
	b.dropMapSets(p.name)
}

// dropMapSets drops the sets of a group's map shape (layout.go) that the table holds, and the
// chain of its domain-name prefix.
func (b *Builder) dropMapSets(name string) {
	for _, suffix := range []string{"_allow", "_peers", "_nets"} {
		b.dropSet(name + suffix)
	}
	b.dropDomainChain(name)
}

func dispatchMap(dk dispatchKey) string {
	if dk.ifname != "" {
		return hostDispatchMap(dk)
	}
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

func (b *Builder) setDispatch(dk dispatchKey, chain string, k model.EndpointKey) {
	if dk.stage != dataplane.StageLocal {
		b.setStageDispatch(dk, chain, k)
		return
	}
	name := dispatchMap(dk)
	comment := k.String()
	if dk.ifname != "" {
		b.activateHosts()
		comment = hostComment(k, dk.ifname)
	}
	b.table.Sets[name].Put(ruleset.Element{ElementKey: dk.elementKey(), Value: ruleset.Value{
		Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: chain},
		Comment: ruleset.Comment(comment),
	}})
}

func (b *Builder) deleteDispatch(dk dispatchKey) {
	if dk.stage != dataplane.StageLocal {
		b.deleteStageDispatch(dk)
		return
	}
	b.table.Sets[dispatchMap(dk)].Delete(dk.elementKey())
}

// elementKey is the dispatch element's key: the address, and a named interface's name.
func (dk dispatchKey) elementKey() ruleset.ElementKey {
	ek := ruleset.AddrKey(dk.addr)
	if dk.ifname != model.HostInterfaceAll {
		ek.Ifname = dk.ifname
	}
	return ek
}

func (b *Builder) dropChain(name string) {
	delete(b.table.Chains, name)
	b.pending.chain(name)
}

// dropSet removes a set from the table, if the table holds it.
func (b *Builder) dropSet(name string) {
	if _, ok := b.table.Sets[name]; !ok {
		return
	}
	delete(b.table.Sets, name)
	b.pending.set(name)
}

func (b *Builder) putChain(c *ruleset.Chain) {
	b.table.Chains[c.Name] = c
	b.pending.chain(c.Name)
}

func (b *Builder) putSet(s *ruleset.Set) {
	b.sizes.put(s)
	b.table.Sets[s.Name] = s
	b.pending.set(s.Name)
}

// groupName is the name of a group chain (and the prefix of its maps' names): its direction and
// a hash of its lowest address. Each dispatch element is in one group, so no two groups share a
// name; the name depends on the group's members, not on its policies, and a fresh Builder
// computes the same one from the same state.
func groupName(dir model.Direction, lowest dispatchKey) string {
	prefix := "in_"
	if dir == model.Egress {
		prefix = "eg_"
	}
	if lowest.stage != dataplane.StageLocal {
		return stageGroupName(prefix, lowest)
	}
	if lowest.ifname != "" {
		return prefix + shortHash(lowest.ifname+" "+lowest.addr.String())
	}
	return prefix + shortHash(lowest.addr.String())
}

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}
