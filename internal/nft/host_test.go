package nft_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// ParseFailsafes reads Felix's forms, the cidr ones included, and refuses what Felix refuses.
func TestParseFailsafes(t *testing.T) {
	tcp, udp := model.ProtocolTCP, model.ProtocolUDP
	cases := []struct {
		in   string
		want []nft.Failsafe
	}{
		{"none", nil},
		{"22, udp:68", []nft.Failsafe{{Protocol: tcp, Port: 22}, {Protocol: udp, Port: 68}}},
		{"TCP:10.1.2.3/8:22", []nft.Failsafe{{Protocol: tcp, Net: netip.MustParsePrefix("10.0.0.0/8"), Port: 22}}},
		{"udp:192.168.0.1:53", []nft.Failsafe{{Protocol: udp, Net: netip.MustParsePrefix("192.168.0.1/32"), Port: 53}}},
		{"udp:[fd00::1/8]:53,tcp:[fd00::1]:22", []nft.Failsafe{{Protocol: udp, Net: netip.MustParsePrefix("fd00::/8"), Port: 53},
			{Protocol: tcp, Net: netip.MustParsePrefix("fd00::1/128"), Port: 22}}},
	}
	for _, c := range cases {
		got, err := nft.ParseFailsafes(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"icmp:1", "tcp:0", "tcp:70000", "tcp:10.0.0.0/33:22", "tcp:a:b:c:22", "[fd00::/8]:22",
		"tcp:[fd00::/8:22", "tcp:fd00::/8:22", "tcp:[::ffff:10.0.0.1]:22"} {
		if got, err := nft.ParseFailsafes(bad); err == nil {
			t.Errorf("%q: parsed as %v", bad, got)
		}
	}
	for _, f := range []string{"tcp:22", "udp:10.0.0.0/8:53", "tcp:[fd00::/8]:22"} {
		if got, _ := nft.ParseFailsafes(f); len(got) != 1 || got[0].String() != f {
			t.Errorf("%q: String %v", f, got)
		}
	}
}

// A host endpoint that polices several interfaces (one without interfaceName whose expected
// IPs several hold) has its dispatch elements on each of them, of one group, and takes each
// from the * endpoint's; a message with fewer interfaces withdraws the others.
func TestHostEndpointInterfaces(t *testing.T) {
	node := netip.MustParseAddr("10.0.0.1")
	pol := model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "fwd"}
	tiers := []dataplane.TierPolicies{{Tier: "default", DefaultAction: model.ActionDeny, Policies: []model.PolicyKey{pol}}}
	hep := func(ifnames ...string) dataplane.EndpointUpdated {
		m := dataplane.EndpointUpdated{Key: model.EndpointKey{Name: "by-ip"}, Host: true, Addrs: []netip.Addr{node},
			Interface: ifnames[0], Ingress: tiers, Forward: dataplane.Lists{Ingress: tiers}}
		if len(ifnames) > 1 {
			m.Interfaces = ifnames
		}
		return m
	}
	b := nft.NewBuilder(nft.Config{})
	b.Apply([]dataplane.Message{dataplane.PolicyUpdated{Key: pol, Tier: "default",
		Ingress: []dataplane.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP}}}, hep("eth0", "eth1"), dataplane.InSync{}})
	check := func(what string, want ...string) {
		t.Helper()
		for _, set := range []string{"host_in_if_v4", "host_fwd_in_v4", "host_named_if"} {
			var got []string
			for _, el := range b.Table().Sets[set].SortedElements() {
				got = append(got, el.Ifname)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %s holds the interfaces %v, want %v", what, set, got, want)
			}
		}
	}
	check("two interfaces", "eth0", "eth1")
	b.Apply([]dataplane.Message{hep("eth1")})
	check("one left", "eth1")
}

// A stage's policy is enforced on a host endpoint whose own traffic no policy judges (one
// with the default-allow profile, an automatic one): its stage dispatch does not wait for
// the node's own tier lists.
func TestHostEndpointStageWithoutOwnPolicy(t *testing.T) {
	pol := model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "pre"}
	tiers := []dataplane.TierPolicies{{Tier: "default", DefaultAction: model.ActionPass, Policies: []model.PolicyKey{pol}},
		{Tier: model.TierHostUndecided, DefaultAction: model.ActionAllow}}
	b := nft.NewBuilder(nft.Config{})
	b.Apply([]dataplane.Message{dataplane.PolicyUpdated{Key: pol, Tier: "default",
		Ingress: []dataplane.Rule{{Action: model.ActionDeny, Protocol: model.ProtocolTCP}}},
		dataplane.EndpointUpdated{Key: model.EndpointKey{Name: "auto"}, Host: true, Interface: model.HostInterfaceAll,
			Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, PreDNAT: dataplane.Lists{Ingress: tiers}},
		dataplane.InSync{}})
	if s := b.Table().Sets["host_prednat_in_addr_v4"]; s == nil || len(s.SortedElements()) != 1 {
		t.Errorf("the node address has no pre-DNAT dispatch element: %v", s)
	}
	if c := b.Table().Chains["prednat"]; c == nil || !strings.Contains(b.Render(), "goto in_") {
		t.Errorf("no pre-DNAT dispatch to the * endpoint's group:\n%s", b.Render())
	}
}

