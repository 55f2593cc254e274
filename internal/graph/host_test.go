package graph_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestHostEndpoints: a host endpoint is selected by a GlobalNetworkPolicy's selector like a
// pod, never by a Kubernetes policy's; it is a peer of Calico's rule selectors by its expected
// IPs; its message lists the node's addresses and ends, without a default-allow profile, in
// the host default tier, with or without policy.
func TestHostEndpoints(t *testing.T) {
	addr := netip.MustParseAddr
	hep := func(name, ifname string, allow bool, ips ...netip.Addr) model.Update {
		return model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: name}, Node: "n1",
			Labels: model.LabelsOf(lbl("role", "node")), Addrs: ips, Running: true,
			Host: &model.HostEndpoint{Interface: ifname, DefaultAllow: allow}}}
	}
	gnp := model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "nodes"}, Tier: model.TierNetworkPolicy,
		Selector: "role == 'node'", Hosts: true, ApplyIngress: true,
		IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "role == 'node'", NetworkSets: true}}}}
	k8s := model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "all"}, Tier: model.TierAdmin,
		Selector: "all()", ApplyIngress: true}
	g := graph.New(graph.Config{NodeName: "n1"})
	for _, u := range []model.Update{
		hep("n1-eth0", "eth0", false, addr("10.0.0.1")),
		hep("n1-all", model.HostInterfaceAll, true),
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "p"}, Node: "n1",
			Labels: model.LabelsOf(lbl("role", "node")), Addrs: []netip.Addr{addr("10.1.0.2")}, Running: true}},
		model.HostAddrSet{Addr: addr("10.0.0.1"), Interface: "eth0"}, model.HostAddrSet{Addr: addr("192.168.0.1"), Interface: "eth1"},
		model.HostAddrSet{Addr: addr("127.0.0.1"), Interface: "lo"},
		model.PolicySet{Policy: gnp}, model.PolicySet{Policy: k8s},
		model.SyncStatusUpdate{Status: model.InSync},
	} {
		g.OnUpdate(u)
	}
	eps := map[string]dataplane.EndpointUpdated{}
	var members []dataplane.Member
	for _, m := range g.Flush() {
		switch m := m.(type) {
		case dataplane.EndpointUpdated:
			eps[m.Key.String()] = m
		case dataplane.SetReplaced:
			members = append(members, m.Members...)
		}
	}
	nodeAddrs := []netip.Addr{addr("10.0.0.1"), addr("192.168.0.1")}
	eth0 := eps["/n1-eth0"]
	if !eth0.Host || eth0.Interface != "eth0" || !slices.Equal(eth0.Addrs, nodeAddrs) {
		t.Errorf("n1-eth0: %+v, want a host endpoint on eth0 with the node's addresses %v", eth0, nodeAddrs)
	}
	wantIn := []string{model.TierNetworkPolicy + ":" + gnp.Key.String(), model.TierHostDefault + ":"}
	if got := tierText(eth0.Ingress); !slices.Equal(got, wantIn) {
		t.Errorf("n1-eth0 ingress %v, want %v (the ClusterNetworkPolicy selects pods only)", got, wantIn)
	}
	if got := tierText(eth0.Egress); !slices.Equal(got, []string{model.TierHostDefault + ":"}) {
		t.Errorf("n1-eth0 egress %v, want the host default alone (denied without policy)", got)
	}
	all := eps["/n1-all"]
	if all.Interface != model.HostInterfaceAll || len(all.Egress) != 0 || slices.Contains(tierText(all.Ingress), model.TierHostDefault+":") {
		t.Errorf("n1-all (default-allow): %+v, want no host default tier and no egress list", all)
	}
	if p := eps["x/p"]; p.Host || !slices.Contains(tierText(p.Ingress), model.TierNetworkPolicy+":"+gnp.Key.String()) {
		t.Errorf("pod x/p: %+v, want the GlobalNetworkPolicy too", p)
	}
	g.OnUpdate(hep("n1-eth0", "eth0", false, addr("10.0.0.1"), addr("10.9.9.9")))
	if ps := g.Problems(); len(ps) != 1 || ps[0].Object != "HostEndpoint/n1-eth0" || !strings.Contains(ps[0].Message, "10.9.9.9") {
		t.Errorf("problems %+v, want one naming the expected IP that is not the node's", ps)
	}
	var peers []netip.Addr
	for _, m := range members {
		peers = append(peers, m.Addr)
	}
	slices.SortFunc(peers, netip.Addr.Compare)
	if want := []netip.Addr{addr("10.0.0.1"), addr("10.1.0.2")}; !slices.Equal(peers, want) {
		t.Errorf("the rule's set holds %v, want the host endpoint's expected IP and the pod's %v", peers, want)
	}
}

