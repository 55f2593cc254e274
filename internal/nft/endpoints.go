package nft

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// layout is where the local endpoints stand in the table: each endpoint's dispatch elements and
// the group each leads to, the groups by chain name, and the workload prefixes being checked.
type layout struct {
	endpoints map[model.EndpointKey]*endpoint
	groups    map[string]*group // by chain name
	// activePrefixes are the workload prefixes behind which a local pod has been seen (its
	// host route leaves through such an interface): only those are checked (see Config).
	activePrefixes map[string]bool
}

func newLayout() layout {
	return layout{endpoints: map[model.EndpointKey]*endpoint{}, groups: map[string]*group{},
		activePrefixes: map[string]bool{}}
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
	// chain; the group holds one reference of objects.classes per chain it uses.
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

// regroup recomputes the dispatch elements, group memberships and anti-spoofing elements of
// the endpoints keys in two passes: each endpoint first withdraws what it no longer wants, then
// each puts what it wants. An address whose owner changes within one apply (the graph names one
// owner per address) is thus withdrawn by the old owner before the new one puts it, whatever
// the order of their keys: the old owner's delete never takes the new owner's element.
func (b *Builder) regroup(keys []model.EndpointKey) {
	wants := make([]map[dispatchKey]string, len(keys))
	for i, k := range keys {
		if e := b.layout.endpoints[k]; e != nil {
			wants[i] = b.wantedGroups(e)
			b.withdraw(e, wants[i])
		}
	}
	for i, k := range keys {
		if e := b.layout.endpoints[k]; e != nil {
			b.join(k, e, wants[i])
		}
	}
}

// wantedGroups is the group chain of each dispatch element the endpoint needs: one per address
// and direction with policy (none after it is removed).
func (b *Builder) wantedGroups(e *endpoint) map[dispatchKey]string {
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
			want[dispatchKey{dir, a}] = groupName(dir, b.state.GroupKey(dir, tiers, a))
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
func (b *Builder) withdraw(e *endpoint, want map[dispatchKey]string) {
	for dk, old := range e.groups {
		if want[dk] != old {
			b.leaveGroup(old, dk)
			b.deleteDispatch(dk)
			delete(e.groups, dk)
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

// join puts the dispatch and anti-spoofing elements the endpoint wants and joins their
// groups; a removed endpoint is forgotten.
func (b *Builder) join(k model.EndpointKey, e *endpoint, want map[dispatchKey]string) {
	for dk, name := range want {
		if e.groups[dk] == name {
			continue
		}
		g := b.layout.groups[name]
		if g == nil {
			g = &group{name: name, dir: dk.dir, is4: dk.addr.Is4(), tiers: e.tiers(dk.dir),
				members: map[dispatchKey]struct{}{}, classUse: map[string]int{}, stale: true,
				dirtyPeers: map[netip.Addr]struct{}{}}
			b.layout.groups[name] = g
			b.pending.groups[name] = struct{}{}
			b.index.group(g, true)
		}
		g.members[dk] = struct{}{}
		e.groups[dk] = name
		b.setDispatch(dk, name, k)
	}
	b.putSources(e)
	if e.removed() {
		delete(b.layout.endpoints, k)
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

func (b *Builder) leaveGroup(name string, dk dispatchKey) {
	g := b.layout.groups[name]
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
	b.index.group(g, false)
	for c := range g.classUse {
		b.releaseClass(c)
	}
	b.releaseShared(g, nil)
	delete(b.layout.groups, name)
	b.dropChain(name)
	b.dropMapSets(g)
}

// dropMapSets drops the sets of a group's map shape (layout.go) that the table holds.
func (b *Builder) dropMapSets(g *group) {
	for _, suffix := range []string{"_allow", "_peers", "_nets"} {
		b.dropSet(g.name + suffix)
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

func (b *Builder) setDispatch(dk dispatchKey, chain string, k model.EndpointKey) {
	name := dispatchMap(dk)
	ek := ruleset.AddrKey(dk.addr)
	b.table.Sets[name].Put(ruleset.Element{ElementKey: ek, Value: ruleset.Value{
		Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: chain},
		Comment: ruleset.Comment(k.String()),
	}})
}

func (b *Builder) deleteDispatch(dk dispatchKey) {
	name := dispatchMap(dk)
	ek := ruleset.AddrKey(dk.addr)
	b.table.Sets[name].Delete(ek)
}

func (b *Builder) dropChain(name string) {
	delete(b.table.Chains, name)
	b.pending.changes.Chains[name] = struct{}{}
}

// dropSet removes a set from the table, if the table holds it.
func (b *Builder) dropSet(name string) {
	if _, ok := b.table.Sets[name]; !ok {
		return
	}
	delete(b.table.Sets, name)
	b.pending.changes.Sets[name] = struct{}{}
}

func (b *Builder) putChain(c *ruleset.Chain) {
	b.table.Chains[c.Name] = c
	b.pending.changes.Chains[c.Name] = struct{}{}
}

func (b *Builder) putSet(s *ruleset.Set) {
	b.sizes.put(s)
	b.table.Sets[s.Name] = s
	b.pending.changes.Sets[s.Name] = struct{}{}
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
