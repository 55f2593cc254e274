package nft

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

func TestGroupKey(t *testing.T) {
	s := NewState()
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	s.Apply(dataplane.SetReplaced{ID: "np", Kind: dataplane.SetNamedPorts, Members: []dataplane.Member{
		{Addr: a, Protocol: model.ProtocolTCP, Port: 8080}, {Addr: b, Protocol: model.ProtocolTCP, Port: 8080}, {Addr: c, Protocol: model.ProtocolTCP, Port: 9090}}})
	s.Apply(pol("np", "default", []dataplane.Rule{{Action: model.ActionAllow, Dst: dataplane.Match{NamedPortSets: []dataplane.SetID{"np"}}}}, nil))
	s.Apply(pol("other", "default", nil, nil))
	tiers := func(p string) []dataplane.TierPolicies {
		return []dataplane.TierPolicies{{Tier: "default", DefaultAction: model.ActionDeny, Policies: []model.PolicyKey{key(p)}}}
	}
	tests := []struct {
		name   string
		x, y   netip.Addr
		tx, ty string
		same   bool
	}{
		{"same policies, same named port resolution", a, b, "np", "np", true},
		{"same policies, named port resolves differently", a, c, "np", "np", false},
		{"different policies", a, b, "np", "other", false},
	}
	for _, tc := range tests {
		kx, ky := s.GroupKey(model.Ingress, tiers(tc.tx), tc.x), s.GroupKey(model.Ingress, tiers(tc.ty), tc.y)
		if (kx == ky) != tc.same {
			t.Errorf("%s: keys %q and %q, want same=%v", tc.name, kx, ky, tc.same)
		}
		if tc.same { // the invariant the key promises: equal keys compile to equal decisions
			dx, dy := s.Compile(model.Ingress, tiers(tc.tx), tc.x, true), s.Compile(model.Ingress, tiers(tc.ty), tc.y, true)
			for _, port := range []uint16{8080, 9090, 80} {
				if ox, oy := dx.Lookup(c, model.ProtocolTCP, 0, port), dy.Lookup(c, model.ProtocolTCP, 0, port); ox != oy {
					t.Errorf("%s: port %d: %v vs %v", tc.name, port, ox, oy)
				}
			}
		}
	}
}
