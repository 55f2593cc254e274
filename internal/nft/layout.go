package nft

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// objects are the objects of the table that several others use, each created on its first
// reference and dropped with its last (refs): a class chain (and its maps) while a group's
// elements or default lead to it, a shared set while a listed group's chain looks it up, a deny
// chain while a class chain or map goes to it (the anti-spoofing and fail-closed chains are
// never released).
type objects struct {
	classes refs[string] // class chain name → groups using it
	shared  refs[string] // shared set name → listed groups using it (shared.go)
	denies  refs[string] // deny chain name → class chains and maps using it
	// denyReasons holds each held deny chain's reason, whole (its comment is cut)
	denyReasons map[string]string
	logs        refs[string] // log chain name → class chains and maps using it
	// logReasons holds each held log chain's Log rules' reasons, in order
	logReasons map[string][]string
}

func newObjects() objects {
	return objects{classes: newRefs[string](), shared: newRefs[string](), denies: newRefs[string](),
		denyReasons: map[string]string{}, logs: newRefs[string](), logReasons: map[string][]string{}}
}

// established accepts replies and related packets of allowed connections.
func established() ruleset.Rule {
	return ruleset.Rule{CtState: ruleset.CtEstablishedRelated, Verdict: ruleset.Verdict{Kind: ruleset.Accept},
		Comment: "replies and related traffic of allowed connections"}
}

// invalid counts and drops packets conntrack cannot place.
func invalid() ruleset.Rule {
	return ruleset.Rule{CtState: ruleset.CtInvalid, Counter: true, Verdict: ruleset.Verdict{Kind: ruleset.Drop},
		Comment: "conntrack state invalid"}
}

// lookup is a dispatch rule: KEY vmap @set.
func lookup(key ruleset.Key, set, c string) ruleset.Rule {
	return ruleset.Rule{Lookups: []ruleset.Lookup{{Key: key, Set: set, Map: true}}, Comment: c}
}

// addSkeleton writes the fixed part of the table: base chains and dispatch maps.
func (b *Builder) addSkeleton() {
	if len(b.opts.prefixes) > 0 {
		for _, c := range []struct{ name, reason string }{
			{chainSpoofed, "spoofed source, or a workload interface without a programmed endpoint"},
			{chainUnprogrammed, "new connection to a workload interface whose pod is not programmed yet"},
		} {
			b.putChain(&ruleset.Chain{Name: c.name, Comment: c.reason, Rules: b.denyRules(c.name, c.reason)})
			b.objects.denies.acquire(c.name) // counted in the deny counters, never released
			b.objects.denyReasons[c.name] = c.reason
		}
	}
	b.putForwardEgress()
	b.putForwardIngress()
	b.putInput()
	b.putOutput()
	for _, m := range []struct {
		name string
		key  ruleset.Key
		c    string
	}{
		{mapIngressV4, ruleset.KeyIPDaddr, "local pod address → its ingress decision chain"},
		{mapIngressV6, ruleset.KeyIP6Daddr, "local pod address → its ingress decision chain"},
		{mapEgressV4, ruleset.KeyIPSaddr, "local pod address → its egress decision chain"},
		{mapEgressV6, ruleset.KeyIP6Saddr, "local pod address → its egress decision chain"},
	} {
		b.putSet(&ruleset.Set{Name: m.name, Key: m.key, Map: true, Comment: m.c, Elements: map[ruleset.ElementKey]ruleset.Value{}})
	}
	for _, s := range []struct {
		name string
		key  ruleset.Key
	}{{setSourcesV4, ruleset.KeyIifnameIPSaddr}, {setSourcesV6, ruleset.KeyIifnameIP6Saddr}} {
		if len(b.opts.prefixes) == 0 {
			break
		}
		b.putSet(&ruleset.Set{Name: s.name, Key: s.key, Comment: "workload interface . address of its pod (anti-spoofing)",
			Elements: map[ruleset.ElementKey]ruleset.Value{}})
	}
}

