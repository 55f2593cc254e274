package trace

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// node is one node namespace with x/server (TCP 80), y/friend and y/client, and the agent's table
// programmed by a kernel.Applier: x/server admits TCP 80 from y/friend only.
type node struct {
	c                      *netns.Cluster
	fd                     int
	g                      *graph.Graph
	dp                     *kernel.Applier
	server, friend, client *netns.Pod
}

// allowFriend is x's policy: TCP 80 from y's friend, and from the pods of more selectors.
func allowFriend(more ...string) model.Policy {
	p := model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "allow-friend"},
		Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "all()", ApplyIngress: true}
	for _, sel := range append([]string{"pod == 'friend'"}, more...) {
		p.IngressRules = append(p.IngressRules, model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source:      model.Peer{Selector: sel, NamespaceSelector: "ns == 'y'"},
			Destination: model.Peer{Ports: []model.Port{{First: 80, Last: 80}}}})
	}
	return p
}

// apply brings the agent's table up to date with updates.
func (n *node) apply(t *testing.T, updates ...model.Update) {
	t.Helper()
	for _, u := range updates {
		n.g.OnUpdate(u)
	}
	if err := n.dp.Apply(n.g.Flush()); err != nil {
		t.Fatal(err)
	}
}

func newNode(t *testing.T) *node {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft")
	n := &node{c: netns.NewForTest(t, netns.Config{Nodes: []string{"a"}})}
	ups := []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}},
		model.NamespaceSet{Namespace: model.Namespace{Name: "y", Labels: map[string]string{"ns": "y"}}},
		model.PolicySet{Policy: allowFriend()},
	}
	for _, p := range []struct {
		ns, name string
		to       **netns.Pod
	}{{"x", "server", &n.server}, {"y", "friend", &n.friend}, {"y", "client", &n.client}} {
		pod, err := n.c.AddPod("a", p.ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		*p.to = pod
		ups = append(ups, model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: p.ns, Name: p.name},
			Node: "a", Labels: model.LabelsOf(map[string]string{"pod": p.name}), Addrs: pod.Addrs, Running: true}})
	}
	if err := n.c.Serve(n.server.NetNS, netns.TCP, 80); err != nil {
		t.Fatal(err)
	}
	var err error
	if n.fd, err = n.c.Node("a").FD(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.NewFile(uintptr(n.fd), "netns").Close() })
	n.g = graph.New(graph.Config{NodeName: "a"})
	if n.dp, err = kernel.Open(n.fd, nft.Config{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.dp.Close() })
	n.apply(t, append(ups, model.SyncStatusUpdate{Status: model.InSync})...)
	return n
}

// listing is `nft -s -a list ruleset` of the node: every table, every rule with its handle, no
// counter values.
func (n *node) listing(t *testing.T) string {
	out, err := netns.Exec(context.Background(), n.c.Node("a").NetNS, "nft", "-s", "-a", "list", "ruleset")
	if err != nil {
		t.Fatalf("nft list ruleset: %v\n%s", err, out)
	}
	return string(out)
}

// trace runs a trace of from → to TCP 80 for packets complete packets, starts probe once the
// trace is armed, and returns the packets.
func (n *node) trace(t *testing.T, from, to *netns.Pod, packets int, probe func()) []Packet {
	t.Helper()
	var got []Packet
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Config{NetNSFD: n.fd, MaxPackets: packets, Timeout: 20 * time.Second,
			Flow: Flow{Src: from.IP(false), Dst: to.IP(false), Proto: 6, Dport: 80}}, func(p Packet) { got = append(got, p) })
		done <- err
	}()
	for !strings.Contains(n.listing(t), "table inet "+Table) {
		time.Sleep(10 * time.Millisecond)
	}
	probe()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return got
}

