package nft

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestNamedPortsOfTwoSets: two egress peers held by the same address sets, each declaring TCP
// 8080 under another name. An admin rule denies the one name, a NetworkPolicy allows the other:
// each peer gets its own verdict, however many peers the compile saw before it.
func TestNamedPortsOfTwoSets(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.1.1"), netip.MustParseAddr("10.0.1.2")
	local := netip.MustParseAddr("10.0.0.10")
	s := NewState()
	s.Apply(dataplane.SetReplaced{ID: "web", Members: addrs("10.0.1.1", "10.0.1.2")})
	s.Apply(dataplane.SetReplaced{ID: "http", Kind: dataplane.SetNamedPorts, Members: []dataplane.Member{{Addr: a, Protocol: tcp, Port: 8080}}})
	s.Apply(dataplane.SetReplaced{ID: "metrics", Kind: dataplane.SetNamedPorts, Members: []dataplane.Member{{Addr: b, Protocol: tcp, Port: 8080}}})
	s.Apply(pol("deny-metrics", "admin", nil, []dataplane.Rule{
		{Action: model.ActionDeny, Protocol: tcp, Dst: dataplane.Match{Sets: []dataplane.SetID{"web"}, NamedPortSets: []dataplane.SetID{"metrics"}}}}))
	s.Apply(pol("allow-http", "default", nil, []dataplane.Rule{
		{Action: model.ActionAllow, Protocol: tcp, Dst: dataplane.Match{Sets: []dataplane.SetID{"web"}, NamedPortSets: []dataplane.SetID{"http"}}}}))
	tiers := []dataplane.TierPolicies{
		{Tier: "admin", DefaultAction: model.ActionPass, Policies: []model.PolicyKey{key("deny-metrics")}},
		{Tier: "default", DefaultAction: model.ActionAllow, Policies: []model.PolicyKey{key("allow-http")}},
	}
	for _, first := range []netip.Addr{a, b} { // a peer compiled before the other, by recompilePeer
		cp := s.compile(model.Egress, tiers, local, true)
		for _, p := range []netip.Addr{first, a, b} {
			cp.recompilePeer(p)
		}
		for _, p := range []netip.Addr{a, b} {
			if got, want := cp.Lookup(p, tcp, 0, 8080), s.Evaluate(model.Egress, tiers, local, p, tcp, 0, 8080); got != want {
				t.Errorf("%s first: peer %s tcp/8080: compiled %v, model %v", first, p, got, want)
			}
		}
	}
}