// putForwardEgress writes the egress base chain. Anti-spoofing comes first, for every packet
// (established ones too), for each workload prefix that is active: a workload interface passes
// only its own pod's source addresses, so a spoofed source, or an interface whose endpoint is not
// programmed yet, passes nothing.
func (b *Builder) putForwardEgress() {
	rules := b.workloadAddrChecks(false, chainSpoofed, "from a workload interface, a source that is not its pod's")
	rules = append(rules, established(), invalid(),
		lookup(ruleset.KeyIPSaddr, mapEgressV4, "from a local pod with egress policy (IPv4)"),
		lookup(ruleset.KeyIP6Saddr, mapEgressV6, "from a local pod with egress policy (IPv6)"))
	b.putChain(&ruleset.Chain{
		Name: ChainForwardEgress, Base: &ruleset.Base{Hook: ruleset.HookForward, Priority: PriorityEgress},
		Comment: "egress policy of local pods; an accept here still leaves forward_ingress to judge",
		Rules:   rules,
	})
}

// workloadAddrChecks returns, for each active workload prefix and then each family, a rule that
// sends a packet to target when its interface . address pair is not in the family's
// anti-spoofing set: the input interface and source address, or with toward the output
// interface and destination address. what, with the family, is the rule's comment.
func (b *Builder) workloadAddrChecks(toward bool, target, what string) []ruleset.Rule {
	keys := [2]ruleset.Key{ruleset.KeyIifnameIPSaddr, ruleset.KeyIifnameIP6Saddr}
	if toward {
		keys = [2]ruleset.Key{ruleset.KeyOifnameIPDaddr, ruleset.KeyOifnameIP6Daddr}
	}
	var rules []ruleset.Rule
	for _, p := range b.opts.prefixes {
		if !b.layout.activePrefixes[p] {
			continue
		}
		for i, set := range [2]string{setSourcesV4, setSourcesV6} {
			r := ruleset.Rule{Lookups: []ruleset.Lookup{{Key: keys[i], Set: set, Invert: true}},
				Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: target},
				Comment: what + " (" + [2]string{"IPv4", "IPv6"}[i] + ")"}
			if toward {
				r.Oifname = p + "*"
			} else {
				r.Iifname = p + "*"
			}
			rules = append(rules, r)
		}
	}
	return rules
}

// putForwardIngress writes the ingress base chain. After replies, for each workload prefix that
// is active, a new connection forwarded to a workload interface passes only to the address of
// the pod that interface leads to, once that pod is programmed (its interface . address element
// of the anti-spoofing sets): traffic to a pod the agent does not know yet is dropped, however
// its namespace's policies would judge it, until its endpoint lands (fail closed).
func (b *Builder) putForwardIngress() {
	rules := append([]ruleset.Rule{established()},
		b.workloadAddrChecks(true, chainUnprogrammed, "to a workload interface, an address of no programmed pod behind it")...)
	rules = append(rules,
		lookup(ruleset.KeyIPDaddr, mapIngressV4, "to a local pod with ingress policy (IPv4)"),
		lookup(ruleset.KeyIP6Daddr, mapIngressV6, "to a local pod with ingress policy (IPv6)"))
	b.putChain(&ruleset.Chain{
		Name: ChainForwardIngress, Base: &ruleset.Base{Hook: ruleset.HookForward, Priority: PriorityIngress},
		Comment: "ingress policy of local pods",
		Rules:   rules,
	})
}

// peerKeys are the lookup keys of a group's maps: the peer's address (peers and nets maps) and
// the peer's address . protocol . destination port (allow set).
func peerKeys(dir model.Direction, is4 bool) (addr, addrPort ruleset.Key) {
	switch {
	case dir == model.Ingress && is4:
		return ruleset.KeyIPSaddr, ruleset.KeyIPSaddrL4ProtoDport
	case dir == model.Ingress:
		return ruleset.KeyIP6Saddr, ruleset.KeyIP6SaddrL4ProtoDport
	case is4:
		return ruleset.KeyIPDaddr, ruleset.KeyIPDaddrL4ProtoDport
	}
	return ruleset.KeyIP6Daddr, ruleset.KeyIP6DaddrL4ProtoDport
}

