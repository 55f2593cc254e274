package nfttest

import (
	"fmt"
	"maps"
	"math/rand"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// IncrementalCluster is a generator of random clusters on nodes a and b, two namespaces, pods of
// both families with named ports and NetworkPolicy-shaped policies (some of more rules than the
// listed shape takes, some admin-tier denies), and the builder configuration to run it with.
// With shared, pods draw their addresses from a few, so that several pod objects, local and
// remote, running or not, hold one address at a time; every address of that pool leads to a
// workload interface of node a, and anti-spoofing is on.
func IncrementalCluster(seed int64, shared bool) (*ClusterGen, nft.Config) {
	rng := rand.New(rand.NewSource(seed))
	nss := []string{"x", "y"}
	labels := []string{"a", "b", "c"}
	gen := &ClusterGen{rng: rng, cluster: newCluster()}
	for _, ns := range nss {
		gen.namespaces[ns] = model.Namespace{Name: ns, Labels: map[string]string{"ns": ns}}
	}
	podN := 0
	// sharedAddrs draws the addresses of a pod from a pool of 4 IPv4 and 3 IPv6 ones
	sharedAddrs := func() []netip.Addr {
		return []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.Intn(4) + 1)}), netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.Intn(3) + 1)})}
	}
	gen.newPod = func() model.Endpoint {
		podN++
		node := []string{"a", "b"}[rng.Intn(2)]
		e := model.Endpoint{
			Key: model.EndpointKey{Namespace: nss[rng.Intn(2)], Name: fmt.Sprint("p", podN)}, Node: node,
			Labels:     model.LabelsOf(map[string]string{"pod": labels[rng.Intn(3)]}),
			Addrs:      []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(podN / 250), byte(podN%250 + 1)}), netip.AddrFrom16([16]byte{0xfd, 15: byte(podN)})},
			NamedPorts: []model.NamedPort{{Name: "web", Protocol: model.ProtocolTCP, Port: uint16(80 + rng.Intn(2))}},
		}
		if shared {
			e.Addrs, e.Running, e.Created = sharedAddrs(), rng.Intn(2) == 0, time.Unix(int64(rng.Intn(3)), 0)
		}
		return e
	}
	gen.relabel = func(e model.Endpoint) model.Endpoint {
		e.Labels = model.LabelsOf(map[string]string{"pod": labels[rng.Intn(3)]})
		if shared { // and starts, moves or takes other addresses now and then
			switch rng.Intn(4) {
			case 0:
				e.Running = !e.Running
			case 1:
				e.Node = []string{"a", "b"}[rng.Intn(2)]
			case 2:
				e.Addrs = sharedAddrs()
			}
		}
		return e
	}
	gen.newPolicy = incrementalPolicy(rng, nss, labels)
	for range 8 {
		e := gen.newPod()
		gen.pods[e.Key] = e
	}
	for i := range 4 {
		p := gen.newPolicy(i)
		gen.policies[p.Key] = p
	}
	cfg := nft.Config{}
	if seed%2 == 0 { // Log rules log
		cfg.DenyLog = &nft.DenyLog{Group: 9, Limit: nft.DefaultDenyLogLimit}
	}
	if shared { // every address of the pool leads to an interface of node a
		cfg.WorkloadPrefixes = []string{"veth"}
		for i := range 4 {
			gen.routes[netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 32)] = fmt.Sprint("veth", i)
		}
		for i := range 3 {
			gen.routes[netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 15: byte(i + 1)}), 128)] = fmt.Sprint("veth", i)
		}
	}
	return gen, cfg
}

// cluster is the state of a random cluster: what the graph is fed.
type cluster struct {
	namespaces map[string]model.Namespace
	tiers      map[string]model.Tier
	pods       map[model.EndpointKey]model.Endpoint
	policies   map[model.PolicyKey]model.Policy
	routes     map[netip.Prefix]string // a host route to a pod address → the interface it leaves through
}

func newCluster() cluster {
	return cluster{namespaces: map[string]model.Namespace{}, tiers: map[string]model.Tier{},
		pods: map[model.EndpointKey]model.Endpoint{}, policies: map[model.PolicyKey]model.Policy{}, routes: map[netip.Prefix]string{}}
}