func (n *node) connect(t *testing.T, from, to *netns.Pod) bool {
	ok, err := netns.Probe(context.Background(), from.NetNS, to.IP(false), netns.TCP, 80, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// path is a packet's steps in short: chain (hash cut off) and verdict, rule comments where the
// agent's table has them.
func path(p Packet) string {
	var parts []string
	for _, s := range p.Steps {
		chain, _, _ := strings.Cut(s.Chain, "_")
		if strings.HasPrefix(s.Chain, "forward_") {
			chain = s.Chain
		}
		verdict, _, _ := strings.Cut(s.Verdict, " ")
		parts = append(parts, chain+":"+s.Kind+":"+verdict)
	}
	return strings.Join(parts, " ")
}

// TestTrace traces a denied and an allowed connection's first packet through the agent's table:
// the chains and verdicts the kernel reports, the rule comments naming the deciding policy or
// tier default; the agent's table is the same before and after, rule handles included, and the
// trace's table is gone.
func TestTrace(t *testing.T) {
	n := newNode(t)
	before := n.listing(t)
	for _, tc := range []struct {
		name     string
		from     func() *netns.Pod
		allowed  bool
		path     string
		decision string // the comment of the rule that decided
	}{
		{"denied", func() *netns.Pod { return n.client }, false,
			"forward_egress:policy:accept forward_ingress:rule:goto in:rule:goto c:rule:goto deny:rule:drop",
			"tier default default deny: no rule of NetworkPolicy/x/allow-friend matched"},
		{"allowed", func() *netns.Pod { return n.friend }, true,
			"forward_egress:policy:accept forward_ingress:rule:goto in:rule:accept",
			"NetworkPolicy/x/allow-friend ingress rule 0 (allow)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := tc.from()
			packets := n.trace(t, from, n.server, 1, func() {
				if ok := n.connect(t, from, n.server); ok != tc.allowed {
					t.Errorf("connected %v, want %v", ok, tc.allowed)
				}
			})
			if len(packets) != 1 {
				t.Fatalf("%d packets traced, want 1", len(packets))
			}
			p := packets[0]
			if p.Src != from.IP(false) || p.Dst != n.server.IP(false) || p.Proto != 6 || p.Dport != 80 {
				t.Errorf("traced %s", p)
			}
			if got := path(p); got != tc.path {
				t.Errorf("path\n got %s\nwant %s\n%s", got, tc.path, p)
			}
			if last := p.Steps[len(p.Steps)-1]; last.Comment != tc.decision {
				t.Errorf("deciding rule's comment %q, want %q\n%s", last.Comment, tc.decision, p)
			}
			if want := map[bool]string{true: "accept", false: "drop"}[tc.allowed]; p.Verdict != want {
				t.Errorf("verdict %s, want %s", p.Verdict, want)
			}
		})
	}
	if after := n.listing(t); after != before {
		t.Errorf("the ruleset differs after tracing\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// TestTraceAcrossReplace: between two traced packets the agent writes its whole table again and
// then refills the server's group chain (a policy changed: new rule handles): the second packet
// is traced through the new table, its rules still named by their comments, and the trace's
// table goes with the trace.
func TestTraceAcrossReplace(t *testing.T) {
	n := newNode(t)
	packets := n.trace(t, n.client, n.server, 2, func() {
		n.connect(t, n.client, n.server)
		if err := n.dp.Repair(); err != nil {
			t.Fatal(err)
		}
		n.apply(t, model.PolicySet{Policy: allowFriend("pod == 'nobody'")})
		n.connect(t, n.client, n.server)
	})
	if len(packets) != 2 {
		t.Fatalf("%d packets traced, want 2", len(packets))
	}
	group := [2]Step{}
	for i, p := range packets {
		if last := p.Steps[len(p.Steps)-1]; p.Verdict != "drop" || !strings.HasPrefix(last.Comment, "tier default default deny") {
			t.Errorf("packet %d: verdict %s, last rule's comment %q\n%s", i, p.Verdict, last.Comment, p)
		}
		for _, s := range p.Steps {
			if strings.HasPrefix(s.Chain, "in_") {
				group[i] = s
			}
		}
	}
	if group[0].Handle == group[1].Handle || group[1].Comment == "" {
		t.Errorf("the group chain's deciding rule: %+v, then %+v; want new handles, named", group[0], group[1])
	}
	if strings.Contains(n.listing(t), "table inet "+Table) {
		t.Errorf("table %s left behind", Table)
	}
}

// TestFlowOnly: the trace rule matches only the flow (a probe of another flow is not traced).
func TestFlowOnly(t *testing.T) {
	n := newNode(t)
	packets := n.trace(t, n.friend, n.server, 1, func() {
		n.connect(t, n.client, n.server) // not the flow
		n.connect(t, n.friend, n.server)
	})
	if len(packets) != 1 || packets[0].Src != n.friend.IP(false) {
		t.Fatalf("traced %v, want friend's packet only", packets)
	}
	if f := (Flow{Dst: netip.MustParseAddr("fd00::1"), Proto: 17}).String(); f != "any → fd00::1 udp" {
		t.Errorf("Flow.String() = %q", f)
	}
}

// TestTraceNode traces the node's own traffic (Flow.ToNode) through a host endpoint on node a's
// eth0 that admits TCP 8080 from the external client only: 9090 from the client goes through
// input_host's dispatch to the tier default's drop, the failsafe port 22 is accepted by its
// rule, each named by its comment; forwarded traffic is not marked.
func TestTraceNode(t *testing.T) {
	h := newHostNode(t, []uint16{22, 9090}, func(ext *netns.Host) []model.Update {
		return []model.Update{model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "admit-8080"},
			Tier: model.TierNetworkPolicy, Selector: "role == 'node'", Hosts: true, ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Source:      model.Peer{Nets: []netip.Prefix{netip.PrefixFrom(ext.Addrs[0], 32)}},
				Destination: model.Peer{Ports: []model.Port{{First: 8080, Last: 8080}}}}}}}}
	})
	a := h.a
	for _, tc := range []struct {
		port     uint16
		allowed  bool
		path     string
		decision string
	}{
		{9090, false, "input:rule:goto in:rule:goto c:rule:goto deny:rule:drop",
			"tier default default deny: no rule of GlobalNetworkPolicy/admit-8080 matched"},
		{22, true, "input:rule:accept", "failsafe port: never blocked by a host endpoint's policy"},
	} {
		p, ok := h.traceIn(tc.port)
		if ok != tc.allowed {
			t.Errorf("port %d: connected %v, want %v", tc.port, ok, tc.allowed)
		}
		if pp := path(p); pp != tc.path {
			t.Errorf("port %d: path\n got %s\nwant %s\n%s", tc.port, pp, tc.path, p)
		}
		if last := p.Steps[len(p.Steps)-1]; last.Comment != tc.decision {
			t.Errorf("port %d: deciding rule's comment %q, want %q\n%s", tc.port, last.Comment, tc.decision, p)
		}
	}
	if f := (Flow{Dst: a.Underlay[0], ToNode: true}).String(); f != "any → this node (172.31.0.1)" {
		t.Errorf("Flow.String() = %q", f)
	}
}