// compileGroup recompiles one group's decision into its chain and maps; the committer sends
// only the elements that changed.
func (b *Builder) compileGroup(g *group, pre *compileResult) {
	g.stale = false
	clear(g.dirtyPeers)
	if len(g.members) == 0 {
		return
	}
	if pre == nil {
		pre = b.state.compileResult(g, !b.opts.noUnion)
	}
	switch {
	case pre.list != nil:
		b.putListGroup(g, pre.list)
		return
	case pre.union != nil:
		b.putUnionGroup(g, pre.union, pre.domain)
		return
	}
	cp := pre.cp
	for cp.plan.over {
		pre.domain = nil // a group with a policy rejected accepts no domain name early
		detail := fmt.Sprintf("compiling the %s rules of %s for %d endpoints exceeds the compiler's budget of %d",
			g.dir, g.describe(), len(g.members), b.state.compileBudget)
		if !b.rejectCostliest(g, "too costly to compile", detail) {
			cp = b.denyAll(g)
			break
		}
		cp = b.state.compile(g.dir, g.tiers, g.sample(), g.is4)
	}
	g.compiled, g.union = cp, nil
	dec := cp.Decision

	// peers go to the allow set when their class is the fall-through class plus allowed ports
	// (fast.go), to the peers map otherwise
	var peers, nets, allow []ruleset.Element
	use := map[string]int{}
	for a, ck := range dec.Peers {
		if r := cp.fast(ck, dec.fallClass(a)); r.ok {
			allow = append(allow, allowElements(a, r.ports)...)
			continue
		}
		c := dec.Classes[ck]
		use[c.chain()]++
		peers = append(peers, peerElement(a, a, c))
	}
	for _, iv := range dec.Intervals {
		c := dec.Classes[iv.Class]
		use[c.chain()]++
		nets = append(nets, peerElement(iv.From, iv.To, c))
	}
	use[dec.Classes[dec.Default].chain()]++
	b.setClassUse(g, use, dec.Classes)
	chain := b.domainChain(g, pre.domain) // and the shared sets of the group when it was listed
	g.listed = false

	key, _ := peerKeys(g.dir, g.is4)
	// the allow set and the peers map are kept while empty when sets are referenced: members
	// may join any time
	refs := len(cp.plan.refs) > 0
	b.putAllowSet(chain, g, refs, allow)
	b.putPeerMap(chain, g.name+"_peers", key, false, refs, peers,
		"known peer address → its peer class", "peers that selectors of these policies name")
	b.putPeerMap(chain, g.name+"_nets", key, true, len(nets) > 0, nets,
		"ipBlock ranges (except subtracted) → peer class", "peers in ipBlock ranges")
	chain.Rules = append(chain.Rules, ruleset.Rule{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: dec.Classes[dec.Default].chain()},
		Comment: g.finalComment("any other peer")})
	if old := b.table.Chains[g.name]; old == nil || !sameChain(old, chain) {
		b.putChain(chain)
	}
}

// compileResult compiles a group's tiers: the listed shape when it applies, else the union
// shape when it applies (and union is set; incrementally from the group's union), else a
// decision. It reads the State and writes nothing but the group's union.
func (s *State) compileResult(g *group, union bool) *compileResult {
	local := g.sample()
	if local.IsUnspecified() {
		if rl, ok := s.compileOrdered(g.dir, g.tiers, g.is4); ok {
			return &compileResult{list: rl}
		}
	}
	domain := s.domainRules(g.dir, g.tiers, local, g.is4)
	if rl, ok := s.compileList(g.dir, g.tiers, local, g.is4); ok && len(rl.rules)+len(domain) <= maxListRules {
		rl.rules = append(domain, rl.rules...)
		return &compileResult{list: rl}
	}
	if union {
		if u, ok := s.compileUnion(g.dir, g.tiers, local, g.is4, g.facts, g.union); ok {
			return &compileResult{union: u, domain: domain}
		}
	}
	return &compileResult{cp: s.compile(g.dir, g.tiers, local, g.is4), domain: domain}
}

// rejectCostliest rejects the policy of a group whose rules weigh the most (State.ruleCost; the
// first by key among equals) — why says why in a few words, detail in full — and reports false
// when none is left to reject.
func (b *Builder) rejectCostliest(g *group, why, detail string) bool {
	var worst model.PolicyKey
	cost := 0
	for _, t := range g.tiers {
		for _, k := range t.Policies {
			if _, done := b.state.rejected[k]; done {
				continue
			}
			if c := b.state.ruleCost(k, g.dir); c > cost || c == cost && c > 0 && k.String() < worst.String() {
				worst, cost = k, c
			}
		}
	}
	if cost == 0 {
		return false
	}
	b.state.reject(worst, why)
	enforced := "it keeps isolating what it selects and allows nothing"
	if len(b.state.rejected[worst]) > 0 {
		enforced = "it denies everything at its place in its tier"
	}
	b.opts.log.Error("policy rejected: its rules are not enforced as written; "+enforced,
		"policy", worst.String(), "why", why, "direction", g.dir.String(), "rule_weight", cost, "detail", detail)
	b.pending.reject(worst)
	if b.opts.rejected != nil {
		b.opts.rejected(worst, why+": "+detail)
	}
	return true
}

