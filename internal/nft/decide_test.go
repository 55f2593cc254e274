package nft

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

var (
	tcp = model.ProtocolTCP
	udp = model.ProtocolUDP
)

func pol(name, tier string, ingress, egress []dataplane.Rule) dataplane.PolicyUpdated {
	return dataplane.PolicyUpdated{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "ns", Name: name}, Tier: tier, Ingress: ingress, Egress: egress}
}

func key(name string) model.PolicyKey {
	return model.PolicyKey{Kind: "NetworkPolicy", Namespace: "ns", Name: name}
}

func addrs(ss ...string) []dataplane.Member {
	var out []dataplane.Member
	for _, s := range ss {
		out = append(out, dataplane.Member{Addr: netip.MustParseAddr(s)})
	}
	return out
}

func port(p uint16) []model.Port { return []model.Port{{First: p, Last: p}} }

type probe struct {
	peer  string
	proto model.Protocol
	port  uint16
	want  Verdict
}

func TestCompileSemantics(t *testing.T) {
	local := netip.MustParseAddr("10.0.0.10")
	local6 := netip.MustParseAddr("fd00::10")
	npTier := func(ps ...string) dataplane.TierPolicies {
		tp := dataplane.TierPolicies{Tier: "default", DefaultAction: model.ActionDeny}
		for _, p := range ps {
			tp.Policies = append(tp.Policies, key(p))
		}
		return tp
	}
	sets := []dataplane.Message{
		dataplane.SetReplaced{ID: "sa", Kind: dataplane.SetAddrs, Description: "app == 'a'", Members: addrs("10.0.1.1", "10.0.1.2", "fd00::1:1")},
		dataplane.SetReplaced{ID: "sb", Kind: dataplane.SetAddrs, Description: "app == 'b'", Members: addrs("10.0.2.1", "10.9.9.9")},
		dataplane.SetReplaced{ID: "np", Kind: dataplane.SetNamedPorts, Description: "named port http", Members: []dataplane.Member{
			{Addr: local, Protocol: tcp, Port: 8080}, {Addr: netip.MustParseAddr("10.0.1.1"), Protocol: tcp, Port: 9090}}},
	}
	tests := []struct {
		name     string
		policies []dataplane.PolicyUpdated
		dir      model.Direction
		tiers    []dataplane.TierPolicies
		probes   []probe
	}{
		{
			name:     "default deny",
			policies: []dataplane.PolicyUpdated{pol("deny-all", "default", nil, nil)},
			tiers:    []dataplane.TierPolicies{npTier("deny-all")},
			probes: []probe{
				{"10.0.1.1", tcp, 80, Deny}, {"192.168.0.1", udp, 53, Deny}, {"10.0.1.1", model.ProtocolICMP, 0, Deny},
			},
		},
		{
			name:   "no policy allows",
			tiers:  nil,
			probes: []probe{{"10.0.1.1", tcp, 80, Allow}},
		},
		{
			name: "allow from selector on tcp 80",
			policies: []dataplane.PolicyUpdated{pol("allow-a", "default", []dataplane.Rule{
				{Action: model.ActionAllow, Protocol: tcp, Src: dataplane.Match{Sets: []dataplane.SetID{"sa"}}, Dst: dataplane.Match{Ports: port(80)}},
			}, nil)},
			tiers: []dataplane.TierPolicies{npTier("allow-a")},
			probes: []probe{
				{"10.0.1.1", tcp, 80, Allow}, {"10.0.1.2", tcp, 80, Allow}, {"10.0.1.1", tcp, 81, Deny},
				{"10.0.1.1", udp, 80, Deny}, {"10.0.2.1", tcp, 80, Deny}, {"8.8.8.8", tcp, 80, Deny},
			},
		},
		{
			// its addresses are the kernel's timed sets', learnt at run time: the compile
			// knows none, and the peer must never stand for every address
			name: "a peer of domain names alone matches no address in the compiled shapes",
			policies: []dataplane.PolicyUpdated{pol("dns", "default", []dataplane.Rule{
				{Action: model.ActionAllow, Src: dataplane.Match{DomainName: "kubernetes.io"}},
				{Action: model.ActionAllow, Protocol: tcp, Src: dataplane.Match{DomainName: "*.example.com"}, Dst: dataplane.Match{Ports: port(80)}},
			}, nil)},
			tiers: []dataplane.TierPolicies{npTier("dns")},
			probes: []probe{
				{"10.0.1.1", tcp, 80, Deny}, {"93.184.215.14", tcp, 80, Deny}, {"8.8.8.8", udp, 53, Deny},
			},
		},
		{
			name: "ipBlock with except, overlapping CIDRs",
			policies: []dataplane.PolicyUpdated{pol("cidr", "default", []dataplane.Rule{
				{Action: model.ActionAllow, Src: dataplane.Match{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, NotNets: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}},
				{Action: model.ActionAllow, Protocol: udp, Src: dataplane.Match{Nets: []netip.Prefix{netip.MustParsePrefix("10.9.9.0/24")}}, Dst: dataplane.Match{Ports: []model.Port{{First: 53, Last: 54}}}},
			}, nil)},
			tiers: []dataplane.TierPolicies{npTier("cidr")},
			probes: []probe{
				{"10.1.2.3", tcp, 1, Allow}, {"10.9.1.1", tcp, 80, Deny}, {"10.9.9.1", udp, 53, Allow}, {"10.9.9.1", udp, 54, Allow},
				{"10.9.9.1", udp, 55, Deny}, {"10.9.9.9", udp, 53, Allow}, {"11.0.0.0", tcp, 80, Deny}, {"9.255.255.255", tcp, 80, Deny},
				{"10.255.255.255", udp, 1, Allow},
			},
		},
		{
			name: "named port resolves on the local endpoint (ingress)",
			policies: []dataplane.PolicyUpdated{pol("np", "default", []dataplane.Rule{
				{Action: model.ActionAllow, Protocol: tcp, Dst: dataplane.Match{NamedPortSets: []dataplane.SetID{"np"}}},
			}, nil)},
			tiers:  []dataplane.TierPolicies{npTier("np")},
			probes: []probe{{"1.2.3.4", tcp, 8080, Allow}, {"1.2.3.4", tcp, 9090, Deny}, {"1.2.3.4", udp, 8080, Deny}},
		},
		{
			name: "named port resolves per peer (egress)",
			dir:  model.Egress,
			policies: []dataplane.PolicyUpdated{pol("np", "default", nil, []dataplane.Rule{
				{Action: model.ActionAllow, Protocol: tcp, Dst: dataplane.Match{NamedPortSets: []dataplane.SetID{"np"}}},
			})},
			tiers:  []dataplane.TierPolicies{npTier("np")},
			probes: []probe{{"10.0.1.1", tcp, 9090, Allow}, {"10.0.1.1", tcp, 8080, Deny}, {"10.0.1.2", tcp, 9090, Deny}},
		},
		{
			name: "tiers: admin deny and pass, then networkpolicy, then baseline",
			policies: []dataplane.PolicyUpdated{
				pol("admin", "admin", []dataplane.Rule{
					{Action: model.ActionDeny, Src: dataplane.Match{Sets: []dataplane.SetID{"sb"}}},
					{Action: model.ActionPass, Protocol: tcp, Src: dataplane.Match{Sets: []dataplane.SetID{"sa"}}, Dst: dataplane.Match{Ports: port(22)}},
					{Action: model.ActionAllow, Src: dataplane.Match{Sets: []dataplane.SetID{"sa"}}},
				}, nil),
				pol("np-allow-22", "default", []dataplane.Rule{{Action: model.ActionAllow, Protocol: tcp, Dst: dataplane.Match{Ports: port(22)}, Src: dataplane.Match{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.1.2/32")}}}}, nil),
			},
			tiers: []dataplane.TierPolicies{
				{Tier: "admin", DefaultAction: model.ActionPass, Policies: []model.PolicyKey{key("admin")}},
				npTier("np-allow-22"),
			},
			probes: []probe{
				{"10.0.2.1", tcp, 80, Deny},  // admin deny
				{"10.0.1.1", tcp, 80, Allow}, // admin allow
				{"10.0.1.1", tcp, 22, Deny},  // passed, NP denies by default
				{"10.0.1.2", tcp, 22, Allow}, // passed, NP allows its /32
				{"8.8.8.8", tcp, 22, Deny},   // admin default pass, NP default deny
			},
		},
		{
			name: "dual-stack",
			policies: []dataplane.PolicyUpdated{pol("allow-a", "default", []dataplane.Rule{
				{Action: model.ActionAllow, Src: dataplane.Match{Sets: []dataplane.SetID{"sa"}}},
				{Action: model.ActionAllow, IPVersion: 6, Src: dataplane.Match{Nets: []netip.Prefix{netip.MustParsePrefix("fd00:1::/32")}}},
			}, nil)},
			tiers: []dataplane.TierPolicies{npTier("allow-a")},
			probes: []probe{
				{"fd00::1:1", udp, 5, Allow}, {"fd00::2:1", udp, 5, Deny}, {"fd00:1::7", tcp, 1, Allow}, {"10.0.1.1", tcp, 1, Allow},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewState()
			for _, m := range sets {
				s.Apply(m)
			}
			for _, p := range tc.policies {
				s.Apply(p)
			}
			dec := map[bool]*Decision{
				true:  s.Compile(tc.dir, tc.tiers, local, true),
				false: s.Compile(tc.dir, tc.tiers, local6, false),
			}
			for _, pr := range tc.probes {
				peer := netip.MustParseAddr(pr.peer)
				loc := local
				if peer.Is6() {
					loc = local6
				}
				ref := s.Evaluate(tc.dir, tc.tiers, loc, peer, pr.proto, 0, pr.port)
				if ref.Verdict != pr.want {
					t.Errorf("model: %s %s/%d = %s (%s), want %s", pr.peer, pr.proto, pr.port, ref.Verdict, ref.Reason, pr.want)
				}
				got := dec[peer.Is4()].Lookup(peer, pr.proto, 0, pr.port)
				if got != ref {
					t.Errorf("compiled: %s %s/%d = %v, model says %v", pr.peer, pr.proto, pr.port, got, ref)
				}
			}
			// the address partition is disjoint and sorted
			for _, d := range dec {
				for i := 1; i < len(d.Intervals); i++ {
					if !d.Intervals[i-1].To.Less(d.Intervals[i].From) {
						t.Errorf("intervals overlap: %v %v", d.Intervals[i-1], d.Intervals[i])
					}
				}
			}
		})
	}
}

// TestCompileClassesShared: peers with the same decision function share one class.
func TestCompileClassesShared(t *testing.T) {
	s := NewState()
	s.Apply(dataplane.SetReplaced{ID: "sa", Members: addrs("10.0.1.1", "10.0.1.2", "10.0.1.3")})
	s.Apply(pol("allow-a", "default", []dataplane.Rule{{Action: model.ActionAllow, Src: dataplane.Match{Sets: []dataplane.SetID{"sa"}}}}, nil))
	d := s.Compile(model.Ingress, []dataplane.TierPolicies{{Tier: "default", DefaultAction: model.ActionDeny, Policies: []model.PolicyKey{key("allow-a")}}}, netip.MustParseAddr("10.0.0.10"), true)
	if len(d.Peers) != 3 || len(d.Classes) != 2 || len(d.Intervals) != 0 {
		t.Fatalf("peers %d classes %d intervals %d, want 3, 2, 0", len(d.Peers), len(d.Classes), len(d.Intervals))
	}
}