// TestHostEndpointInterfaces: an endpoint without interfaceName applies to the interface
// holding its expected IPs — none yet: no address, so no dispatch; picked up when ifmon
// reports the address; an interface a named endpoint takes is not its own, and of two
// endpoints expecting one interface's address the smaller name gets it. Each problem (an
// expected IP that is not the node's, a named interface that does not exist yet, no interface)
// is reported once, when it appears, however often the endpoint resolves again.
func TestHostEndpointInterfaces(t *testing.T) {
	addr, hep := netip.MustParseAddr, hostEndpoint
	g, step := hostSteps(t, func(m *dataplane.EndpointUpdated) string { return fmt.Sprintf("%s %v", m.Interface, m.Addrs) })
	step("before the node's addresses", []model.Update{hep("by-ip", "", addr("10.0.0.1")), model.SyncStatusUpdate{Status: model.InSync}},
		map[string]string{"by-ip": " []"})
	step("an address on another interface", []model.Update{model.HostAddrSet{Addr: addr("10.0.0.2"), Interface: "eth1"}},
		map[string]string{"by-ip": " []"},
		"HostEndpoint/by-ip: expected IP 10.0.0.1 is not an address of this node: it matches the endpoint as a peer only",
		"HostEndpoint/by-ip: no interface of this node that no other host endpoint takes holds its expected IPs: not enforced until one does")
	step("the interface appears", []model.Update{model.HostAddrSet{Addr: addr("10.0.0.1"), Interface: "eth0"}},
		map[string]string{"by-ip": "eth0 [10.0.0.1 10.0.0.2]"})
	step("a second endpoint expecting it, and a named one of a missing interface",
		[]model.Update{hep("by-ip-2", "", addr("10.0.0.1")), hep("tun", "tun0")},
		map[string]string{"by-ip": "eth0 [10.0.0.1 10.0.0.2]", "by-ip-2": " []", "tun": "tun0 [10.0.0.1 10.0.0.2]"},
		"HostEndpoint/by-ip-2: no interface of this node that no other host endpoint takes holds its expected IPs: not enforced until one does",
		"HostEndpoint/tun: interface tun0 holds no address of this node: it does not exist yet; its traffic is policed by name from its first packet")
	step("resolved again: nothing reported again", []model.Update{model.HostAddrSet{Addr: addr("10.0.0.3"), Interface: "eth1"}},
		map[string]string{"by-ip": "eth0 [10.0.0.1 10.0.0.2 10.0.0.3]", "by-ip-2": " []", "tun": "tun0 [10.0.0.1 10.0.0.2 10.0.0.3]"})
	step("a named endpoint takes eth0", []model.Update{hep("eth0", "eth0")},
		map[string]string{"by-ip": " []", "by-ip-2": " []", "tun": "tun0 [10.0.0.1 10.0.0.2 10.0.0.3]", "eth0": "eth0 [10.0.0.1 10.0.0.2 10.0.0.3]"},
		"HostEndpoint/by-ip: no interface of this node that no other host endpoint takes holds its expected IPs: not enforced until one does")
	if ps := g.Problems(); len(ps) != 3 {
		t.Errorf("Problems() %v, want the three standing ones", ps)
	}
}

func tierText(ts []dataplane.TierPolicies) []string {
	var out []string
	for _, t := range ts {
		s := t.Tier + ":"
		for _, p := range t.Policies {
			s += p.String()
		}
		out = append(out, s)
	}
	return out
}

// TestHostEndpointStages: a host endpoint's lists per stage — applyOnForward policies judge
// its forwarded traffic as well as the node's own; preDNAT and doNotTrack policies only their
// stage, whose lists pass at each tier's end and end in the undecided tier; a pod gets neither
// of the latter.
func TestHostEndpointStages(t *testing.T) {
	pol := func(name string, edit func(p *model.Policy)) model.Policy {
		p := model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: name}, Tier: model.TierNetworkPolicy,
			Selector: "role == 'node'", Hosts: true, ApplyIngress: true}
		edit(&p)
		return p
	}
	fwd := pol("fwd", func(p *model.Policy) { p.ApplyOnForward = true })
	pre := pol("pre", func(p *model.Policy) { p.ApplyOnForward, p.PreDNAT = true, true })
	raw := pol("raw", func(p *model.Policy) { p.ApplyOnForward, p.DoNotTrack, p.ApplyEgress = true, true, true })
	g := graph.New(graph.Config{NodeName: "n1"})
	for _, u := range []model.Update{
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: "n1-eth0"}, Node: "n1",
			Labels: model.LabelsOf(lbl("role", "node")), Running: true, Host: &model.HostEndpoint{Interface: "eth0"}}},
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "p"}, Node: "n1",
			Labels: model.LabelsOf(lbl("role", "node")), Addrs: []netip.Addr{netip.MustParseAddr("10.1.0.2")}, Running: true}},
		model.HostAddrSet{Addr: netip.MustParseAddr("10.0.0.1")},
		model.PolicySet{Policy: fwd}, model.PolicySet{Policy: pre}, model.PolicySet{Policy: raw},
		model.SyncStatusUpdate{Status: model.InSync},
	} {
		g.OnUpdate(u)
	}
	eps := map[string]dataplane.EndpointUpdated{}
	for _, m := range g.Flush() {
		if m, ok := m.(dataplane.EndpointUpdated); ok {
			eps[m.Key.String()] = m
		}
	}
	tier := model.TierNetworkPolicy + ":"
	undecided := model.TierHostUndecided + ":"
	h := eps["/n1-eth0"]
	for _, c := range []struct {
		what string
		got  []dataplane.TierPolicies
		want []string
	}{
		{"ingress", h.Ingress, []string{tier + fwd.Key.String(), model.TierHostDefault + ":"}},
		{"forward ingress", h.Forward.Ingress, []string{tier + fwd.Key.String()}},
		{"forward egress", h.Forward.Egress, nil},
		{"pre-DNAT ingress", h.PreDNAT.Ingress, []string{tier + pre.Key.String(), undecided}},
		{"untracked ingress", h.Untracked.Ingress, []string{tier + raw.Key.String(), undecided}},
		{"untracked egress", h.Untracked.Egress, []string{tier + raw.Key.String(), undecided}},
	} {
		if got := tierText(c.got); !slices.Equal(got, c.want) {
			t.Errorf("n1-eth0 %s: %v, want %v", c.what, got, c.want)
		}
	}
	if d := h.PreDNAT.Ingress[0].DefaultAction; d != model.ActionPass {
		t.Errorf("pre-DNAT tier default %v, want pass (no default deny before DNAT)", d)
	}
	p := eps["x/p"]
	if got := tierText(p.Ingress); !slices.Equal(got, []string{tier + fwd.Key.String()}) || len(p.Egress) != 0 {
		t.Errorf("pod x/p: ingress %v egress %v, want the applyOnForward policy alone", got, tierText(p.Egress))
	}
}

