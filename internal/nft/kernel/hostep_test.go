package kernel_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestHostEndpoints: host endpoints police node a's own traffic, on real TCP over IPv4 and
// IPv6, with an external client and node b as the other client:
//   - a GlobalNetworkPolicy admitting TCP 8080 from the external client on node a's eth0
//     endpoint: 8080 from node b and 9090 from anyone are denied, the failsafe port 22 stays
//     open, loopback is untouched and traffic forwarded through node a to its pod is not
//     judged;
//   - an egress lockdown: the node reaches nothing but its failsafe outbound ports, its API
//     server and its own pods;
//   - a deny-everything policy on a "*" endpoint: 22 and 6443 stay reachable.
func TestHostEndpoints(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}, External: true})
	a, b, ext := c.Node("a"), c.Node("b"), c.External()
	pod, err := c.AddPod("a", "x", "web")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		netns string
		ports []uint16
	}{{a.NetNS, []uint16{22, 6443, 8080, 9090}}, {ext.NetNS, []uint16{6443, 7443, 8080}}, {pod.NetNS, []uint16{80}}} {
		for _, port := range s.ports {
			if err := c.Serve(s.netns, "TCP", port); err != nil {
				t.Fatal(err)
			}
		}
	}
	failIn, _ := nft.ParseFailsafes(nft.DefaultFailsafeIn)
	failOut, _ := nft.ParseFailsafes(nft.DefaultFailsafeOut)
	apiServer := netip.AddrPortFrom(ext.Addrs[0], 7443) // the agent's, outside the failsafe ports
	hostCfg := nft.HostConfig{FailsafeIn: failIn, FailsafeOut: failOut, APIServers: []netip.AddrPort{apiServer},
		WorkloadPrefixes: []string{"nftp"}}
	hosts := func(addrs []netip.Addr) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range addrs {
			out = append(out, netip.PrefixFrom(x, x.BitLen()))
		}
		return out
	}
	enforce := func(t *testing.T, ifname string, p model.Policy) {
		t.Helper()
		g := graph.New(graph.Config{NodeName: "a"})
		for _, u := range []model.Update{
			model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: "a-host"}, Node: "a",
				Labels: model.LabelsOf(map[string]string{"role": "node"}), Addrs: a.Underlay, Running: true,
				Host: &model.HostEndpoint{Interface: ifname}}},
			model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "web"}, Node: "a",
				Labels: model.LabelsOf(map[string]string{"app": "web"}), Addrs: pod.Addrs, Running: true}},
			model.HostAddrSet{Addr: a.Underlay[0]}, model.HostAddrSet{Addr: a.Underlay[1]},
			model.PolicySet{Policy: p}, model.SyncStatusUpdate{Status: model.InSync},
		} {
			g.OnUpdate(u)
		}
		fd, err := a.FD()
		if err != nil {
			t.Fatal(err)
		}
		defer closeFD(fd)
		dp, err := kernel.Open(fd, nft.Config{Host: hostCfg})
		if err != nil {
			t.Fatal(err)
		}
		defer dp.Close()
		if err := dp.Apply(g.Flush()); err != nil {
			t.Fatal(err)
		}
	}
	type probe struct {
		what, from string
		to         netip.Addr
		port       uint16
		ok         bool
	}
	check := func(t *testing.T, is6 bool, probes []probe) {
		t.Helper()
		for _, pr := range probes {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			got, err := netns.Probe(ctx, pr.from, pr.to, "TCP", pr.port, 500*time.Millisecond)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if got != pr.ok {
				t.Errorf("%s (IPv6 %v): connected = %v, want %v", pr.what, is6, got, pr.ok)
			}
		}
	}
	fam := func(addrs []netip.Addr, is6 bool) netip.Addr {
		if is6 {
			return addrs[1]
		}
		return addrs[0]
	}
	gnp := func(name string) model.Policy {
		return model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: name}, Tier: model.TierNetworkPolicy,
			Selector: "role == 'node'", Hosts: true}
	}

	t.Run("ingress: one port from one client", func(t *testing.T) {
		p := gnp("admit-8080")
		p.ApplyIngress = true
		p.IngressRules = []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source: model.Peer{Nets: hosts(ext.Addrs)}, Destination: model.Peer{Ports: []model.Port{{First: 8080, Last: 8080}}}}}
		enforce(t, "eth0", p)
		for _, is6 := range []bool{false, true} {
			node := fam(a.Underlay, is6)
			check(t, is6, []probe{
				{"external → a:8080", ext.NetNS, node, 8080, true},
				{"b → a:8080", b.NetNS, node, 8080, false},
				{"external → a:9090", ext.NetNS, node, 9090, false},
				{"external → a:22 (failsafe)", ext.NetNS, node, 22, true},
				{"b → a:6443 (failsafe)", b.NetNS, node, 6443, true},
				{"a → loopback:9090", a.NetNS, netip.MustParseAddr(map[bool]string{false: "127.0.0.1", true: "::1"}[is6]), 9090, true},
				{"a → own address:9090 (loopback)", a.NetNS, node, 9090, true},
				{"external → pod through a (forwarded)", ext.NetNS, pod.IP(is6), 80, true},
				{"a → external:8080 (no egress policy: denied by default)", a.NetNS, fam(ext.Addrs, is6), 8080, false},
				{"a → its pod", a.NetNS, pod.IP(is6), 80, true},
			})
		}
	})

	t.Run("egress lockdown keeps the failsafe outbound ports", func(t *testing.T) {
		p := gnp("egress-lockdown")
		p.ApplyIngress, p.ApplyEgress = true, true
		p.IngressRules = []model.Rule{{Action: model.ActionAllow}}
		p.EgressRules = []model.Rule{{Action: model.ActionDeny}}
		enforce(t, "eth0", p)
		for _, is6 := range []bool{false, true} {
			check(t, is6, []probe{
				{"a → external:8080", a.NetNS, fam(ext.Addrs, is6), 8080, false},
				{"a → external:6443 (failsafe outbound)", a.NetNS, fam(ext.Addrs, is6), 6443, true},
				{"a → its pod", a.NetNS, pod.IP(is6), 80, true},
				{"external → a:9090 (ingress allowed)", ext.NetNS, fam(a.Underlay, is6), 9090, true},
			})
		}
		check(t, false, []probe{{"a → its API server", a.NetNS, apiServer.Addr(), apiServer.Port(), true}})
	})

	t.Run("deny everything on *: 22 and 6443 stay reachable", func(t *testing.T) {
		p := gnp("deny-all")
		p.ApplyIngress, p.ApplyEgress = true, true
		p.IngressRules = []model.Rule{{Action: model.ActionDeny}}
		p.EgressRules = []model.Rule{{Action: model.ActionDeny}}
		enforce(t, model.HostInterfaceAll, p)
		for _, is6 := range []bool{false, true} {
			node := fam(a.Underlay, is6)
			check(t, is6, []probe{
				{"external → a:22", ext.NetNS, node, 22, true},
				{"external → a:6443", ext.NetNS, node, 6443, true},
				{"external → a:8080", ext.NetNS, node, 8080, false},
				{"b → a:9090", b.NetNS, node, 9090, false},
				{"a → external:8080", a.NetNS, fam(ext.Addrs, is6), 8080, false},
				{"a → loopback:8080", a.NetNS, netip.MustParseAddr(map[bool]string{false: "127.0.0.1", true: "::1"}[is6]), 8080, true},
				{"external → pod through a (forwarded)", ext.NetNS, pod.IP(is6), 80, true},
			})
		}
		check(t, false, []probe{{"a → its API server", a.NetNS, apiServer.Addr(), apiServer.Port(), true}})
	})
}