// updates is the whole cluster as updates, in a fixed order, then in-sync.
func (c *cluster) updates() []model.Update {
	var us []model.Update
	for _, k := range slices.Sorted(maps.Keys(c.namespaces)) {
		us = append(us, model.NamespaceSet{Namespace: c.namespaces[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(c.tiers)) {
		us = append(us, model.TierSet{Tier: c.tiers[k]})
	}
	for _, k := range c.podKeys() {
		us = append(us, model.EndpointSet{Endpoint: c.pods[k]})
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.routes), netip.Prefix.Compare) {
		us = append(us, model.RouteSet{Dst: k, Interface: c.routes[k]})
	}
	for _, k := range c.policyKeys() {
		us = append(us, model.PolicySet{Policy: c.policies[k]})
	}
	return append(us, model.SyncStatusUpdate{Status: model.InSync})
}

// podKeys and policyKeys are sorted: map order would make failures unrepeatable.
func (c *cluster) podKeys() []model.EndpointKey {
	return slices.SortedFunc(maps.Keys(c.pods), func(a, b model.EndpointKey) int { return strings.Compare(a.String(), b.String()) })
}

func (c *cluster) policyKeys() []model.PolicyKey {
	return slices.SortedFunc(maps.Keys(c.policies), func(a, b model.PolicyKey) int { return strings.Compare(a.String(), b.String()) })
}

// ClusterGen draws a random cluster's changes: pods relabelled, added and deleted, policies
// written (newPolicy's argument picks one of six keys) and deleted, and whatever more draws.
type ClusterGen struct {
	rng testenv.Chooser
	cluster
	newPod    func() model.Endpoint
	relabel   func(model.Endpoint) model.Endpoint
	newPolicy func(i int) model.Policy
	// more are further kinds of change, each drawn as often as each of the six above; one
	// returns what it did and its updates, after changing the cluster to match.
	more []func() (string, []model.Update)
}

// incrementalPolicy draws IncrementalCluster's policies: NetworkPolicy-shaped, over the pod
// labels of namespaces nss, now and then allowing echo requests (ICMP type 8 or ICMPv6 128)
// instead of a port or only from a range of source ports, after a Log rule, with more rules than the listed shape takes or as an admin-tier deny.
func incrementalPolicy(rng *rand.Rand, nss, labels []string) func(i int) model.Policy {
	return func(i int) model.Policy {
		ns := nss[rng.Intn(2)]
		peer := model.Peer{Selector: fmt.Sprintf("pod == '%s'", labels[rng.Intn(3)])}
		if rng.Intn(3) == 0 {
			peer.NamespaceSelector = fmt.Sprintf("ns == '%s'", nss[rng.Intn(2)])
		}
		if rng.Intn(4) == 0 {
			peer = model.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/28")}, NotNets: []netip.Prefix{netip.MustParsePrefix("10.0.0.4/30")}}
		}
		ports := []model.Port{{First: 80, Last: 80}}
		if rng.Intn(3) == 0 {
			ports = []model.Port{{Name: "web"}}
		}
		r := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP}
		if rng.Intn(6) == 0 { // echo requests of one family (Calico's icmp type)
			r.Protocol, r.ICMP, ports = model.ProtocolICMP, &model.ICMPMatch{Type: 8}, nil
			if rng.Intn(2) == 0 {
				r.Protocol, r.ICMP = model.ProtocolICMPv6, &model.ICMPMatch{Type: 128}
			}
		}
		p := model.Policy{Key: NPKey(ns, fmt.Sprint("np", i)), Tier: model.TierNetworkPolicy, Namespace: ns,
			Selector: fmt.Sprintf("pod == '%s'", labels[rng.Intn(3)])}
		var sports []model.Port
		if rng.Intn(6) == 0 { // from a range of source ports
			sports = []model.Port{{First: 4000, Last: 4999}}
		}
		if rng.Intn(2) == 0 {
			peer.Ports = sports
			r.Source, r.Destination = peer, model.Peer{Ports: ports}
			p.ApplyIngress, p.IngressRules = true, []model.Rule{r}
		} else {
			peer.Ports = ports
			r.Source, r.Destination = model.Peer{Ports: sports}, peer
			p.ApplyEgress, p.EgressRules = true, []model.Rule{r}
		}
		if rng.Intn(5) == 0 {
			// more rules than a listed group may have: writing it over the same key moves its
			// groups between the listed and the map shape
			rules := &p.IngressRules
			if p.ApplyEgress {
				rules = &p.EgressRules
			}
			for j := range 9 {
				r := (*rules)[0]
				r.Destination.Ports = []model.Port{{First: uint16(1000 + j), Last: uint16(1000 + j)}}
				*rules = append(*rules, r)
			}
		}
		if rng.Intn(5) == 0 { // a Log rule before the others
			rules := &p.IngressRules
			if p.ApplyEgress {
				rules = &p.EgressRules
			}
			l := (*rules)[0]
			l.Action = model.ActionLog
			*rules = append([]model.Rule{l}, *rules...)
		}
		if rng.Intn(5) == 0 {
			p.Tier, p.Namespace, p.Selector = model.TierAdmin, "", "all()"
			r.Action = model.ActionDeny
			p.IngressRules, p.EgressRules = []model.Rule{r}, []model.Rule{r}
			p.ApplyIngress, p.ApplyEgress = true, true
		}
		return p
	}
}

// Target is what RunCluster applies to: a kernel.Applier, or a builder alone (Offline).
type Target interface {
	Apply(msgs []dataplane.Message) error
	Resync() (drift bool, err error)
	Render() string
}

// Offline is a builder as a Target: its applies always succeed and nothing drifts.
func Offline(b *nft.Builder) Target { return offline{b} }

type offline struct{ b *nft.Builder }

func (o offline) Apply(msgs []dataplane.Message) error { o.b.Apply(msgs); return nil }
func (o offline) Resync() (bool, error)                { return false, nil }
func (o offline) Render() string                       { return o.b.Render() }

// RunCluster feeds a graph of node "a" and dp the generator's cluster, then steps random
// changes, one flush and one apply each. Every apply succeeds; after every step the kernel holds
// the table as committed (Resync reads it back and finds no drift) and dp's table equals the one
// a fresh Builder of config cfg computes from the resulting cluster in one apply (but for the
// workload prefixes checked, onlyPrefixChecks).
func RunCluster(t *testing.T, gen *ClusterGen, steps int, dp Target, cfg nft.Config) {
	t.Helper()
	rng := gen.rng
	g := graph.New(graph.Config{NodeName: "a"})
	var lastMsgs []dataplane.Message
	step := func(desc string, us ...model.Update) {
		t.Helper()
		for _, u := range us {
			g.OnUpdate(u)
		}
		lastMsgs = g.Flush()
		if err := dp.Apply(slices.Clone(lastMsgs)); err != nil { // kept for the failure message
			t.Fatalf("%s: %v; messages: %+v", desc, err, lastMsgs)
		}
		if drift, err := dp.Resync(); err != nil || drift {
			t.Fatalf("%s: after an apply the kernel's table differs from the committed one: drift=%v err=%v; messages: %+v", desc, drift, err, lastMsgs)
		}
		fg := graph.New(graph.Config{NodeName: "a"})
		for _, u := range gen.updates() {
			fg.OnUpdate(u)
		}
		fresh := nft.NewBuilder(cfg)
		fresh.Apply(fg.Flush())
		if diff := lineDiff(fresh.Render(), dp.Render()); diff != "" && !onlyPrefixChecks(diff) {
			t.Fatalf("%s: the incremental table differs from a fresh one:\n%s\nmessages of the step: %+v", desc, diff, lastMsgs)
		}
	}
	step("the first apply", gen.updates()...)
	anyKey := func() model.EndpointKey {
		keys := gen.podKeys()
		return keys[rng.Intn(len(keys))]
	}
	for i := range steps {
		var desc string
		var us []model.Update
		switch op := rng.Intn(6 + len(gen.more)); {
		case op == 0 && len(gen.pods) > 0:
			k := anyKey()
			e := gen.relabel(gen.pods[k])
			gen.pods[k] = e
			desc, us = "relabel "+k.String(), []model.Update{model.EndpointSet{Endpoint: e}}
		case op == 1:
			e := gen.newPod()
			gen.pods[e.Key] = e
			desc, us = "add "+e.Key.String(), []model.Update{model.EndpointSet{Endpoint: e}}
		case op == 2 && len(gen.pods) > 0:
			k := anyKey()
			delete(gen.pods, k)
			desc, us = "delete "+k.String(), []model.Update{model.EndpointDeleted{Key: k}}
		case op == 3:
			p := gen.newPolicy(rng.Intn(6))
			gen.policies[p.Key] = p
			desc, us = "write "+p.Key.String(), []model.Update{model.PolicySet{Policy: p}}
		case op == 4 && len(gen.policies) > 0:
			keys := gen.policyKeys()
			k := keys[rng.Intn(len(keys))]
			delete(gen.policies, k)
			desc, us = "delete "+k.String(), []model.Update{model.PolicyDeleted{Key: k}}
		case op >= 6:
			desc, us = gen.more[op-6]()
		default: // several changes in one flush
			a, b := gen.newPod(), gen.newPod()
			gen.pods[a.Key], gen.pods[b.Key] = a, b
			desc, us = "add two pods", []model.Update{model.EndpointSet{Endpoint: a}, model.EndpointSet{Endpoint: b}}
		}
		step(fmt.Sprintf("step %d (%s)", i, desc), us...)
	}
}

// onlyPrefixChecks reports whether the lines of a lineDiff are rules of the incremental table
// alone that check a workload prefix (anti-spoofing, fail closed): a prefix, once a local pod
// was seen behind it, stays checked, while a fresh Builder checks it only if such a pod is
// there now.
func onlyPrefixChecks(diff string) bool {
	for l := range strings.Lines(diff) {
		if !strings.HasPrefix(l, "+ ") || !strings.Contains(l, "goto deny_spoofed") && !strings.Contains(l, "goto deny_unprogrammed") {
			return false
		}
	}
	return true
}

// lineDiff lists the lines only one of two texts has ("-" want only, "+" got only).
func lineDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(want, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(got, "\n") {
		count[l]--
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if count[l] > 0 {
			count[l]--
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if count[l] < 0 {
			count[l]++
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}

// WideCluster is a generator of small clusters whose every part is drawn from c: three
// namespaces; pods on nodes a (local) and b with addresses of one or both families, now and
// then another pod's; policies and changes as FuzzApply (internal/nft/kernel) lists them.
func WideCluster(c testenv.Chooser) *ClusterGen {
	pick := func(ss ...string) string { return ss[c.Intn(len(ss))] }
	nss := []string{"x", "y", "z"}
	gen := &ClusterGen{rng: c, cluster: newCluster()}
	nsLabels := func(ns string) model.Namespace {
		return model.Namespace{Name: ns, Labels: map[string]string{"ns": ns, "team": pick("red", "blue")}}
	}
	for _, ns := range nss {
		gen.namespaces[ns] = nsLabels(ns)
	}
	labels := func() model.Labels {
		m := map[string]string{"pod": pick("a", "b", "c")}
		if c.Intn(2) == 0 {
			m["role"] = pick("x", "y")
		}
		return model.LabelsOf(m)
	}
	podN := 0
	gen.newPod = func() model.Endpoint {
		podN++
		e := model.Endpoint{Key: model.EndpointKey{Namespace: pick(nss...), Name: fmt.Sprint("p", podN)},
			Node: pick("a", "b"), Labels: labels(), Running: c.Intn(4) > 0, Created: time.Unix(int64(c.Intn(3)), 0)}
		v4, v6 := netip.AddrFrom4([4]byte{10, 0, 0, byte(podN)}), netip.AddrFrom16([16]byte{0xfd, 15: byte(podN)})
		switch c.Intn(4) {
		case 0:
			e.Addrs = []netip.Addr{v4}
		case 1:
			e.Addrs = []netip.Addr{v6}
		default:
			e.Addrs = []netip.Addr{v4, v6}
		}
		if len(gen.pods) > 0 && c.Intn(8) == 0 { // another pod's address
			keys := gen.podKeys()
			o := gen.pods[keys[c.Intn(len(keys))]]
			e.Addrs = o.Addrs[:1+c.Intn(len(o.Addrs))]
		}
		for k := c.Intn(3); k > 0; k-- {
			e.NamedPorts = append(e.NamedPorts, model.NamedPort{Name: pick("web", "dns", "metrics"),
				Protocol: []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP}[c.Intn(3)],
				Port:     []uint16{80, 81, 53, 8080}[c.Intn(4)]})
		}
		return e
	}
	gen.relabel = func(e model.Endpoint) model.Endpoint {
		e.Labels = labels()
		switch c.Intn(4) { // and starts or stops, or moves, now and then
		case 0:
			e.Running = !e.Running
		case 1:
			e.Node = pick("a", "b")
		}
		return e
	}
	gen.newPolicy = func(i int) model.Policy { return widePolicy(c, nss, i) }
	gen.more = []func() (string, []model.Update){
		func() (string, []model.Update) { // a route to a pod address: its interface, for anti-spoofing
			if len(gen.pods) == 0 {
				return "no pod to route to", nil
			}
			keys := gen.podKeys()
			e := gen.pods[keys[c.Intn(len(keys))]]
			a := e.Addrs[c.Intn(len(e.Addrs))]
			dst := netip.PrefixFrom(a, a.BitLen())
			if c.Intn(3) == 0 {
				delete(gen.routes, dst)
				return "no route to " + a.String(), []model.Update{model.RouteDeleted{Dst: dst}}
			}
			gen.routes[dst] = pick("veth0", "veth1", "veth2", "eth0")
			return "route " + a.String() + " via " + gen.routes[dst], []model.Update{model.RouteSet{Dst: dst, Interface: gen.routes[dst]}}
		},
		func() (string, []model.Update) {
			ns := nsLabels(pick(nss...))
			gen.namespaces[ns.Name] = ns
			return "relabel namespace " + ns.Name, []model.Update{model.NamespaceSet{Namespace: ns}}
		},
		func() (string, []model.Update) { // a tier of its own, which cluster policies may name
			if c.Intn(3) == 0 {
				delete(gen.tiers, "own")
				return "delete tier own", []model.Update{model.TierDeleted{Name: "own"}}
			}
			tier := model.Tier{Name: "own", Order: []float64{50, 500_000, 5_000_000}[c.Intn(3)],
				DefaultAction: []model.Action{model.ActionPass, model.ActionDeny, model.ActionAllow}[c.Intn(3)]}
			gen.tiers[tier.Name] = tier
			return fmt.Sprintf("tier own %+v", tier), []model.Update{model.TierSet{Tier: tier}}
		},
	}
	for k := c.Intn(6); k > 0; k-- {
		e := gen.newPod()
		gen.pods[e.Key] = e
	}
	for k := c.Intn(4); k > 0; k-- {
		p := gen.newPolicy(c.Intn(6))
		gen.policies[p.Key] = p
	}
	return gen
}

// widePolicy is policy i of six: a NetworkPolicy (a namespace's, in the NetworkPolicy tier,
// rules that allow) or a cluster policy (in the admin, baseline or own tier, any action), over
// rules drawn from c; now and then more rules than a listed group may have.
func widePolicy(c testenv.Chooser, nss []string, i int) model.Policy {
	d := policyDraw{c}
	p := model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: d.pick(nss...), Name: fmt.Sprint("p", i)},
		Tier: model.TierNetworkPolicy, Selector: d.selector()}
	p.Namespace = p.Key.Namespace
	cluster := c.Intn(3) == 0
	if cluster {
		p.Key = model.PolicyKey{Kind: "ClusterPolicy", Name: fmt.Sprint("c", i)}
		p.Namespace, p.Tier, p.Order = "", d.pick(model.TierAdmin, model.TierBaseline, "own"), float64(c.Intn(3))
	}
	switch c.Intn(3) {
	case 0:
		p.ApplyIngress = true
	case 1:
		p.ApplyEgress = true
	default:
		p.ApplyIngress, p.ApplyEgress = true, true
	}
	if p.ApplyIngress {
		p.IngressRules = d.rules(model.Ingress, cluster)
	}
	if p.ApplyEgress {
		p.EgressRules = d.rules(model.Egress, cluster)
	}
	return p
}

// policyDraw draws the parts of a widePolicy from c.
type policyDraw struct{ c testenv.Chooser }

func (d policyDraw) pick(ss ...string) string { return ss[d.c.Intn(len(ss))] }

func (d policyDraw) selector() string {
	return d.pick("all()", "pod == 'a'", "pod in {'a', 'b'}", "has(role)", "!has(role)", "pod != 'c'",
		"pod == 'a' && role == 'x'", "pod == 'none'", "((")
}

func (d policyDraw) prefix() netip.Prefix {
	c := d.c
	if c.Intn(3) == 0 { // around the pods' addresses, at any length
		a := netip.AddrFrom4([4]byte{10, 0, 0, byte(c.Intn(16))})
		if c.Intn(2) == 0 {
			a = netip.AddrFrom16([16]byte{0xfd, 15: byte(c.Intn(16))})
		}
		p, _ := a.Prefix(c.Intn(a.BitLen() + 1))
		return p
	}
	return netip.MustParsePrefix(d.pick("10.0.0.0/28", "10.0.0.4/30", "10.0.0.0/8", "0.0.0.0/0", "10.0.0.5/32",
		"fd00::/120", "fd00::4/126", "::/0", "fd00::5/128"))
}

func (d policyDraw) prefixes(n int) []netip.Prefix {
	var out []netip.Prefix
	for ; n > 0; n-- {
		out = append(out, d.prefix())
	}
	return out
}

func (d policyDraw) ports() []model.Port {
	c := d.c
	var out []model.Port
	for k := c.Intn(3); k > 0; k-- {
		if c.Intn(3) == 0 {
			out = append(out, model.Port{Name: d.pick("web", "dns", "metrics", "none")})
			continue
		}
		out = append(out, []model.Port{{First: 80, Last: 80}, {First: 53, Last: 53}, {First: 8080, Last: 8080},
			{First: 1000, Last: 2000}, {First: 0, Last: 65535}, {First: 65535, Last: 65535}}[c.Intn(6)])
	}
	return out
}

// rule draws one rule of direction dir; a cluster policy's rules have every action and match.
func (d policyDraw) rule(dir model.Direction, cluster bool) model.Rule {
	c := d.c
	protos := []model.Protocol{0, model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP, model.ProtocolICMP, model.ProtocolICMPv6, 47}
	r := model.Rule{Action: model.ActionAllow, Protocol: protos[c.Intn(len(protos))]}
	var peer model.Peer
	switch c.Intn(5) {
	case 1:
		peer.Selector = d.selector()
	case 2:
		peer.NamespaceSelector = d.pick("all()", "ns == 'x'", "team == 'red'", "has(team)")
		if c.Intn(2) == 0 {
			peer.Selector = d.selector()
		}
	case 3:
		peer.Nets, peer.NotNets = d.prefixes(1+c.Intn(2)), d.prefixes(c.Intn(3))
	case 4:
		peer.Selector, peer.Nets = d.selector(), d.prefixes(1)
	}
	// the packet's destination port, and source port; ingress: the peer is the source
	dst, src := model.Peer{Ports: d.ports()}, model.Peer{}
	if cluster {
		r.Action = []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass, model.ActionLog}[c.Intn(4)]
		if c.Intn(4) == 0 {
			r.NotProtocol = protos[c.Intn(len(protos))]
		}
		r.IPVersion = []uint8{0, 0, 4, 6}[c.Intn(4)]
		if c.Intn(4) == 0 {
			dst.NotPorts = d.ports()
		}
		if c.Intn(6) == 0 { // ICMP type and code, mostly of a family's ICMP protocol, without ports
			typ := []uint8{0, 8, 128, 129}[c.Intn(4)]
			m := &model.ICMPMatch{Type: typ}
			if c.Intn(2) == 0 {
				code := uint8(c.Intn(2))
				m.Code = &code
			}
			if c.Intn(3) == 0 {
				r.NotICMP = m
			} else {
				r.ICMP = m
			}
			r.Protocol = []model.Protocol{model.ProtocolICMP, model.ProtocolICMPv6, 0, model.ProtocolTCP}[c.Intn(4)]
			if c.Intn(4) > 0 {
				dst.Ports, dst.NotPorts = nil, nil
			}
		}
		if c.Intn(8) == 0 {
			src.Ports = d.ports()
		}
	}
	if dir == model.Ingress {
		peer.Ports = src.Ports
		r.Source, r.Destination = peer, dst
	} else {
		peer.Ports, peer.NotPorts = dst.Ports, dst.NotPorts
		r.Source, r.Destination = src, peer
	}
	return r
}

func (d policyDraw) rules(dir model.Direction, cluster bool) []model.Rule {
	n := d.c.Intn(4)
	if d.c.Intn(4) == 0 {
		n += 8
	}
	var out []model.Rule
	for ; n > 0; n-- {
		out = append(out, d.rule(dir, cluster))
	}
	return out
}