// TestTraceNodeStages traces the node's own traffic through the host endpoint stages before
// its own policy: a preDNAT deny decides in prednat, a doNotTrack allow in raw_in (input_host
// then accepts on its mark), and a port neither stage decides goes on to input_host.
func TestTraceNodeStages(t *testing.T) {
	h := newHostNode(t, []uint16{9090, 9091, 9092}, func(ext *netns.Host) []model.Update {
		client := model.Peer{Nets: []netip.Prefix{netip.PrefixFrom(ext.Addrs[0], 32)}}
		port := func(p uint16) model.Peer { return model.Peer{Ports: []model.Port{{First: p, Last: p}}} }
		return []model.Update{
			model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "nodeports"},
				Tier: model.TierNetworkPolicy, Selector: "role == 'node'", Hosts: true, ApplyIngress: true, PreDNAT: true, ApplyOnForward: true,
				IngressRules: []model.Rule{{Action: model.ActionDeny, Protocol: model.ProtocolTCP, Source: client, Destination: port(9090)}}}},
			model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "GlobalNetworkPolicy", Name: "untracked"},
				Tier: model.TierNetworkPolicy, Selector: "role == 'node'", Hosts: true, ApplyIngress: true, DoNotTrack: true, ApplyOnForward: true,
				IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: client, Destination: port(9091)}}}},
		}
	})
	for _, tc := range []struct {
		port           uint16
		path, decision string
	}{
		{9090, "raw:rule:continue raw:rule:continue raw:rule:goto in:rule:goto c:rule:goto host:rule:accept notrack:policy:accept " +
			"prednat:rule:continue prednat:rule:goto in:rule:goto c:rule:goto deny:rule:drop",
			"GlobalNetworkPolicy/nodeports ingress rule 0 (deny)"},
		{9091, "raw:rule:continue raw:rule:continue raw:rule:goto in:rule:accept notrack:rule:continue notrack:policy:accept " +
			"prednat:rule:accept input:rule:accept",
			"allowed by a host endpoint's untracked or pre-DNAT policy"},
		{9092, "raw:rule:continue raw:rule:continue raw:rule:goto in:rule:goto c:rule:goto host:rule:accept notrack:policy:accept " +
			"prednat:rule:continue prednat:rule:goto in:rule:goto c:rule:goto host:rule:accept " +
			"input:rule:goto in:rule:goto c:rule:goto deny:rule:drop",
			"host endpoint default deny: no policy decided"},
	} {
		p, _ := h.traceIn(tc.port)
		if pp := path(p); pp != tc.path {
			t.Errorf("port %d: path\n got %s\nwant %s\n%s", tc.port, pp, tc.path, p)
		}
		if last := p.Steps[len(p.Steps)-1]; last.Comment != tc.decision {
			t.Errorf("port %d: deciding rule's comment %q, want %q\n%s", tc.port, last.Comment, tc.decision, p)
		}
	}
}

