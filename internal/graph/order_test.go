package graph_test

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// A scenario is, per object key, the sequence of updates that object goes through; the last one
// is its final state. Any interleaving that keeps each key's own order must reach the same final
// dataplane state.
type scenario struct {
	keys [][]model.Update
}

var (
	selPool = []string{"", "all()", "app == 'a'", "app in {'a', 'b'}", "has(role)", "role != 'x'",
		"!has(app)", "app == 'a' && role == 'y'", "app == 'c' || role == 'x'", "bad (((",
		"projectcalico.org/namespace == 'ns1'", "projectcalico.org/namespace == 'ns0' && app == 'a'",
		"projectcalico.org/serviceaccount == 'sa0'", "projectcalico.org/orchestrator == 'k8s' && has(role)"}
	nsSelPool = []string{"", "", "all()", "team == 'a'", "has(team)", "team != 'b'", "projectcalico.org/name == 'ns2'"}
	saSelPool = []string{"all()", "tier == 'a'", "projectcalico.org/name == 'sa1'"}
	// netPool are the nets of network sets: some hold pods' addresses, some none.
	netPool = []string{"10.0.0.0/30", "10.0.0.8/29", "10.0.0.5/32", "192.0.2.0/24", "fd00::/124", "10.0.0.0/24"}
)

