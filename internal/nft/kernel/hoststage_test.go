package kernel_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// stageEnv is node a of a two-node cluster with an external client, a pod web on a serving
// TCP 80 and 81, node a serving TCP 22, 8080 and 9090 and UDP 5353, node b and the external
// client TCP 8080.
type stageEnv struct {
	c           *netns.Cluster
	a, b        *netns.Node
	ext         *netns.Host
	pod         *netns.Pod
	fd          int
	failIn, out []nft.Failsafe
	more        []model.Update // enforce's further updates
}

func newStageEnv(t *testing.T) *stageEnv {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}, External: true})
	e := &stageEnv{c: c, a: c.Node("a"), b: c.Node("b"), ext: c.External()}
	var err error
	if e.pod, err = c.AddPod("a", "x", "web"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		netns string
		proto netns.Protocol
		ports []uint16
	}{{e.a.NetNS, "TCP", []uint16{22, 8080, 9090}}, {e.a.NetNS, "UDP", []uint16{5353}}, {e.ext.NetNS, "TCP", []uint16{8080}}, {e.b.NetNS, "TCP", []uint16{8080}},
		{e.pod.NetNS, "TCP", []uint16{80, 81}}} {
		for _, port := range s.ports {
			if err := c.Serve(s.netns, s.proto, port); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.failIn, _ = nft.ParseFailsafes(nft.DefaultFailsafeIn)
	e.out, _ = nft.ParseFailsafes(nft.DefaultFailsafeOut)
	e.fd = nodeFD(t, e.a)
	return e
}

// enforce programs node a with its host endpoint of interface ifname (role=node, no
// default-allow profile), pod web and the policies.
func (e *stageEnv) enforce(t *testing.T, ifname string, ps ...model.Policy) *kernel.Applier {
	t.Helper()
	g := graph.New(graph.Config{NodeName: "a"})
	us := []model.Update{
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: "a-eth0"}, Node: "a",
			Labels: model.LabelsOf(map[string]string{"role": "node"}), Addrs: e.a.Underlay, Running: true,
			Host: &model.HostEndpoint{Interface: ifname}}},
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "web"}, Node: "a",
			Labels: model.LabelsOf(map[string]string{"app": "web"}), Addrs: e.pod.Addrs, Running: true}},
		model.HostAddrSet{Addr: e.a.Underlay[0]}, model.HostAddrSet{Addr: e.a.Underlay[1]},
	}
	us = append(us, e.more...)
	for _, p := range ps {
		us = append(us, model.PolicySet{Policy: p})
	}
	for _, u := range append(us, model.SyncStatusUpdate{Status: model.InSync}) {
		g.OnUpdate(u)
	}
	dp, err := kernel.Open(e.fd, nft.Config{Host: nft.HostConfig{FailsafeIn: e.failIn, FailsafeOut: e.out,
		WorkloadPrefixes: []string{"nftp"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	return dp
}

// checkRendered lists node a's table and checks that the table dp renders offline loads with
// nft -f and lists the same; it returns the listing.
func (e *stageEnv) checkRendered(t *testing.T, dp *kernel.Applier) string {
	t.Helper()
	listed := nftIn(t, e.a.NetNS, "list", "table", "inet", nft.DefaultTable)
	checkRenderLoads(t, dp, listed)
	return listed
}

// stageProbe is one connection attempt and whether it must connect.
type stageProbe struct {
	what, from string
	proto      netns.Protocol
	to         netip.Addr
	port       uint16
	ok         bool
}

func checkProbes(t *testing.T, probes []stageProbe) {
	t.Helper()
	for _, pr := range probes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := netns.Probe(ctx, pr.from, pr.to, pr.proto, pr.port, 500*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got != pr.ok {
			t.Errorf("%s (%s): connected = %v, want %v", pr.what, pr.to, got, pr.ok)
		}
	}
}

// hostNets are addrs as host prefixes.
func hostNets(addrs ...netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, x := range addrs {
		out = append(out, netip.PrefixFrom(x, x.BitLen()))
	}
	return out
}

func nodePolicy(name string, edit func(p *model.Policy)) model.Policy {
	p := model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: name}, Tier: model.TierNetworkPolicy,
		Selector: "role == 'node'", Hosts: true, ApplyIngress: true}
	edit(&p)
	return p
}

func tcpPorts(ports ...uint16) []model.Port {
	var out []model.Port
	for _, p := range ports {
		out = append(out, model.Port{First: p, Last: p})
	}
	return out
}

// TestHostEndpointStages: the stages of a host endpoint's policy besides the node's own
// traffic, on node a's eth0 endpoint, with real TCP and UDP over IPv4 and IPv6:
//   - applyOnForward: the policy judges traffic forwarded to a pod through eth0 (the external
//     client admitted, node b refused) and still the node's own; the pod's policy applies
//     as well; forwarded egress without such policy stays allowed;
//   - preDNAT: a NodePort (a DNAT rule of the test's own in node a) restricted by client
//     address; a pre-DNAT allow of a node port skips the node's own policy, also by a rule
//     naming the node's address as destination; pod traffic and the failsafe ports are
//     untouched;
//   - doNotTrack: an untracked ingress and egress allow answer UDP without a conntrack
//     entry; without the egress allow the replies are dropped;
//   - the "*" endpoint: the NodePort restriction and the forward policy alike;
//   - cidr failsafes: under deny-everything policy, tracked and untracked, a failsafe port
//     open to the external client's addresses only.
func TestHostEndpointStages(t *testing.T) {
	e := newStageEnv(t)
	a, b, ext, pod := e.a, e.b, e.ext, e.pod

	fwd := nodePolicy("fwd-from-external", func(p *model.Policy) {
		p.ApplyOnForward = true
		p.IngressRules = []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Nets: hostNets(ext.Addrs...)}}}
	})
	t.Run("applyOnForward", func(t *testing.T) {
		web := model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "web-80"}, Tier: model.TierNetworkPolicy,
			Namespace: "x", Selector: "app == 'web'", ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Destination: model.Peer{Ports: tcpPorts(80)}}}}
		e.enforce(t, "eth0", fwd, web)
		for i := range 2 {
			is6 := i == 1
			checkProbes(t, []stageProbe{
				{"external → pod:80 (forwarded, admitted)", ext.NetNS, "TCP", pod.IP(is6), 80, true},
				{"b → pod:80 (forwarded through eth0, refused)", b.NetNS, "TCP", pod.IP(is6), 80, false},
				{"external → pod:81 (the pod's policy refuses)", ext.NetNS, "TCP", pod.IP(is6), 81, false},
				{"external → a:8080 (the node's own, admitted)", ext.NetNS, "TCP", a.Underlay[i], 8080, true},
				{"b → a:8080 (the node's own, refused)", b.NetNS, "TCP", a.Underlay[i], 8080, false},
				{"b → a:22 (failsafe)", b.NetNS, "TCP", a.Underlay[i], 22, true},
				{"pod → external:8080 (forwarded egress, no policy)", pod.NetNS, "TCP", ext.Addrs[i], 8080, true},
			})
		}
	})

	netns.Nft(t, a.NetNS, fmt.Sprintf(`table inet nodeport {
	chain pre {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr %s tcp dport 30080 dnat ip to %s:80
		ip6 daddr %s tcp dport 30080 dnat ip6 to [%s]:80
	}
}
`, a.Underlay[0], pod.IP(false), a.Underlay[1], pod.IP(true)), "-f", "-")
	t.Cleanup(func() { netns.Nft(t, a.NetNS, "", "delete", "table", "inet", "nodeport") })
	pre := nodePolicy("nodeport-from-external", func(p *model.Policy) {
		p.ApplyOnForward, p.PreDNAT = true, true
		p.IngressRules = []model.Rule{
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{Nets: hostNets(ext.Addrs...)},
				Destination: model.Peer{Ports: tcpPorts(30080, 9090)}},
			{Action: model.ActionDeny, Protocol: model.ProtocolTCP, Destination: model.Peer{Ports: tcpPorts(30080)}},
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Destination: model.Peer{Nets: hostNets(a.Underlay...), Ports: tcpPorts(8080)}},
		}
	})
	t.Run("preDNAT restricts a NodePort by client", func(t *testing.T) {
		for _, ifname := range []string{"eth0", model.HostInterfaceAll} {
			e.enforce(t, ifname, pre)
			for i := range 2 {
				is6 := i == 1
				checkProbes(t, []stageProbe{
					{"external → a:30080 (NodePort, admitted) on " + ifname, ext.NetNS, "TCP", a.Underlay[i], 30080, true},
					{"b → a:30080 (NodePort, refused)", b.NetNS, "TCP", a.Underlay[i], 30080, false},
					{"b → pod:80 (pod traffic untouched)", b.NetNS, "TCP", pod.IP(is6), 80, true},
					{"external → a:9090 (pre-DNAT allow skips the node's own policy)", ext.NetNS, "TCP", a.Underlay[i], 9090, true},
					{"b → a:9090 (undecided: the node's default deny)", b.NetNS, "TCP", a.Underlay[i], 9090, false},
					{"b → a:8080 (a rule naming the node's address)", b.NetNS, "TCP", a.Underlay[i], 8080, true},
					{"b → a:22 (failsafe)", b.NetNS, "TCP", a.Underlay[i], 22, true},
				})
			}
		}
	})
	t.Run("applyOnForward on the * endpoint", func(t *testing.T) {
		e.enforce(t, model.HostInterfaceAll, fwd)
		for i := range 2 {
			checkProbes(t, []stageProbe{
				{"external → pod:80 (forwarded, admitted)", ext.NetNS, "TCP", pod.IP(i == 1), 80, true},
				{"b → pod:80 (forwarded, refused)", b.NetNS, "TCP", pod.IP(i == 1), 80, false},
			})
		}
	})

	in := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolUDP, Source: model.Peer{Nets: hostNets(ext.Addrs...)},
		Destination: model.Peer{Ports: tcpPorts(5353)}}
	out := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolUDP, Source: model.Peer{Ports: tcpPorts(5353)},
		Destination: model.Peer{Nets: hostNets(ext.Addrs...)}}
	both := nodePolicy("untracked-dns", func(p *model.Policy) {
		p.ApplyOnForward, p.DoNotTrack, p.ApplyEgress = true, true, true
		p.IngressRules, p.EgressRules = []model.Rule{in}, []model.Rule{out}
	})
	t.Run("doNotTrack both ways", func(t *testing.T) {
		e.enforce(t, "eth0", both)
		flush := func() {
			if out, err := netns.Exec(context.Background(), a.NetNS, "conntrack", "-F"); err != nil {
				t.Fatalf("conntrack -F: %v: %s", err, out)
			}
		}
		flush()
		for i := range 2 {
			checkProbes(t, []stageProbe{
				{"external → a:5353/udp (untracked both ways)", ext.NetNS, "UDP", a.Underlay[i], 5353, true},
				{"b → a:5353/udp (undecided: the node's default deny)", b.NetNS, "UDP", a.Underlay[i], 5353, false},
			})
		}
		checkProbes(t, []stageProbe{{"external → a:22 (failsafe, tracked)", ext.NetNS, "TCP", a.Underlay[0], 22, true}})
		ct, err := netns.Exec(context.Background(), a.NetNS, "conntrack", "-L")
		if err != nil {
			t.Fatalf("conntrack -L: %v: %s", err, ct)
		}
		if !strings.Contains(string(ct), "dport=22 ") {
			t.Errorf("conntrack lacks the tracked flow to port 22:\n%s", ct)
		}
		if strings.Contains(string(ct), "dport=5353 ") {
			t.Errorf("conntrack holds the untracked flow:\n%s", ct)
		}

		ingressOnly := nodePolicy("untracked-dns", func(p *model.Policy) {
			p.ApplyOnForward, p.DoNotTrack = true, true
			p.IngressRules = []model.Rule{in}
		})
		e.enforce(t, "eth0", ingressOnly)
		flush()
		for i := range 2 {
			checkProbes(t, []stageProbe{
				{"external → a:5353/udp (no untracked egress allow: the reply is dropped)", ext.NetNS, "UDP", a.Underlay[i], 5353, false},
			})
		}
	})

	// The three stages at once: the kernel lists the table as the golden file holds it, and
	// the table rendered offline loads with nft -f and lists the same.
	t.Run("golden", func(t *testing.T) {
		listed := e.checkRendered(t, e.enforce(t, "eth0", fwd, pre, both))
		checkGolden(t, filepath.Join("..", "testdata", "golden", "host-stages.nft"), listed)
	})

	t.Run("cidr failsafes", func(t *testing.T) {
		defIn, defOut := e.failIn, e.out
		t.Cleanup(func() { e.failIn, e.out = defIn, defOut })
		var err error
		cidr := fmt.Sprintf("tcp:%s/32:9090,tcp:[%s/128]:9090", ext.Addrs[0], ext.Addrs[1])
		if e.failIn, err = nft.ParseFailsafes(nft.DefaultFailsafeIn + "," + cidr); err != nil {
			t.Fatal(err)
		}
		if e.out, err = nft.ParseFailsafes(nft.DefaultFailsafeOut + "," + strings.ReplaceAll(cidr, "9090", "8080")); err != nil {
			t.Fatal(err)
		}
		denyAll := func(name string, edit func(p *model.Policy)) model.Policy {
			return nodePolicy(name, func(p *model.Policy) {
				p.ApplyEgress = true
				p.IngressRules, p.EgressRules = []model.Rule{{Action: model.ActionDeny}}, []model.Rule{{Action: model.ActionDeny}}
				edit(p)
			})
		}
		e.checkRendered(t, e.enforce(t, "eth0", denyAll("deny-all", func(*model.Policy) {}),
			denyAll("deny-all-untracked", func(p *model.Policy) { p.ApplyOnForward, p.DoNotTrack = true, true })))
		for i := range 2 {
			checkProbes(t, []stageProbe{
				{"external → a:9090 (failsafe for the external client)", ext.NetNS, "TCP", a.Underlay[i], 9090, true},
				{"b → a:9090 (not b's failsafe)", b.NetNS, "TCP", a.Underlay[i], 9090, false},
				{"a → external:8080 (outbound failsafe to the external client)", a.NetNS, "TCP", ext.Addrs[i], 8080, true},
				{"a → b:8080 (not to b)", a.NetNS, "TCP", b.Underlay[i], 8080, false},
				{"b → a:22 (failsafe for all)", b.NetNS, "TCP", a.Underlay[i], 22, true},
			})
		}
	})
}