// TestHostEndpointEachInterface: a host endpoint without interfaceName applies to each
// interface holding one of its expected IPs that no named endpoint takes, as Felix resolves
// it: of two endpoints expecting an interface's address, the smaller name takes it; ifmon's
// reports move it as addresses move.
func TestHostEndpointEachInterface(t *testing.T) {
	addr, hep := netip.MustParseAddr, hostEndpoint
	_, step := hostSteps(t, func(m *dataplane.EndpointUpdated) string {
		return fmt.Sprintf("%s %v", m.Interface, m.HostInterfaces())
	})
	step("two interfaces hold its expected IPs", []model.Update{hep("by-ip", "", addr("10.0.0.1"), addr("10.0.1.1")),
		model.HostAddrSet{Addr: addr("10.0.0.1"), Interface: "eth0"}, model.HostAddrSet{Addr: addr("10.0.1.1"), Interface: "eth1"},
		model.SyncStatusUpdate{Status: model.InSync}},
		map[string]string{"by-ip": "eth0 [eth0 eth1]"})
	step("an address moves to a third interface", []model.Update{model.HostAddrDeleted{Addr: addr("10.0.1.1"), Interface: "eth1"},
		model.HostAddrSet{Addr: addr("10.0.1.1"), Interface: "eth2"}}, map[string]string{"by-ip": "eth0 [eth0 eth2]"})
	step("a named endpoint takes eth2", []model.Update{hep("eth2", "eth2")},
		map[string]string{"by-ip": "eth0 [eth0]", "eth2": "eth2 [eth2]"})
	step("an endpoint of a smaller name expecting eth0's address takes eth0", []model.Update{hep("a-by-ip", "", addr("10.0.0.1"))},
		map[string]string{"by-ip": " []", "eth2": "eth2 [eth2]", "a-by-ip": "eth0 [eth0]"},
		"HostEndpoint/by-ip: no interface of this node that no other host endpoint takes holds its expected IPs: not enforced until one does")
}

// hostEndpoint is a host endpoint of node n1 labelled role=node.
func hostEndpoint(name, ifname string, ips ...netip.Addr) model.Update {
	return model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: name}, Node: "n1",
		Labels: model.LabelsOf(lbl("role", "node")), Addrs: ips, Running: true, Host: &model.HostEndpoint{Interface: ifname}}}
}

// hostSteps returns node n1's graph and a step of a host endpoint scenario on it: the step
// applies its updates and flushes, then compares the last message of each host endpoint, as
// show writes it, and the problems reported meanwhile with what it wants.
func hostSteps(t *testing.T, show func(m *dataplane.EndpointUpdated) string) (*graph.Graph,
	func(what string, ups []model.Update, want map[string]string, wantReported ...string)) {
	var reported []string
	got := map[string]string{} // the last message of each host endpoint
	g := graph.New(graph.Config{NodeName: "n1", ReportHost: func(p graph.Problem) { reported = append(reported, p.String()) }})
	return g, func(what string, ups []model.Update, want map[string]string, wantReported ...string) {
		t.Helper()
		for _, u := range ups {
			g.OnUpdate(u)
		}
		for _, m := range g.Flush() {
			if m, ok := m.(dataplane.EndpointUpdated); ok && m.Host {
				got[m.Key.Name] = show(&m)
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: messages %v, want %v", what, got, want)
		}
		if !slices.Equal(reported, wantReported) {
			t.Errorf("%s: reported %q, want %q", what, reported, wantReported)
		}
		reported = nil
	}
}