func genScenario(r *rand.Rand) scenario {
	var sc scenario
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	labels := func() map[string]string {
		m := map[string]string{}
		if r.IntN(4) > 0 {
			m["app"] = pick([]string{"a", "b", "c"})
		}
		if r.IntN(2) == 0 {
			m["role"] = pick([]string{"x", "y"})
		}
		return m
	}
	nsNames := []string{"ns0", "ns1", "ns2"}
	for _, n := range nsNames {
		for _, sa := range []string{"sa0", "sa1"} {
			var seq []model.Update
			for v := r.IntN(3); v > 0; v-- {
				if r.IntN(4) == 0 {
					seq = append(seq, model.ServiceAccountDeleted{Namespace: n, Name: sa})
				} else {
					seq = append(seq, model.ServiceAccountSet{ServiceAccount: model.ServiceAccount{Namespace: n, Name: sa, Labels: lbl("tier", pick([]string{"a", "b"}))}})
				}
			}
			if len(seq) > 0 {
				sc.keys = append(sc.keys, seq)
			}
		}
	}
	for i, n := range []string{"", "", "ns0", "ns1"} {
		key := model.NetworkSetKey{Namespace: n, Name: fmt.Sprintf("net%d", i)}
		var seq []model.Update
		for v := r.IntN(3) + 1; v > 0; v-- {
			if r.IntN(5) == 0 {
				seq = append(seq, model.NetworkSetDeleted{Key: key})
				continue
			}
			var nets []netip.Prefix
			for k := r.IntN(3) + 1; k > 0; k-- {
				nets = append(nets, netip.MustParsePrefix(pick(netPool)))
			}
			seq = append(seq, model.NetworkSetSet{NetworkSet: model.NetworkSet{Key: key, Labels: model.LabelsOf(labels()), Nets: nets}})
		}
		if len(seq) > 0 {
			sc.keys = append(sc.keys, seq)
		}
	}
	for _, n := range nsNames {
		var seq []model.Update
		for v := r.IntN(3) + 1; v > 0; v-- {
			if r.IntN(5) == 0 {
				seq = append(seq, model.NamespaceDeleted{Name: n})
			} else {
				seq = append(seq, model.NamespaceSet{Namespace: model.Namespace{Name: n, Labels: lbl("team", pick([]string{"a", "b"}))}})
			}
		}
		sc.keys = append(sc.keys, seq)
	}
	for i := range 10 {
		key := model.EndpointKey{Namespace: pick(nsNames), Name: fmt.Sprintf("p%d", i)}
		var seq []model.Update
		for v := r.IntN(4) + 1; v > 0; v-- {
			if r.IntN(5) == 0 {
				seq = append(seq, model.EndpointDeleted{Key: key})
				continue
			}
			nodeName := node
			if r.IntN(2) == 0 {
				nodeName = "node-b"
			}
			// Addresses collide now and then, as when a pod's IP is reused before its delete.
			addrs := []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(r.IntN(12))})}
			if r.IntN(3) == 0 {
				addrs = append(addrs, netip.MustParseAddr(fmt.Sprintf("fd00::%d", r.IntN(12)+1)))
			}
			var ports []model.NamedPort
			if r.IntN(2) == 0 {
				ports = append(ports, model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: uint16(8000 + r.IntN(3))})
			}
			if r.IntN(4) == 0 {
				ports = append(ports, model.NamedPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53})
			}
			// Running and Created rank the endpoints that share an address (owner.go).
			seq = append(seq, model.EndpointSet{Endpoint: model.Endpoint{Key: key, Node: nodeName, Labels: model.LabelsOf(labels()),
				Addrs: addrs, NamedPorts: ports, Running: r.IntN(2) == 0, Created: time.Unix(int64(r.IntN(3)), 0),
				ServiceAccount: pick([]string{"", "sa0", "sa1"})}})
		}
		sc.keys = append(sc.keys, seq)
	}
	peer := func() model.Peer {
		var p model.Peer
		switch r.IntN(8) {
		case 0:
			p.Selector = pick(selPool)
		case 1:
			p.Selector, p.NamespaceSelector = pick(selPool), pick(nsSelPool)
		case 2:
			p.Nets = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}
			if r.IntN(2) == 0 {
				p.NotNets = []netip.Prefix{netip.MustParsePrefix("10.0.0.4/30")}
			}
		case 3, 6: // Calico's: network sets, global(), notSelector
			p.Selector, p.NetworkSets = pick(selPool), true
			switch r.IntN(3) {
			case 0:
				p.NamespaceSelector = pick(nsSelPool)
			case 1:
				p.Global = true
			}
			if r.IntN(3) == 0 {
				p.Nets = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/29")}
			}
		case 4:
			p.NotSelector, p.NetworkSets = pick(selPool), r.IntN(2) == 0
			if r.IntN(2) == 0 {
				p.Selector = pick(selPool)
			}
		case 5:
			p.ServiceAccountSelector, p.NamespaceSelector = pick(saSelPool), pick(nsSelPool)
		}
		return p
	}
	rules := func() []model.Rule {
		var rs []model.Rule
		for n := r.IntN(3); n > 0; n-- {
			rule := model.Rule{Action: []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass, model.ActionLog}[r.IntN(4)],
				Protocol: []model.Protocol{model.ProtocolAny, model.ProtocolTCP, model.ProtocolUDP}[r.IntN(3)],
				Source:   peer(), Destination: peer()}
			if rule.Protocol != model.ProtocolAny {
				switch r.IntN(3) {
				case 0:
					rule.Destination.Ports = []model.Port{{First: 80, Last: 80}, {First: 8000, Last: 8001}}
				case 1:
					rule.Destination.Ports = []model.Port{{Name: pick([]string{"http", "dns"})}}
				}
			}
			rs = append(rs, rule)
		}
		return rs
	}
	for i := range 6 {
		var key model.PolicyKey
		ns := ""
		tier := model.TierNetworkPolicy
		if i < 3 {
			ns = nsNames[i]
			key = model.PolicyKey{Kind: "NetworkPolicy", Namespace: ns, Name: fmt.Sprintf("np%d", i)}
		} else {
			key = model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: fmt.Sprintf("cnp%d", i)}
			tier = []string{model.TierAdmin, model.TierBaseline, "custom"}[r.IntN(3)]
		}
		var seq []model.Update
		for v := r.IntN(3) + 1; v > 0; v-- {
			if r.IntN(6) == 0 {
				seq = append(seq, model.PolicyDeleted{Key: key})
				continue
			}
			pol := model.Policy{Key: key, Tier: tier, Order: float64(r.IntN(3)),
				Namespace: ns, Selector: pick(selPool), ApplyIngress: r.IntN(3) > 0, ApplyEgress: r.IntN(2) == 0,
				IngressRules: rules(), EgressRules: rules()}
			if ns == "" && r.IntN(2) == 0 { // a ClusterNetworkPolicy subject with a namespace selector
				pol.NamespaceSelector = pick(nsSelPool)
			}
			if r.IntN(4) == 0 { // a Calico policy's serviceAccountSelector
				pol.ServiceAccountSelector = pick(saSelPool)
			}
			seq = append(seq, model.PolicySet{Policy: pol})
		}
		sc.keys = append(sc.keys, seq)
	}
	var tierSeq []model.Update
	for v := r.IntN(3); v > 0; v-- {
		if r.IntN(3) == 0 {
			tierSeq = append(tierSeq, model.TierDeleted{Name: "custom"})
		} else {
			tierSeq = append(tierSeq, model.TierSet{Tier: model.Tier{Name: "custom", Order: float64(r.IntN(3) * 500), DefaultAction: model.ActionDeny}})
		}
	}
	if len(tierSeq) > 0 {
		sc.keys = append(sc.keys, tierSeq)
	}
	for i := range 4 {
		dst := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i * 2)}), 32)
		var seq []model.Update
		for v := r.IntN(3); v > 0; v-- {
			if r.IntN(3) == 0 {
				seq = append(seq, model.RouteDeleted{Dst: dst})
			} else {
				seq = append(seq, model.RouteSet{Dst: dst, Interface: fmt.Sprintf("cali%d", r.IntN(3))})
			}
		}
		if len(seq) > 0 {
			sc.keys = append(sc.keys, seq)
		}
	}
	return sc
}

