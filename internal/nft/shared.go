package nft

import (
	"maps"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// The kernel side of listed groups (list.go): their chain and the sets they share. Shared sets
// are reference-counted by the groups whose chains look them up; a selector's set (sel_…) and a
// named-port set (np_…) follow the State's members, the others (nets_…, ports_…) are
// content-addressed and never change.

func famSuffix(is4 bool) string {
	if is4 {
		return "_v4"
	}
	return "_v6"
}

func selSetName(id dataplane.SetID, is4 bool) string {
	return "sel_" + shortHash(string(id)) + famSuffix(is4)
}
func npSetName(id dataplane.SetID, is4 bool) string {
	return "np_" + shortHash(string(id)) + famSuffix(is4)
}

// addrKey is the set key type of addresses of a family (the rule's lookup names the packet field).
func addrKey(is4 bool) ruleset.Key {
	if is4 {
		return ruleset.KeyIPSaddr
	}
	return ruleset.KeyIP6Saddr
}

// localKey is the lookup key of a group's local address: the destination of ingress, the
// source of egress (the other side of peerKeys').
func localKey(dir model.Direction, is4 bool) ruleset.Key {
	switch {
	case dir == model.Ingress && is4:
		return ruleset.KeyIPDaddr
	case dir == model.Ingress:
		return ruleset.KeyIP6Daddr
	case is4:
		return ruleset.KeyIPSaddr
	}
	return ruleset.KeyIP6Saddr
}

// namedPortSetKey is the key type of a named-port set of a family: destination address .
// protocol . destination port.
func namedPortSetKey(is4 bool) ruleset.Key {
	if is4 {
		return ruleset.KeyIPDaddrL4ProtoDport
	}
	return ruleset.KeyIP6DaddrL4ProtoDport
}

// putListGroup writes a listed group's chain: one accepting rule per list rule, then the final
// outcome's class chain. It takes its references before releasing the previous compile's, so an
// object both use is never dropped and re-added.
func (b *Builder) putListGroup(g *group, rl *ruleList) {
	builders := map[string]func() *ruleset.Set{}
	chain := &ruleset.Chain{Name: g.name, Comment: g.comment()}
	for _, lr := range rl.rules {
		chain.Rules = append(chain.Rules, b.acceptRule(g, &lr, builders))
	}
	final := outcomeClass(rl.final)
	chain.Rules = append(chain.Rules, ruleset.Rule{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: final.chain()},
		Comment: g.finalComment(rl.final.Reason)})
	use, classes := map[string]int{final.chain(): 1}, map[string]*Class{final.Key: final}
	for _, lr := range rl.rules {
		if lr.outcome != nil { // an ordered group's (ordered.go)
			c := outcomeClass(*lr.outcome)
			use[c.chain()]++
			classes[c.Key] = c
		}
	}

	// the map shape's objects, when the group had it
	g.compiled, g.union = nil, nil
	b.dropMapSets(g.name)
	b.setClassUse(g, use, classes)
	b.useShared(g, builders)
	g.listed = true
	if old := b.table.Chains[g.name]; old == nil || !sameChain(old, chain) {
		b.putChain(chain)
	}
}

// outcomeClass is the class whose chain gives every packet outcome o.
func outcomeClass(o Outcome) *Class {
	c := &Class{Other: o}
	c.Key = classKey(c)
	return c
}

// acceptRule is the accepting rule of one list rule of group g; the shared sets it looks up go
// into builders, by name.
func (b *Builder) acceptRule(g *group, lr *listRule, builders map[string]func() *ruleset.Set) ruleset.Rule {
	addr, _ := peerKeys(g.dir, g.is4)
	var ls []ruleset.Lookup
	use := func(name string, key ruleset.Key, invert bool, build func() *ruleset.Set) {
		builders[name] = build
		ls = append(ls, ruleset.Lookup{Key: key, Set: name, Invert: invert})
	}
	for i, ids := range [][]dataplane.SetID{lr.sets, lr.notSets} {
		for _, id := range ids {
			use(selSetName(id, g.is4), addr, i == 1, func() *ruleset.Set { return b.selSet(id, g.is4) })
		}
	}
	if lr.domain != "" {
		name, build := domainSet(lr.domain, g.is4)
		use(name, addr, false, build)
		// the other family's set too: the agent writes both families of a pattern
		other, buildOther := domainSet(lr.domain, !g.is4)
		builders[other] = buildOther
		if b.domains == nil {
			b.domains = map[string]string{}
		}
		b.domains[name], b.domains[other] = lr.domain, lr.domain
	}
	if lr.hasNets {
		name, build := netsSet(lr.nets, g.is4)
		use(name, addr, false, build)
	}
	local := localKey(g.dir, g.is4)
	for i, ids := range [][]dataplane.SetID{lr.localSets, lr.localNotSets} {
		for _, id := range ids {
			use(selSetName(id, g.is4), local, i == 1, func() *ruleset.Set { return b.selSet(id, g.is4) })
		}
	}
	if lr.localHasNets {
		name, build := netsSet(lr.localNets, g.is4)
		use(name, local, false, build)
	}
	if lr.ports != nil {
		name, build := portsSet(lr.ports)
		use(name, ruleset.KeyL4ProtoDport, false, build)
	}
	if id := lr.namedPorts; id != "" {
		use(npSetName(id, g.is4), namedPortSetKey(g.is4), false, func() *ruleset.Set { return b.namedPortSet(id, g.is4) })
	}
	if lr.returns {
		return ruleset.Rule{L4Proto: uint8(lr.proto), Lookups: ls, Verdict: ruleset.Verdict{Kind: ruleset.Return},
			Comment: ruleset.Comment(lr.reason)}
	}
	if lr.outcome != nil {
		return ruleset.Rule{L4Proto: uint8(lr.proto), Lookups: ls,
			Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: outcomeClass(*lr.outcome).chain()}, Comment: ruleset.Comment(lr.reason)}
	}
	return ruleset.Rule{L4Proto: uint8(lr.proto), Lookups: ls, Counter: b.opts.countAllowed,
		Verdict: ruleset.Verdict{Kind: ruleset.Accept}, Comment: ruleset.Comment(lr.reason)}
}

