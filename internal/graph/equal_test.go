package graph_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// msgGen generates messages from a few values each. Two generators of one seed make equal
// messages; with flip set, one now and then draws another value (a field, a length, nil for
// an empty slice, …) and stays in step with the other after it, so the two differ in a place
// or two.
type msgGen struct{ r, flip *rand.Rand }

func (g msgGen) intN(n int) int {
	v := g.r.IntN(n)
	if g.flip != nil && g.flip.IntN(30) == 0 {
		return g.flip.IntN(n)
	}
	return v
}

func genSlice[T any](g msgGen, elem func() T) []T {
	switch g.intN(4) {
	case 0:
		return nil
	case 1:
		return []T{}
	}
	out := make([]T, g.intN(3)+1)
	for i := range out {
		out[i] = elem()
	}
	return out
}

func (g msgGen) str(xs ...string) string { return xs[g.intN(len(xs))] }

func (g msgGen) icmp() *model.ICMPMatch {
	if g.intN(2) == 0 {
		return nil
	}
	m := &model.ICMPMatch{Type: uint8(g.intN(2))}
	if g.intN(2) == 0 {
		c := uint8(g.intN(2)) // a fresh pointer each time: compared by value
		m.Code = &c
	}
	return m
}

func (g msgGen) match() dataplane.Match {
	id := func() dataplane.SetID { return dataplane.SetID(g.str("a1", "a2")) }
	pfx := func() netip.Prefix { return netip.MustParsePrefix(g.str("10.0.0.0/8", "fd00::/64")) }
	port := func() model.Port { return model.Port{First: uint16(g.intN(2)), Last: 80} }
	return dataplane.Match{Sets: genSlice(g, id), NotSets: genSlice(g, id), Nets: genSlice(g, pfx),
		NotNets: genSlice(g, pfx), Ports: genSlice(g, port), NamedPortSets: genSlice(g, id),
		NotPorts: genSlice(g, port), NotNamedPortSets: genSlice(g, id)}
}

func (g msgGen) rule() dataplane.Rule {
	return dataplane.Rule{Action: model.Action(g.intN(2) + 1), Protocol: model.Protocol(g.intN(2) * 6),
		NotProtocol: model.Protocol(g.intN(2) * 17), IPVersion: uint8(g.intN(2) * 4),
		Src: g.match(), Dst: g.match(), ICMP: g.icmp(), NotICMP: g.icmp(),
		Comment: g.str("a", "b"), Index: g.intN(2)}
}

func (g msgGen) policy() dataplane.PolicyUpdated {
	return dataplane.PolicyUpdated{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: g.str("x", "y"), Name: "p"},
		Tier: g.str("t1", "t2"), Ingress: genSlice(g, g.rule), Egress: genSlice(g, g.rule)}
}

func (g msgGen) endpoint() dataplane.EndpointUpdated {
	tiers := func() dataplane.TierPolicies {
		key := func() model.PolicyKey { return model.PolicyKey{Kind: "NetworkPolicy", Name: g.str("p", "q")} }
		return dataplane.TierPolicies{Tier: g.str("t1", "t2"), DefaultAction: model.Action(g.intN(2) + 1), Policies: genSlice(g, key)}
	}
	addr := func() netip.Addr { return netip.MustParseAddr(g.str("10.0.0.1", "fd00::1")) }
	return dataplane.EndpointUpdated{Key: model.EndpointKey{Namespace: g.str("x", "y"), Name: "e"}, Addrs: genSlice(g, addr),
		Interface: g.str("", "cali1"), Interfaces: genSlice(g, func() string { return g.str("eth0", "eth1") }), Ingress: genSlice(g, tiers), Egress: genSlice(g, tiers)}
}

// TestMessageEqual: the messages' Equal methods, which the graph's sequencer uses to skip an
// unchanged message, agree with reflect.DeepEqual on generated pairs, equal ones and unequal ones.
func TestMessageEqual(t *testing.T) {
	var equal, unequal int
	for seed := range 50000 {
		a := msgGen{r: rand.New(rand.NewPCG(uint64(seed), 3))}
		b := msgGen{r: rand.New(rand.NewPCG(uint64(seed), 3)), flip: rand.New(rand.NewPCG(uint64(seed), 5))}
		pa, pb := a.policy(), b.policy()
		ea, eb := a.endpoint(), b.endpoint()
		for _, c := range []struct {
			name      string
			got, want bool
			a, b      any
		}{
			{"PolicyUpdated", pa.Equal(&pb), reflect.DeepEqual(pa, pb), pa, pb},
			{"EndpointUpdated", ea.Equal(&eb), reflect.DeepEqual(ea, eb), ea, eb},
		} {
			if c.got != c.want {
				t.Fatalf("seed %d: %s.Equal = %v, reflect.DeepEqual = %v:\n%s\n%s", seed, c.name, c.got, c.want,
					fmt.Sprintf("%+v", c.a), fmt.Sprintf("%+v", c.b))
			}
			if c.want {
				equal++
			} else {
				unequal++
			}
		}
	}
	if equal < 1000 || unequal < 1000 {
		t.Fatalf("%d equal and %d unequal pairs: the generator does not cover both", equal, unequal)
	}
}