// interleave merges the per-key sequences in a random order that keeps each key's own order.
func (sc scenario) interleave(r *rand.Rand) []model.Update {
	var out []model.Update
	for k, v := range sc.interleaveKeys(r) {
		out = append(out, sc.keys[k][v])
	}
	return out
}

// interleaveKeys is interleave as (key, version) pairs: the key of each update in turn and the
// update's index in the key's sequence.
func (sc scenario) interleaveKeys(r *rand.Rand) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		pos := make([]int, len(sc.keys))
		var live []int
		for i := range sc.keys {
			live = append(live, i)
		}
		for len(live) > 0 {
			j := r.IntN(len(live))
			k := live[j]
			if !yield(k, pos[k]) {
				return
			}
			pos[k]++
			if pos[k] == len(sc.keys[k]) {
				live = append(live[:j], live[j+1:]...)
			}
		}
	}
}

func (sc scenario) original() []model.Update {
	// Round-robin: every key's first version, then every key's second, …
	var out []model.Update
	for v := 0; ; v++ {
		n := 0
		for _, seq := range sc.keys {
			if v < len(seq) {
				out = append(out, seq[v])
				n++
			}
		}
		if n == 0 {
			return out
		}
	}
}

func (sc scenario) reversed() []model.Update {
	var out []model.Update
	for i := len(sc.keys) - 1; i >= 0; i-- {
		out = append(out, sc.keys[i]...)
	}
	return out
}

func (sc scenario) squashed() []model.Update {
	var out []model.Update
	for _, seq := range sc.keys {
		out = append(out, seq[len(seq)-1])
	}
	return out
}

// replay feeds ups, flushing every `every` updates (0: only at the end); in-sync is reported
// after `syncAt` updates.
func replay(t *testing.T, ups []model.Update, every, syncAt int) *graphtest.State {
	t.Helper()
	g := graph.New(graph.Config{NodeName: node})
	st := graphtest.NewState()
	flush := func() {
		if err := st.ApplyAll(g.Flush()); err != nil {
			t.Fatalf("%v\nstate:\n%s", err, st.Dump())
		}
	}
	for i, u := range ups {
		if i == syncAt {
			g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
		}
		g.OnUpdate(u)
		if every > 0 && (i+1)%every == 0 {
			flush()
		}
	}
	if syncAt >= len(ups) {
		g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
	}
	flush()
	if extra := g.Flush(); len(extra) != 0 {
		t.Fatalf("a flush without changes emitted %d messages, first %#v", len(extra), extra[0])
	}
	return st
}