// useShared makes the shared sets of builders the group's: it takes the references it lacks
// before dropping those it no longer uses, so a set both use is never dropped and re-added.
func (b *Builder) useShared(g *group, builders map[string]func() *ruleset.Set) {
	shared := slices.Sorted(maps.Keys(builders))
	for _, name := range shared {
		if !slices.Contains(g.shared, name) {
			b.acquireShared(name, builders[name])
		}
	}
	b.releaseShared(g, shared)
}

// domainChain starts group g's chain (of a map or union shape) with the prefix of its
// domain-name rules (domainRules) and makes their shared sets the group's: the accepting rules
// themselves, or, when a Deny's or a Pass's rule returns among them, a jump to the chain <group>_fqdn that
// holds them.
func (b *Builder) domainChain(g *group, domain []listRule) *ruleset.Chain {
	builders := map[string]func() *ruleset.Set{}
	chain := &ruleset.Chain{Name: g.name, Comment: g.comment()}
	prefix := chain
	if slices.ContainsFunc(domain, func(lr listRule) bool { return lr.returns }) {
		prefix = &ruleset.Chain{Name: domainChainName(g.name), Comment: "domain-name rules in order: " + chain.Comment}
		prefix.Comment = ruleset.Comment(prefix.Comment)
		chain.Rules = append(chain.Rules, ruleset.Rule{Verdict: ruleset.Verdict{Kind: ruleset.Jump, Chain: prefix.Name},
			Comment: "domain-name rules in order, then the rest"})
	}
	for i := range domain {
		prefix.Rules = append(prefix.Rules, b.acceptRule(g, &domain[i], builders))
	}
	b.useShared(g, builders)
	if prefix == chain {
		b.dropDomainChain(g.name)
	} else if old := b.table.Chains[prefix.Name]; old == nil || !sameChain(old, prefix) {
		b.putChain(prefix)
	}
	return chain
}

// domainChainName names the chain of group name's domain-name prefix.
func domainChainName(name string) string { return name + "_fqdn" }

// dropDomainChain removes the chain of group name's domain-name prefix, if the table holds it.
func (b *Builder) dropDomainChain(name string) {
	if _, ok := b.table.Chains[domainChainName(name)]; ok {
		b.dropChain(domainChainName(name))
	}
}

// releaseShared drops the group's references to shared sets it no longer uses (keep).
func (b *Builder) releaseShared(g *group, keep []string) {
	for _, name := range g.shared {
		if slices.Contains(keep, name) {
			continue
		}
		if b.objects.shared.release(name) {
			b.dropSet(name)
			delete(b.domains, name)
		}
	}
	g.shared = keep
}

func (b *Builder) acquireShared(name string, build func() *ruleset.Set) {
	if b.objects.shared.acquire(name) {
		b.putSet(build())
	}
}

// selSet is the shared set of a selector's addresses of one family: the State's own storage of
// the set's members (State.Set), or, for a set the State lacks or that is not an address set
// (bad input), a set of its own.
func (b *Builder) selSet(id dataplane.SetID, is4 bool) *ruleset.Set {
	if own := b.stateFamily(id, is4); own != nil {
		return own
	}
	set := b.state.Sets[id]
	s := ruleset.NewAddrSet(selSetName(id, is4), addrKey(is4), ruleset.Comment(b.setComment(id)), 0)
	if set != nil {
		for a := range set.addresses(is4) {
			s.Put(ruleset.Element{ElementKey: ruleset.AddrKey(a)})
		}
	}
	return s
}

