package nft_test

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

// TestIncrementalMatchesFresh: a random sequence of cluster changes (relabels, pods coming and
// going, policies written and deleted — some with more rules than the listed shape takes)
// applied one flush at a time gives, after every step, the same table as a fresh dataplane fed
// the resulting cluster in one apply — so peer-by-peer recompiles, group moves, shape changes
// and the reference counts of chains and shared sets never drift from a full compile.
func TestIncrementalMatchesFresh(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalMatchesFresh(t, seed, false, false) })
	}
}

// TestIncrementalInKernel: the same sequences committed to a real kernel, one transaction per
// step; after every step the kernel holds the table as committed and nothing drifted (Resync
// reads it back) — so every in-place change of a set reached its commit.
func TestIncrementalInKernel(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalMatchesFresh(t, seed, true, false) })
	}
}

// TestIncrementalSharedAddresses: the same with pods drawn from a few addresses, so that
// several pod objects, local and remote, running or not, hold one address at a time and their
// owner changes as they come, go, move, start and are relabelled — with anti-spoofing on. The
// table matches a fresh one after every step, and in the kernel every commit succeeds and
// leaves no drift.
func TestIncrementalSharedAddresses(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { incrementalMatchesFresh(t, seed, seed <= 2, true) })
	}
}

func incrementalMatchesFresh(t *testing.T, seed int64, kernel, shared bool) {
	rng := rand.New(rand.NewSource(seed))
	nss := []string{"x", "y"}
	labels := []string{"a", "b", "c"}
	gen := &clusterGen{rng: rng, cluster: newCluster()}
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
	gen.newPolicy = func(i int) model.Policy {
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
		p := model.Policy{Key: npKey(ns, fmt.Sprint("np", i)), Tier: model.TierNetworkPolicy, Namespace: ns,
			Selector: fmt.Sprintf("pod == '%s'", labels[rng.Intn(3)])}
		if rng.Intn(2) == 0 {
			r.Source, r.Destination = peer, model.Peer{Ports: ports}
			p.ApplyIngress, p.IngressRules = true, []model.Rule{r}
		} else {
			peer.Ports = ports
			r.Destination = peer
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
		if rng.Intn(5) == 0 {
			p.Tier, p.Namespace, p.Selector = model.TierAdmin, "", "all()"
			r.Action = model.ActionDeny
			p.IngressRules, p.EgressRules = []model.Rule{r}, []model.Rule{r}
			p.ApplyIngress, p.ApplyEgress = true, true
		}
		return p
	}
	for range 8 {
		e := gen.newPod()
		gen.pods[e.Key] = e
	}
	for i := range 4 {
		p := gen.newPolicy(i)
		gen.policies[p.Key] = p
	}
	cfg := nft.Config{}
	if shared { // every address of the pool leads to an interface of node a
		cfg.WorkloadPrefixes = []string{"veth"}
		for i := range 4 {
			gen.routes[netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 32)] = fmt.Sprint("veth", i)
		}
		for i := range 3 {
			gen.routes[netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 15: byte(i + 1)}), 128)] = fmt.Sprint("veth", i)
		}
	}
	dp := nft.NewOffline(cfg)
	if kernel {
		_, fd := bareNetns(t)
		kcfg := cfg
		kcfg.NetNSFD = fd
		var err error
		if dp, err = nft.New(kcfg); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dp.Close() })
	}
	runCluster(t, gen, 300, dp, kernel, cfg)
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

// clusterGen draws a random cluster's changes: pods relabelled, added and deleted, policies
// written (newPolicy's argument picks one of six keys) and deleted, and whatever more draws.
type clusterGen struct {
	rng testenv.Chooser
	cluster
	newPod    func() model.Endpoint
	relabel   func(model.Endpoint) model.Endpoint
	newPolicy func(i int) model.Policy
	// more are further kinds of change, each drawn as often as each of the six above; one
	// returns what it did and its updates, after changing the cluster to match.
	more []func() (string, []model.Update)
}

// runCluster feeds a graph of node "a" and dp the generator's cluster, then steps random
// changes, one flush and one apply each. Every apply succeeds; after every step dp's table
// equals the one a fresh Dataplane of config cfg computes from the resulting cluster in one
// apply (but for the workload prefixes checked, onlyPrefixChecks), and, on a kernel, the
// kernel holds the table as committed (Resync reads it back and finds no drift).
func runCluster(t *testing.T, gen *clusterGen, steps int, dp *nft.Dataplane, kernel bool, cfg nft.Config) {
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
		if kernel {
			if drift, err := dp.Resync(); err != nil || drift {
				t.Fatalf("%s: after an apply the kernel's table differs from the committed one: drift=%v err=%v; messages: %+v", desc, drift, err, lastMsgs)
			}
		}
		fg := graph.New(graph.Config{NodeName: "a"})
		for _, u := range gen.updates() {
			fg.OnUpdate(u)
		}
		fresh := nft.NewOffline(cfg)
		if err := fresh.Apply(fg.Flush()); err != nil {
			t.Fatal(err)
		}
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
// was seen behind it, stays checked, while a fresh Dataplane checks it only if such a pod is
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