// TestHostEndpointStagesLocalSide: in the stages that judge forwarded traffic, a rule's local
// side is the packet's (its destination for ingress), as Felix matches it: node a's eth0
// endpoint with pods web and db, real TCP over IPv4 and IPv6:
//   - applyOnForward: an ingress rule whose destination selector picks web allows traffic
//     forwarded to web and not to db (the tier's default denies it);
//   - preDNAT: a Deny whose destination nets are db's addresses refuses traffic to db, what it
//     leaves undecided (web) goes on;
//   - the table the kernel lists is the golden file's, and the one rendered offline loads.
func TestHostEndpointStagesLocalSide(t *testing.T) {
	e := newStageEnv(t)
	db, err := e.c.AddPod("a", "x", "db")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.Serve(db.NetNS, "TCP", 80); err != nil {
		t.Fatal(err)
	}
	e.more = []model.Update{model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "db"}, Node: "a",
		Labels: model.LabelsOf(map[string]string{"app": "db"}), Addrs: db.Addrs, Running: true}}}
	ext, pod := e.ext, e.pod

	toWeb := nodePolicy("fwd-to-web", func(p *model.Policy) {
		p.ApplyOnForward = true
		p.IngressRules = []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{Selector: "app == 'web'", Ports: tcpPorts(80)}}}
	})
	t.Run("applyOnForward: destination selector", func(t *testing.T) {
		e.enforce(t, "eth0", toWeb)
		for i := range 2 {
			checkProbes(t, []stageProbe{
				{"external → web:80 (the destination selector picks it)", ext.NetNS, "TCP", pod.IP(i == 1), 80, true},
				{"external → db:80 (not picked: the tier's default)", ext.NetNS, "TCP", db.IP(i == 1), 80, false},
			})
		}
	})

	notDB := nodePolicy("prednat-not-db", func(p *model.Policy) {
		p.ApplyOnForward, p.PreDNAT = true, true
		p.IngressRules = []model.Rule{{Action: model.ActionDeny, Protocol: model.ProtocolTCP,
			Destination: model.Peer{Nets: hostNets(db.Addrs...)}}}
	})
	t.Run("preDNAT: destination nets", func(t *testing.T) {
		e.enforce(t, "eth0", notDB)
		for i := range 2 {
			checkProbes(t, []stageProbe{
				{"external → web:80 (undecided: on to the next stages)", ext.NetNS, "TCP", pod.IP(i == 1), 80, true},
				{"external → db:80 (the destination nets deny)", ext.NetNS, "TCP", db.IP(i == 1), 80, false},
			})
		}
	})

	t.Run("golden", func(t *testing.T) {
		listed := e.checkRendered(t, e.enforce(t, "eth0", toWeb, notDB))
		checkGolden(t, filepath.Join("..", "testdata", "golden", "host-stages-local.nft"), listed)
	})
}