// picksNetSets reports whether a rule of st matches nets other than the generator's peers'
// own (10.0.0.0/29): the nets of network sets.
func picksNetSets(st *graphtest.State) bool {
	own := netip.MustParsePrefix("10.0.0.0/29")
	for _, p := range st.Policies {
		for _, rs := range [][]dataplane.Rule{p.Ingress, p.Egress} {
			for _, r := range rs {
				for _, m := range []dataplane.Match{r.Src, r.Dst} {
					if len(m.Nets) > 1 || (len(m.Nets) == 1 && m.Nets[0] != own) {
						return true
					}
				}
			}
		}
	}
	return false
}

func TestOrderIndependence(t *testing.T) {
	nonEmpty, withNetSets := 0, 0
	for seed := range 60 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		sc := genScenario(r)
		ref := replay(t, sc.squashed(), 0, 1<<30)
		want := ref.Dump()
		nonEmpty += min(len(ref.Policies), 1)
		if picksNetSets(ref) {
			withNetSets++
		}
		orders := []struct {
			name          string
			ups           []model.Update
			every, syncAt int
		}{
			{"original", sc.original(), 0, 1 << 30},
			{"original-sync-midway", sc.original(), 3, len(sc.original()) / 2},
			{"reversed", sc.reversed(), 0, 1 << 30},
			{"shuffled", sc.interleave(r), 0, 1 << 30},
			{"shuffled-split", sc.interleave(r), 2, 0},
			{"one-per-flush", sc.original(), 1, 0},
			{"squashed-one-per-flush", sc.squashed(), 1, 0},
		}
		for _, o := range orders {
			got := replay(t, o.ups, o.every, o.syncAt).Dump()
			if got != want {
				t.Fatalf("seed %d order %s: final state differs\n--- got\n%s--- want (squashed)\n%s", seed, o.name, got, want)
			}
		}
	}
	if nonEmpty < 30 {
		t.Fatalf("only %d of 60 scenarios end with an active policy: the generator is too weak", nonEmpty)
	}
	if withNetSets < 10 {
		t.Fatalf("only %d of 60 scenarios end with a rule matching network sets' nets: the generator is too weak", withNetSets)
	}
}

// TestEveryStepFromScratch: flushed after every update, the dataplane state is at each step
// the one a fresh graph builds from the objects as they then are, so no delta drifts from a
// recomputation — in particular for endpoints sharing addresses, which genScenario's
// addresses and named ports often do.
func TestEveryStepFromScratch(t *testing.T) {
	for seed := range 40 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		sc := genScenario(r)
		g := graph.New(graph.Config{NodeName: node})
		g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
		st := graphtest.NewState()
		current := make([]model.Update, len(sc.keys)) // each key's latest update
		step := 0
		for k, v := range sc.interleaveKeys(r) {
			current[k] = sc.keys[k][v]
			g.OnUpdate(current[k])
			if err := st.ApplyAll(g.Flush()); err != nil {
				t.Fatalf("seed %d step %d (%#v): %v\nstate:\n%s", seed, step, current[k], err, st.Dump())
			}
			var objs []model.Update
			for _, u := range current {
				if u != nil {
					objs = append(objs, u)
				}
			}
			if got, want := st.Dump(), replay(t, objs, 0, 1<<30).Dump(); got != want {
				t.Fatalf("seed %d step %d (%#v): state differs from a fresh graph's\n--- got\n%s--- want\n%s", seed, step, current[k], got, want)
			}
			step++
		}
	}
}