// denyAll is the decision of a group that cannot be compiled within budget even without its
// costliest policies: every packet is denied.
func (b *Builder) denyAll(g *group) *compiled {
	c := &Class{Other: Outcome{Verdict: Deny, Reason: "group " + g.name + " cannot be compiled within the compiler's budget: denied"}}
	c.Key = classKey(c)
	dec := &Decision{Peers: map[netip.Addr]string{}, Default: c.Key, Classes: map[string]*Class{c.Key: c}}
	return &compiled{Decision: dec, plan: &plan{s: b.state}}
}

// setClassUse makes use (class chain → references) the group's class references: it acquires
// each class of classes (by class key) that use counts and the group does not hold yet, then
// releases each chain the group held that use does not count, so a chain both use is never
// dropped and re-added.
func (b *Builder) setClassUse(g *group, use map[string]int, classes map[string]*Class) {
	for _, c := range classes {
		if name := c.chain(); use[name] > 0 && g.classUse[name] == 0 {
			b.acquireClass(c)
		}
	}
	for name := range g.classUse {
		if use[name] == 0 {
			b.releaseClass(name)
		}
	}
	g.classUse = use
}

// putPeerMap writes (want) or drops one of a group's address → class maps, adding its lookup
// to the group chain.
func (b *Builder) putPeerMap(chain *ruleset.Chain, name string, key ruleset.Key, interval, want bool,
	elements []ruleset.Element, setComment, ruleComment string) {
	if !want {
		b.dropSet(name)
		return
	}
	set := &ruleset.Set{Name: name, Key: key, Map: true, Interval: interval, Comment: setComment,
		Elements: make(map[ruleset.ElementKey]ruleset.Value, len(elements))}
	for _, e := range elements {
		set.Put(e)
	}
	b.putSet(set)
	chain.Rules = append(chain.Rules, peerMapRule(key, name, ruleComment))
}

// peerMapRule is a group chain's lookup of one of its address → class maps.
func peerMapRule(key ruleset.Key, name, comment string) ruleset.Rule {
	return ruleset.Rule{Lookups: []ruleset.Lookup{{Key: key, Set: name, Map: true}}, Comment: comment}
}

// compilePeers recomputes the peers elements of the addresses whose set membership changed
// since the group's last compile: the cost of a pod joining or leaving a selector is one peer's
// evaluation and one element per group, whatever the group's size.
func (b *Builder) compilePeers(g *group) {
	defer clear(g.dirtyPeers)
	set, allow := b.table.Sets[g.name+"_peers"], b.table.Sets[g.name+"_allow"]
	if set == nil || allow == nil || g.compiled == nil {
		b.compileGroup(g, nil)
		return
	}
	cp := g.compiled
	for a := range g.dirtyPeers {
		old, cur := cp.recompilePeer(a)
		if old == cur {
			continue
		}
		fk := cp.fallClass(a)
		if old != "" {
			if r := cp.fast(old, fk); r.ok {
				for _, e := range allowElements(a, r.ports) {
					allow.Delete(e.ElementKey)
				}
			} else {
				ek := ruleset.AddrKey(a)
				set.Delete(ek)
				name := cp.Classes[old].chain()
				if g.classUse[name]--; g.classUse[name] == 0 {
					delete(g.classUse, name)
					defer b.releaseClass(name) // after cur took its reference: never drop and re-add
				}
			}
		}
		if cur == "" {
			continue
		}
		if r := cp.fast(cur, fk); r.ok {
			for _, e := range allowElements(a, r.ports) {
				allow.Put(e)
			}
			continue
		}
		name := cp.Classes[cur].chain()
		if g.classUse[name] == 0 {
			b.acquireClass(cp.Classes[cur])
		}
		g.classUse[name]++
		e := peerElement(a, a, cp.Classes[cur])
		set.Put(e)
	}
}

