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
	pods := map[model.EndpointKey]model.Endpoint{}
	policies := map[model.PolicyKey]model.Policy{}
	base := []model.Update{}
	for _, ns := range nss {
		base = append(base, model.NamespaceSet{Namespace: model.Namespace{Name: ns, Labels: map[string]string{"ns": ns}}})
	}
	podN := 0
	// sharedAddrs draws the addresses of a pod from a pool of 4 IPv4 and 3 IPv6 ones
	sharedAddrs := func() []netip.Addr {
		return []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.Intn(4) + 1)}), netip.AddrFrom16([16]byte{0xfd, 15: byte(rng.Intn(3) + 1)})}
	}
	newPod := func() model.Endpoint {
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
	newPolicy := func(i int) model.Policy {
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
		e := newPod()
		pods[e.Key] = e
	}
	for i := range 4 {
		p := newPolicy(i)
		policies[p.Key] = p
	}
	cluster := func() []model.Update {
		us := append([]model.Update(nil), base...)
		for _, e := range pods {
			us = append(us, model.EndpointSet{Endpoint: e})
		}
		for _, p := range policies {
			us = append(us, model.PolicySet{Policy: p})
		}
		if shared { // every address of the pool leads to an interface of node a
			for i := range 4 {
				a := netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})
				us = append(us, model.RouteSet{Dst: netip.PrefixFrom(a, 32), Interface: fmt.Sprint("veth", i)})
			}
			for i := range 3 {
				a := netip.AddrFrom16([16]byte{0xfd, 15: byte(i + 1)})
				us = append(us, model.RouteSet{Dst: netip.PrefixFrom(a, 128), Interface: fmt.Sprint("veth", i)})
			}
		}
		return append(us, model.SyncStatusUpdate{Status: model.InSync})
	}
	cfg := nft.Config{}
	if shared {
		cfg.WorkloadPrefixes = []string{"veth"}
	}
	g := graph.New(graph.Config{NodeName: "a"})
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
	var lastMsgs []dataplane.Message
	step := func(us ...model.Update) {
		t.Helper()
		for _, u := range us {
			g.OnUpdate(u)
		}
		lastMsgs = g.Flush()
		if err := dp.Apply(slices.Clone(lastMsgs)); err != nil { // kept for the failure message
			t.Fatal(err)
		}
		if !kernel {
			return
		}
		if drift, err := dp.Resync(); err != nil || drift {
			t.Fatalf("after an apply the kernel's table differs from the committed one: drift=%v err=%v; messages: %+v", drift, err, lastMsgs)
		}
	}
	step(cluster()...)
	anyKey := func() model.EndpointKey { // deterministic: map order would make failures unrepeatable
		keys := slices.SortedFunc(maps.Keys(pods), func(a, b model.EndpointKey) int { return strings.Compare(a.String(), b.String()) })
		return keys[rng.Intn(len(keys))]
	}
	for i := range 300 {
		var desc string
		switch op := rng.Intn(6); {
		case op == 0 && len(pods) > 0: // relabel
			k := anyKey()
			e := pods[k]
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
			pods[k] = e
			desc = "relabel " + k.String()
			step(model.EndpointSet{Endpoint: e})
		case op == 1:
			e := newPod()
			pods[e.Key] = e
			desc = "add " + e.Key.String()
			step(model.EndpointSet{Endpoint: e})
		case op == 2 && len(pods) > 0:
			k := anyKey()
			delete(pods, k)
			desc = "delete " + k.String()
			step(model.EndpointDeleted{Key: k})
		case op == 3:
			p := newPolicy(rng.Intn(6))
			policies[p.Key] = p
			desc = "write " + p.Key.String()
			step(model.PolicySet{Policy: p})
		case op == 4 && len(policies) > 0:
			keys := slices.SortedFunc(maps.Keys(policies), func(a, b model.PolicyKey) int { return strings.Compare(a.String(), b.String()) })
			k := keys[rng.Intn(len(keys))]
			delete(policies, k)
			desc = "delete " + k.String()
			step(model.PolicyDeleted{Key: k})
		default: // several changes in one flush
			a, b := newPod(), newPod()
			pods[a.Key], pods[b.Key] = a, b
			desc = "add two pods"
			step(model.EndpointSet{Endpoint: a}, model.EndpointSet{Endpoint: b})
		}
		fg := graph.New(graph.Config{NodeName: "a"})
		for _, u := range cluster() {
			fg.OnUpdate(u)
		}
		fresh := nft.NewOffline(cfg)
		if err := fresh.Apply(fg.Flush()); err != nil {
			t.Fatal(err)
		}
		if got, want := dp.Render(), fresh.Render(); got != want {
			t.Fatalf("step %d (%s): the incremental table differs from a fresh one:\n%s\nmessages of the step: %+v", i, desc, lineDiff(want, got), lastMsgs)
		}
	}
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
