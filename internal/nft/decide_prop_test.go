package nft

import (
	"fmt"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestCompileMatchesModel: for random policies, sets, CIDRs (overlapping, with except), port
// ranges, named ports and tiers, the compiled structure gives every probed packet exactly the
// model's outcome (verdict and reason) — the map shape always, the listed shape (list.go)
// whenever the plan has it (every third iteration draws only allow rules for it).
func TestCompileMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	pool := []string{"10.0.0.1", "10.0.0.2", "10.0.1.1", "10.1.0.1", "10.255.0.1", "192.168.1.1", "10.0.0.10"}
	prefixes := []string{"10.0.0.0/8", "10.0.0.0/16", "10.0.0.0/24", "10.0.0.2/32", "10.1.0.0/16", "192.168.0.0/16", "0.0.0.0/0"}
	protos := []model.Protocol{0, model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP, model.ProtocolICMP}
	actions := []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass, model.ActionLog}
	local := netip.MustParseAddr("10.0.0.10")
	pick := func(n int) []netip.Prefix {
		var out []netip.Prefix
		for i := 0; i < n; i++ {
			out = append(out, netip.MustParsePrefix(prefixes[rng.Intn(len(prefixes))]))
		}
		return out
	}
	ports := func() []model.Port {
		var out []model.Port
		for i := rng.Intn(3); i > 0; i-- {
			f := uint16(rng.Intn(6) * 20)
			out = append(out, model.Port{First: f, Last: f + uint16(rng.Intn(30))})
		}
		return out
	}
	listed := 0
	for iter := 0; iter < 300; iter++ {
		allowOnly := iter%3 == 0
		s := NewState()
		if iter%2 == 0 {
			s.refIndexMin = 0 // every other plan indexes its peers by set
		}
		for i := 0; i < 3; i++ {
			var ms []dataplane.Member
			for _, a := range pool {
				if rng.Intn(2) == 0 {
					ms = append(ms, dataplane.Member{Addr: netip.MustParseAddr(a)})
				}
			}
			s.Apply(dataplane.SetReplaced{ID: dataplane.SetID(fmt.Sprint("s", i)), Members: ms})
		}
		var np []dataplane.Member
		for _, a := range pool {
			if rng.Intn(2) == 0 {
				np = append(np, dataplane.Member{Addr: netip.MustParseAddr(a), Protocol: model.ProtocolTCP, Port: uint16(rng.Intn(120))})
			}
		}
		s.Apply(dataplane.SetReplaced{ID: "np", Kind: dataplane.SetNamedPorts, Members: np})
		var tiers []dataplane.TierPolicies
		for ti, tn := range []string{"admin", "default", "baseline"} {
			if rng.Intn(3) == 0 {
				continue
			}
			tp := dataplane.TierPolicies{Tier: tn, DefaultAction: []model.Action{model.ActionPass, model.ActionDeny, model.ActionPass}[ti]}
			for pi := rng.Intn(3) + 1; pi > 0; pi-- {
				var rules []dataplane.Rule
				for ri := rng.Intn(4); ri > 0; ri-- {
					m := dataplane.Match{Nets: pick(rng.Intn(2)), NotNets: pick(rng.Intn(2))}
					if rng.Intn(2) == 0 {
						m.Sets = []dataplane.SetID{dataplane.SetID(fmt.Sprint("s", rng.Intn(3)))}
					}
					if rng.Intn(4) == 0 {
						m.NotSets = []dataplane.SetID{dataplane.SetID(fmt.Sprint("s", rng.Intn(3)))}
					}
					dst := dataplane.Match{Ports: ports(), NotPorts: ports()}
					if allowOnly {
						dst.NotPorts = nil
					}
					if rng.Intn(3) == 0 {
						dst.NamedPortSets = []dataplane.SetID{"np"}
					}
					r := dataplane.Rule{Action: actions[rng.Intn(len(actions))], Protocol: protos[rng.Intn(len(protos))]}
					if allowOnly {
						r.Action = []model.Action{model.ActionAllow, model.ActionLog}[rng.Intn(2)]
					}
					if rng.Intn(2) == 0 {
						r.Src, r.Dst = m, dst
					} else { // as an egress rule, the peer is the destination
						dst.Sets, dst.NotSets, dst.Nets, dst.NotNets = m.Sets, m.NotSets, m.Nets, m.NotNets
						r.Dst = dst
					}
					rules = append(rules, r)
				}
				k := model.PolicyKey{Kind: "P", Name: fmt.Sprint(iter, tn, pi)}
				s.Apply(dataplane.PolicyUpdated{Key: k, Tier: tn, Ingress: rules, Egress: rules})
				tp.Policies = append(tp.Policies, k)
			}
			tiers = append(tiers, tp)
		}
		var cps [2]*compiled
		for i, dir := range []model.Direction{model.Ingress, model.Egress} {
			cps[i] = s.compile(dir, tiers, local, true)
			checkCompiled(t, fmt.Sprint("iter ", iter), s, dir, tiers, local, cps[i], pool)
			if rl, ok := s.compileList(dir, tiers, local, true); ok {
				listed++
				checkList(t, fmt.Sprint("iter ", iter), s, dir, tiers, local, rl, pool)
			}
		}
		// members join and leave the sets; recompiling only the changed peers must keep the
		// structure equal to the model (and to a fresh compile)
		for round := 0; round < 3; round++ {
			changed := map[netip.Addr]struct{}{}
			var events []struct {
				id dataplane.SetID
				a  netip.Addr
			}
			for i := 0; i < 3; i++ {
				id := dataplane.SetID(fmt.Sprint("s", rng.Intn(3)))
				a := netip.MustParseAddr(pool[rng.Intn(len(pool))])
				if a == local {
					continue // a local-side change regroups the endpoint: a new compile, not this path
				}
				m := dataplane.SetMembersChanged{ID: id}
				if s.member(id, a) {
					m.Removed = []dataplane.Member{{Addr: a}}
				} else {
					m.Added = []dataplane.Member{{Addr: a}}
				}
				s.Apply(m)
				events = append(events, struct {
					id dataplane.SetID
					a  netip.Addr
				}{id, a})
				changed[a] = struct{}{}
			}
			for i, dir := range []model.Direction{model.Ingress, model.Egress} {
				for _, e := range events {
					cps[i].peerChanged(e.id, e.a)
				}
				for a := range changed {
					cps[i].recompilePeer(a)
				}
				where := fmt.Sprint("iter ", iter, " round ", round)
				checkCompiled(t, where, s, dir, tiers, local, cps[i], pool)
				if rl, ok := s.compileList(dir, tiers, local, true); ok {
					checkList(t, where, s, dir, tiers, local, rl, pool)
				}
				fresh := s.compile(dir, tiers, local, true)
				if len(fresh.Peers) != len(cps[i].Peers) {
					t.Fatalf("%s %s: %d known peers after incremental updates, a fresh compile has %d", where, dir, len(cps[i].Peers), len(fresh.Peers))
				}
				for a, k := range fresh.Peers {
					if cps[i].Peers[a] != k {
						t.Fatalf("%s %s: peer %s has class %q incrementally, %q freshly", where, dir, a, cps[i].Peers[a], k)
					}
				}
			}
		}
	}
	if listed < 100 {
		t.Fatalf("only %d of 600 plans had the listed shape: the test no longer exercises it", listed)
	}
}