// allowElements are a fast peer's elements of its group's allow set.
func allowElements(a netip.Addr, ports []protoPort) []ruleset.Element {
	out := make([]ruleset.Element, 0, len(ports))
	for _, p := range ports {
		ek := ruleset.ElementKey{Addr: a, AddrEnd: a, Proto: uint8(p.proto), Port: p.port, PortEnd: p.port}
		out = append(out, ruleset.Element{ElementKey: ek, Value: ruleset.Value{Comment: ruleset.Comment(p.reason)}})
	}
	return out
}

// putAllowSet writes (want) or drops a group's allow set, adding its lookup first in the chain.
func (b *Builder) putAllowSet(chain *ruleset.Chain, g *group, want bool, elements []ruleset.Element) {
	name := g.name + "_allow"
	if !want {
		b.dropSet(name)
		return
	}
	_, key := peerKeys(g.dir, g.is4)
	set := &ruleset.Set{Name: name, Key: key, Comment: "peer . protocol . port that its rules allow (peers of the fast path)",
		Counter: b.opts.countAllowed, Elements: make(map[ruleset.ElementKey]ruleset.Value, len(elements))}
	for _, e := range elements {
		set.Put(e)
	}
	b.putSet(set)
	chain.Rules = append(chain.Rules, allowRule(key, name))
}

// allowRule is a group chain's lookup of its allow set.
func allowRule(key ruleset.Key, name string) ruleset.Rule {
	return ruleset.Rule{Lookups: []ruleset.Lookup{{Key: key, Set: name}},
		Verdict: ruleset.Verdict{Kind: ruleset.Accept}, Comment: "peers allowed on these ports, everything else as any other peer"}
}

// peerElement is a peers or nets element leading to a class chain.
func peerElement(from, to netip.Addr, c *Class) ruleset.Element {
	ek := ruleset.ElementKey{Addr: from, AddrEnd: to}
	return ruleset.Element{ElementKey: ek, Value: ruleset.Value{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: c.chain()},
		Comment: c.summary()}}
}

// chain names the chain of a class: a hash of its key, so equal classes of different groups
// share one chain.
func (c *Class) chain() string {
	if c.name == "" {
		c.name = "c_" + c.Key[:12]
	}
	return c.name
}

func sameChain(a, b *ruleset.Chain) bool {
	return a.Name == b.Name && a.Comment == b.Comment && a.Base == nil && b.Base == nil &&
		slices.EqualFunc(a.Rules, b.Rules, ruleset.Rule.Equal)
}

// describe names the group: direction and the ordered policies.
func (g *group) describe() string { return g.describeUpTo(-1) }

// comment is the group chain's comment: its direction and lowest dispatch element, the inputs
// of its name (groupName), so a chain keeps one comment for its life. The kernel keeps a chain's
// comment as it was created (a chain added again with another comment keeps the first), so a
// comment that changed with the group's policies would cost a write of the whole table each time
// a name passes to a group of other policies; the policies are named by finalComment instead.
func (g *group) comment() string {
	low := g.low
	var of []string
	if low.stage != dataplane.StageLocal {
		of = append(of, low.stage.String())
	}
	if low.ifname != "" {
		of = append(of, low.ifname)
	}
	switch {
	case !low.addr.IsUnspecified():
		of = append(of, low.addr.String())
	case low.addr.Is4(): // a stage group dispatched by interface alone
		of = append(of, "IPv4")
	default:
		of = append(of, "IPv6")
	}
	return ruleset.Comment(fmt.Sprintf("%s group of %s and the endpoints grouped with it", g.dir, strings.Join(of, " ")))
}

// finalComment is the comment of the group chain's last rule: describe, then reason (what that
// rule decides), as far as a comment keeps (ruleset.MaxCommentLen bytes), so that a group of
// thousands of policies costs no string of their length; a reason cut short is whole in the
// comments of the class chain the rule goes to. A rule, unlike the chain, is replaced with the
// chain's other rules when the group's policies change.
func (g *group) finalComment(reason string) string {
	if !slices.ContainsFunc(g.tiers, func(t dataplane.TierPolicies) bool { return len(t.Policies) > 0 }) {
		return ruleset.Comment(reason) // a host endpoint's default: no policy to name
	}
	d := g.describeUpTo(ruleset.MaxCommentLen)
	if len(d)+len(" | ") >= ruleset.MaxCommentLen {
		return ruleset.Comment(d)
	}
	return ruleset.Comment(d + " | " + reason)
}