// stateFamily is the State's storage of address set id's members of one family; nil when the
// State has no such address set.
func (b *Builder) stateFamily(id dataplane.SetID, is4 bool) *ruleset.Set {
	if set := b.state.Sets[id]; set != nil && set.Kind == dataplane.SetAddrs {
		return set.family(is4)
	}
	return nil
}

// namedPortSet is the shared set of a named port's address . protocol . port members.
func (b *Builder) namedPortSet(id dataplane.SetID, is4 bool) *ruleset.Set {
	s := &ruleset.Set{Name: npSetName(id, is4), Key: namedPortSetKey(is4), Comment: ruleset.Comment(b.setComment(id)),
		Elements: map[ruleset.ElementKey]ruleset.Value{}}
	if set := b.state.Sets[id]; set != nil {
		for a, ms := range set.ports {
			if a.Is4() == is4 {
				for _, m := range ms {
					ek := namedPortKey(m)
					s.Elements[ek] = ruleset.Value{}
				}
			}
		}
	}
	return s
}

func namedPortKey(m dataplane.Member) ruleset.ElementKey {
	a := m.Addr.Unmap()
	return ruleset.ElementKey{Addr: a, AddrEnd: a, Proto: uint8(m.Protocol), Port: m.Port, PortEnd: m.Port}
}

// setComment is the comment of graph set id's sets in the table (setComment of the State's set).
func (b *Builder) setComment(id dataplane.SetID) string {
	if set := b.state.Sets[id]; set != nil {
		return setComment(id, set.Description)
	}
	return string(id)
}

// sharedMemberChanged brings the shared set of set id up to date with one member whose
// membership may have changed (the State already holds the new membership).
func (b *Builder) sharedMemberChanged(id dataplane.SetID, m dataplane.Member) {
	a := m.Addr.Unmap()
	if set := b.state.Sets[id]; set != nil && set.Kind == dataplane.SetNamedPorts {
		if s := b.table.Sets[npSetName(id, a.Is4())]; s != nil {
			b.setSharedElement(s, namedPortKey(m), b.state.namedPort(id, a, m.Protocol, m.Port))
		}
		return
	}
	// the table holds the State's own storage, changed in place already, or a set of its own
	if s := b.table.Sets[selSetName(id, a.Is4())]; s != nil && s != b.stateFamily(id, a.Is4()) {
		b.setSharedElement(s, ruleset.AddrKey(a), b.state.member(id, a))
	}
}

// setSharedElement adds (present) or removes one element of a shared set the table holds (its
// journal records the change for the commit).
func (b *Builder) setSharedElement(s *ruleset.Set, ek ruleset.ElementKey, present bool) {
	if present {
		s.Put(ruleset.Element{ElementKey: ek})
	} else {
		s.Delete(ek)
	}
}

// sharedSetReplaced rebuilds the shared sets of a set replaced or removed as a whole.
func (b *Builder) sharedSetReplaced(id dataplane.SetID) {
	for _, is4 := range []bool{true, false} {
		if _, ok := b.table.Sets[selSetName(id, is4)]; ok {
			b.putSet(b.selSet(id, is4))
		}
		if _, ok := b.table.Sets[npSetName(id, is4)]; ok {
			b.putSet(b.namedPortSet(id, is4))
		}
	}
}

// netsSet is the shared interval set of an ipBlock's ranges (except subtracted).
func netsSet(rs []addrRange, is4 bool) (string, func() *ruleset.Set) {
	var desc []string
	for _, r := range rs {
		desc = append(desc, r.from.String()+"-"+r.to.String())
	}
	text := strings.Join(desc, ",")
	name := "nets_" + shortHash(text) + famSuffix(is4)
	return name, func() *ruleset.Set {
		s := &ruleset.Set{Name: name, Key: addrKey(is4), Interval: true, Comment: ruleset.Comment("ipBlock " + text),
			Elements: map[ruleset.ElementKey]ruleset.Value{}}
		for _, r := range rs {
			ek := ruleset.ElementKey{Addr: r.from, AddrEnd: r.to}
			s.Elements[ek] = ruleset.Value{}
		}
		return s
	}
}

// portsSet is the shared interval set of a rule's protocol . port ranges.
func portsSet(ps []portRange) (string, func() *ruleset.Set) {
	text := describePorts(ps)
	name := "ports_" + shortHash(text)
	return name, func() *ruleset.Set {
		s := &ruleset.Set{Name: name, Key: ruleset.KeyL4ProtoDport, Interval: true, Comment: ruleset.Comment(text),
			Elements: map[ruleset.ElementKey]ruleset.Value{}}
		for _, p := range ps {
			ek := ruleset.ElementKey{Proto: uint8(p.proto), Port: p.first, PortEnd: p.last}
			s.Elements[ek] = ruleset.Value{}
		}
		return s
	}
}