// checkList probes a listed group's rules as checkCompiled probes a compiled structure.
func checkList(t *testing.T, where string, s *State, dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, rl *ruleList, pool []string) {
	t.Helper()
	probePackets(pool, func(pa netip.Addr, proto model.Protocol, port uint16) {
		want := s.Evaluate(dir, tiers, local, pa, proto, port)
		if got := rl.lookup(s, pa, proto, port); got != want {
			t.Fatalf("%s %s peer %s %s/%d: listed %v, model %v", where, dir, pa, proto, port, got, want)
		}
	})
}

// probePackets calls f for every pool address and a few outside it, with several protocols and ports.
func probePackets(pool []string, f func(netip.Addr, model.Protocol, uint16)) {
	for _, peer := range append(pool, "10.0.0.3", "10.0.255.255", "11.0.0.0", "9.9.9.9", "192.168.255.255", "0.0.0.0", "255.255.255.255") {
		for _, proto := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolICMP, 47} {
			for _, port := range []uint16{0, 1, 19, 20, 21, 49, 50, 60, 99, 100, 119, 129, 65535} {
				f(netip.MustParseAddr(peer), proto, port)
			}
		}
	}
}

// checkCompiled probes a compiled structure with every pool address and a few outside it, for
// several protocols and ports, against the model.
func checkCompiled(t *testing.T, where string, s *State, dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, cp *compiled, pool []string) {
	t.Helper()
	probePackets(pool, func(pa netip.Addr, proto model.Protocol, port uint16) {
		want := s.Evaluate(dir, tiers, local, pa, proto, port)
		if got := cp.Lookup(pa, proto, port); got != want {
			t.Fatalf("%s %s peer %s %s/%d: compiled %v, model %v", where, dir, pa, proto, port, got, want)
		}
		if got := cp.kernelLookup(pa, proto, port); got != want {
			t.Fatalf("%s %s peer %s %s/%d: with the fast path %v, model %v", where, dir, pa, proto, port, got, want)
		}
	})
}