// describeUpTo is describe, stopped once longer than limit bytes (limit < 0: whole).
func (g *group) describeUpTo(limit int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", g.dir)
	for _, t := range g.tiers {
		for i, p := range t.Policies {
			if limit >= 0 && b.Len() > limit {
				return b.String()
			}
			if i == 0 {
				fmt.Fprintf(&b, " [%s]", t.Tier)
			}
			b.WriteString(" " + p.String())
		}
	}
	return b.String()
}

// summary names what a class allows and denies, for the comments of the elements leading to it.
func (c *Class) summary() string {
	if c.sum != "" {
		return c.sum
	}
	var parts []string
	seen := map[string]bool{}
	add := func(o Outcome) {
		if !seen[o.Reason] {
			seen[o.Reason] = true
			parts = append(parts, o.Reason)
		}
	}
	for _, s := range c.Ports {
		add(s.Outcome)
	}
	for _, s := range c.SrcPorts {
		for _, sub := range s.Class.Ports {
			add(sub.Outcome)
		}
	}
	for _, p := range sortedProtos(c.Protos) {
		add(c.Protos[p])
	}
	add(c.Other)
	c.sum = ruleset.Comment(strings.Join(parts, "; "))
	return c.sum
}

func sortedProtos(m map[model.Protocol]Outcome) []model.Protocol {
	out := make([]model.Protocol, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// acquireClass takes a reference to a class's chain, creating the chain (and its maps) on first
// use; a group takes one reference per class chain it uses.
func (b *Builder) acquireClass(c *Class) {
	name := c.chain()
	if !b.objects.classes.acquire(name) {
		return
	}
	chain := &ruleset.Chain{Name: name, Comment: c.summary()}
	if len(c.Protos) > 0 {
		set := &ruleset.Set{Name: name + "_l4", Key: ruleset.KeyL4Proto, Map: true, Comment: "protocols without ports",
			Counter: b.opts.countAllowed, Elements: map[ruleset.ElementKey]ruleset.Value{}}
		for _, p := range sortedProtos(c.Protos) {
			o := c.Protos[p]
			ek := ruleset.ElementKey{Proto: uint8(p)}
			set.Elements[ek] = ruleset.Value{Verdict: b.verdict(o), Comment: ruleset.Comment(o.Reason)}
		}
		b.putSet(set)
		chain.Rules = append(chain.Rules, ruleset.Rule{Lookups: []ruleset.Lookup{{Key: ruleset.KeyL4Proto, Set: set.Name, Map: true}}})
	}
	if len(c.SrcPorts) > 0 {
		set := &ruleset.Set{Name: name + "_sports", Key: ruleset.KeyL4ProtoSport, Map: true, Interval: true,
			Comment: "protocol . source port → the class of its destination ports", Elements: map[ruleset.ElementKey]ruleset.Value{}}
		for _, s := range c.SrcPorts {
			b.acquireClass(s.Class)
			ek := ruleset.ElementKey{Proto: uint8(s.Proto), Port: s.First, PortEnd: s.Last}
			set.Elements[ek] = ruleset.Value{Verdict: ruleset.Verdict{Kind: ruleset.Goto, Chain: s.Class.chain()},
				Comment: s.Class.summary()}
		}
		b.putSet(set)
		chain.Rules = append(chain.Rules, ruleset.Rule{Lookups: []ruleset.Lookup{{Key: ruleset.KeyL4ProtoSport, Set: set.Name, Map: true}}})
	}
	ports, icmp := c.Ports, icmpSegs(c)
	if len(icmp) > 0 {
		ports = slices.DeleteFunc(slices.Clone(ports), func(s PortSeg) bool { return !hasPorts(s.Proto) })
	}
	for _, m := range []struct {
		suffix, comment string
		key             ruleset.Key
		segs            []PortSeg
	}{
		{"_ports", "protocol . destination port → verdict", ruleset.KeyL4ProtoDport, ports},
		{"_icmp", "ICMP protocol . type<<8 | code (th sport) → verdict", ruleset.KeyL4ProtoSport, icmp},
	} {
		if len(m.segs) == 0 {
			continue
		}
		set := &ruleset.Set{Name: name + m.suffix, Key: m.key, Map: true, Interval: hasRange(m.segs),
			Comment: m.comment, Counter: b.opts.countAllowed, Elements: map[ruleset.ElementKey]ruleset.Value{}}
		for _, s := range m.segs {
			ek := ruleset.ElementKey{Proto: uint8(s.Proto), Port: s.First, PortEnd: s.Last}
			set.Elements[ek] = ruleset.Value{Verdict: b.verdict(s.Outcome), Comment: ruleset.Comment(s.Reason)}
		}
		b.putSet(set)
		chain.Rules = append(chain.Rules, ruleset.Rule{Lookups: []ruleset.Lookup{{Key: m.key, Set: set.Name, Map: true}}})
	}
	v := b.verdict(c.Other)
	chain.Rules = append(chain.Rules, ruleset.Rule{Verdict: v, Counter: b.opts.countAllowed && v.Kind == ruleset.Accept,
		Comment: ruleset.Comment(c.Other.Reason)})
	b.putChain(chain)
}

// releaseClass drops a holder of a class chain, removing the chain (and the deny chains only it
// used) with the last one.
func (b *Builder) releaseClass(name string) {
	if !b.objects.classes.release(name) {
		return
	}
	chain := b.table.Chains[name]
	b.dropChain(name)
	for _, suffix := range []string{"_l4", "_ports", "_icmp", "_sports"} {
		if set, ok := b.table.Sets[name+suffix]; ok {
			for _, e := range set.Elements {
				if suffix == "_sports" {
					b.releaseClass(e.Verdict.Chain) // a source-port range's class
					continue
				}
				b.releaseDeny(e.Verdict)
			}
			b.dropSet(name + suffix)
		}
	}
	if chain != nil {
		for _, r := range chain.Rules {
			b.releaseDeny(r.Verdict)
		}
	}
}

// verdict turns an outcome into a kernel verdict: allow accepts; deny goes to a counted drop
// chain named after its reason, so `nft list ruleset` counts drops per policy. An outcome with
// logs goes to a log chain, one per distinct (logs, verdict, reason): its Log rules' log
// statements, then that verdict.
func (b *Builder) verdict(o Outcome) ruleset.Verdict {
	if o.Logs != "" {
		name := "log_" + shortHash(o.Logs+"\x00"+o.Verdict.String()+"\x00"+o.Reason)
		if b.objects.logs.acquire(name) {
			rules, reasons := b.logRules(name, o.Logs, b.verdict(Outcome{Verdict: o.Verdict, Reason: o.Reason}), o.Reason)
			b.putChain(&ruleset.Chain{Name: name, Comment: ruleset.Comment(strings.ReplaceAll(strings.TrimSuffix(o.Logs, "\n"), "\n", "; ")),
				Rules: rules})
			b.objects.logReasons[name] = reasons
		}
		return ruleset.Verdict{Kind: ruleset.Goto, Chain: name}
	}
	if o.Verdict != Deny {
		return ruleset.Verdict{Kind: ruleset.Accept}
	}
	if o.Reason == reasonUndecided {
		return ruleset.Verdict{Kind: ruleset.Goto, Chain: chainUndecided}
	}
	name := "deny_" + shortHash(o.Reason)
	if b.objects.denies.acquire(name) {
		b.putChain(&ruleset.Chain{Name: name, Comment: ruleset.Comment(o.Reason), Rules: b.denyRules(name, o.Reason)})
		b.objects.denyReasons[name] = o.Reason
	}
	return ruleset.Verdict{Kind: ruleset.Goto, Chain: name}
}

func (b *Builder) releaseDeny(v ruleset.Verdict) {
	if v.Kind == ruleset.Goto && strings.HasPrefix(v.Chain, "log_") {
		if b.objects.logs.release(v.Chain) {
			if c := b.table.Chains[v.Chain]; c != nil {
				b.releaseDeny(c.Rules[len(c.Rules)-1].Verdict)
			}
			delete(b.objects.logReasons, v.Chain)
			b.dropChain(v.Chain)
		}
		return
	}
	if v.Kind != ruleset.Goto || !strings.HasPrefix(v.Chain, "deny_") {
		return
	}
	if b.objects.denies.release(v.Chain) {
		delete(b.objects.denyReasons, v.Chain)
		b.dropChain(v.Chain)
	}
}

// hasRange reports whether a class's port partition has a segment of more than one port. Only
// then is its map an interval map: the kernel keeps a concatenated interval map in pipapo
// lookup tables, whose insert costs about three times a hash map's (a class's segments are
// fixed by its key, so a class's map never changes kind).
func hasRange(segs []PortSeg) bool {
	for _, s := range segs {
		if s.First != s.Last {
			return true
		}
	}
	return false
}