// DecideStage agrees with a walk of the table for packets forwarded through a host endpoint
// (their own address the rules' local side: a destination selector, a named port, destination
// nets) and for packets to the node before DNAT.
func TestDecideStageMatchesWalk(t *testing.T) {
	addr := netip.MustParseAddr
	node, web, db, ext := addr("10.0.0.1"), addr("10.1.0.2"), addr("10.1.0.3"), addr("192.0.2.1")
	fwd := model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "fwd"}
	pre := model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "pre"}
	tcp := model.ProtocolTCP
	msgs := []dataplane.Message{
		dataplane.SetReplaced{ID: "web", Kind: dataplane.SetAddrs, Members: []dataplane.Member{{Addr: web}}},
		dataplane.SetReplaced{ID: "http", Kind: dataplane.SetNamedPorts, Members: []dataplane.Member{{Addr: db, Protocol: tcp, Port: 8080}}},
		dataplane.PolicyUpdated{Key: fwd, Tier: "default", Ingress: []dataplane.Rule{
			{Action: model.ActionAllow, Protocol: tcp, Dst: dataplane.Match{Sets: []dataplane.SetID{"web"}, Ports: []model.Port{{First: 80, Last: 80}}}},
			{Action: model.ActionAllow, Dst: dataplane.Match{NamedPortSets: []dataplane.SetID{"http"}}}}},
		dataplane.PolicyUpdated{Key: pre, Tier: "default", Ingress: []dataplane.Rule{
			{Action: model.ActionDeny, Protocol: tcp, Dst: dataplane.Match{Nets: []netip.Prefix{netip.PrefixFrom(db, 32)}, Ports: []model.Port{{First: 81, Last: 81}}}},
			{Action: model.ActionAllow, Protocol: tcp, Dst: dataplane.Match{Ports: []model.Port{{First: 9090, Last: 9090}}}}}},
		dataplane.EndpointUpdated{Key: model.EndpointKey{Name: "eth0"}, Host: true, Interface: "eth0", Addrs: []netip.Addr{node},
			Ingress: []dataplane.TierPolicies{{Tier: model.TierHostDefault, DefaultAction: model.ActionDeny}},
			Forward: dataplane.Lists{Ingress: []dataplane.TierPolicies{{Tier: "default", DefaultAction: model.ActionDeny, Policies: []model.PolicyKey{fwd}}}},
			PreDNAT: dataplane.Lists{Ingress: []dataplane.TierPolicies{{Tier: "default", DefaultAction: model.ActionPass, Policies: []model.PolicyKey{pre}},
				{Tier: model.TierHostUndecided, DefaultAction: model.ActionAllow}}}},
		dataplane.InSync{},
	}
	b := nft.NewBuilder(nft.Config{})
	b.Apply(msgs)
	key := model.EndpointKey{Name: "eth0"}
	for _, c := range []struct {
		st    dataplane.Stage
		chain string
	}{{dataplane.StageForward, "fwd_in"}, {dataplane.StagePreDNAT, "prednat"}} {
		for _, to := range []netip.Addr{node, web, db} {
			for _, port := range []uint16{80, 81, 8080, 9090} {
				d, ok := b.DecideStage(c.st, model.Ingress, key, to, ext, tcp, 40000, port)
				if !ok {
					t.Fatalf("%s: no decision", c.chain)
				}
				_, v, err := b.Table().Walk(c.chain, ruleset.Packet{Iifname: "eth0", Src: ext, Dst: to, Proto: uint8(tcp), Sport: 40000, Dport: port})
				if err != nil {
					t.Fatal(err)
				}
				if got := v.Kind == ruleset.Accept; got != (d.Outcome.Verdict == nft.Allow) {
					t.Errorf("%s → %s:%d: the walk %v, DecideStage %v", c.chain, to, port, v.Kind, d.Outcome)
				}
			}
		}
	}
	if d, _ := b.DecideStage(dataplane.StageForward, model.Ingress, key, web, ext, tcp, 40000, 80); d.Outcome.Verdict != nft.Allow {
		t.Errorf("forwarded to web:80: %v, want the destination selector's allow", d.Outcome)
	}
	if d, _ := b.DecideStage(dataplane.StageForward, model.Ingress, key, db, ext, tcp, 40000, 8080); d.Outcome.Verdict != nft.Allow {
		t.Errorf("forwarded to db:8080: %v, want the named port's allow", d.Outcome)
	}
	if d, _ := b.DecideStage(dataplane.StagePreDNAT, model.Ingress, key, db, ext, tcp, 40000, 81); d.Outcome.Verdict != nft.Deny {
		t.Errorf("to db:81 before DNAT: %v, want the destination nets' deny", d.Outcome)
	}
}