// hostNode is node a of a netns cluster with an external client, a host endpoint on its eth0
// (role: node) and the agent's table programmed by a kernel.Applier with the default inbound
// failsafe ports.
type hostNode struct {
	t   *testing.T
	a   *netns.Node
	ext *netns.Host
	fd  int
}

// newHostNode makes the node, serving TCP on ports, with the host endpoint and the updates
// policies gives.
func newHostNode(t *testing.T, ports []uint16, policies func(ext *netns.Host) []model.Update) *hostNode {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft")
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a"}, External: true})
	h := &hostNode{t: t, a: c.Node("a"), ext: c.External()}
	for _, port := range ports {
		if err := c.Serve(h.a.NetNS, netns.TCP, port); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := h.a.FD()
	if err != nil {
		t.Fatal(err)
	}
	h.fd = fd
	t.Cleanup(func() { os.NewFile(uintptr(fd), "netns").Close() })
	failIn, _ := nft.ParseFailsafes(nft.DefaultFailsafeIn)
	dp, err := kernel.Open(fd, nft.Config{Host: nft.HostConfig{FailsafeIn: failIn, WorkloadPrefixes: []string{"nftp"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	g := graph.New(graph.Config{NodeName: "a"})
	updates := append([]model.Update{model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: "a-eth0"}, Node: "a",
		Labels: model.LabelsOf(map[string]string{"role": "node"}), Addrs: h.a.Underlay, Running: true,
		Host: &model.HostEndpoint{Interface: "eth0"}}}}, policies(h.ext)...)
	for _, u := range append(updates, model.SyncStatusUpdate{Status: model.InSync}) {
		g.OnUpdate(u)
	}
	if err := dp.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	return h
}

// traceIn traces the first packet of a TCP connection from the external client to the node's
// port, and reports whether it connected.
func (h *hostNode) traceIn(port uint16) (Packet, bool) {
	t := h.t
	var got []Packet
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), Config{NetNSFD: h.fd, MaxPackets: 1, Timeout: 20 * time.Second,
			Flow: Flow{Src: h.ext.Addrs[0], ToNode: true, Proto: 6, Dport: port}}, func(p Packet) { got = append(got, p) })
		done <- err
	}()
	for {
		out, err := netns.Exec(context.Background(), h.a.NetNS, "nft", "list", "tables")
		if err != nil {
			t.Fatalf("nft list tables: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "table inet "+Table) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	ok, err := netns.Probe(context.Background(), h.ext.NetNS, h.a.Underlay[0], netns.TCP, port, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("port %d: %d packets traced, want 1", port, len(got))
	}
	return got[0], ok
}
