package kernel_test

import (
	"context"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestNodeEgress: a pod's egress policy judges its traffic to nodes — to another node (forward
// hook there) and to its own node (input hook) alike, so a deny of node addresses holds
// wherever the node is — while its own node still reaches it (kubelet probes) and IPv6
// neighbour discovery keeps working under an egress policy that denies the node. Real TCP over
// IPv4 and IPv6; servers listen on the nodes' underlay addresses.
func TestNodeEgress(t *testing.T) {
	tc := newTrafficCluster(t)
	nodeAddrs := map[string][]netip.Addr{}
	for _, n := range tc.c.Nodes() {
		nodeAddrs[n.Name] = n.Underlay
		if err := tc.c.Serve(n.NetNS, "TCP", 80, n.Underlay...); err != nil {
			t.Fatal(err)
		}
	}
	nets := func(nodes ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, n := range nodes {
			for _, a := range nodeAddrs[n] {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
		return out
	}
	// an admin-tier cluster policy on x/a, which lives on node a (x/b on node b)
	xa := model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "x-a-egress"}, Tier: model.TierAdmin,
		Selector: "pod == 'a'", NamespaceSelector: "ns == 'x'", ApplyEgress: true}
	type want struct {
		from, toNode string
		ok           bool
	}
	tests := []struct {
		name  string
		rules []model.Rule
		want  []want
	}{
		{"no rule: everything passes",
			nil,
			[]want{{"x/a", "a", true}, {"x/a", "b", true}, {"x/b", "b", true}}},
		{"deny both nodes: the own node too",
			[]model.Rule{{Action: model.ActionDeny, Destination: model.Peer{Nets: nets("a", "b")}}},
			[]want{{"x/a", "a", false}, {"x/a", "b", false}, {"x/b", "b", true}, {"x/b", "a", true}}},
		{"accept node b, deny the nodes",
			[]model.Rule{{Action: model.ActionAllow, Destination: model.Peer{Nets: nets("b")}}, {Action: model.ActionDeny, Destination: model.Peer{Nets: nets("a", "b")}}},
			[]want{{"x/a", "a", false}, {"x/a", "b", true}}},
		{"accept x/b only: neither node",
			[]model.Rule{{Action: model.ActionAllow, Destination: model.Peer{Nets: func() []netip.Prefix {
				var out []netip.Prefix
				for _, a := range tc.addrs["x/b"] {
					out = append(out, netip.PrefixFrom(a, a.BitLen()))
				}
				return out
			}()}}, {Action: model.ActionDeny}},
			[]want{{"x/a", "a", false}, {"x/a", "b", false}}},
		{"accept the own node on TCP 80 only",
			[]model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Destination: model.Peer{Nets: nets("a"), Ports: []model.Port{nfttest.TCP(80)}}},
				{Action: model.ActionDeny, Destination: model.Peer{Nets: nets("a", "b")}}},
			[]want{{"x/a", "a", true}, {"x/a", "b", false}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := xa
			p.EgressRules = tt.rules
			sc := nfttest.Scenario{Name: tt.name, Policies: func(map[string][]netip.Addr) []model.Policy { return []model.Policy{p} }}
			tc.enforce(t, sc)
			// x/a resolves its gateway afresh, under this policy
			if out, err := exec.Command("ip", "-n", tc.pods["x/a"].NetNS, "neigh", "flush", "all").CombinedOutput(); err != nil {
				t.Fatalf("ip neigh flush: %v: %s", err, out)
			}
			for _, is6 := range []bool{false, true} {
				for _, w := range tt.want {
					dst := nodeAddrs[w.toNode][0]
					if is6 {
						dst = nodeAddrs[w.toNode][1]
					}
					got := probeOnce(t, tc.pods[w.from].NetNS, dst)
					if got != w.ok {
						t.Errorf("%s → node %s (%s): connected = %v, want %v", w.from, w.toNode, dst, got, w.ok)
					}
				}
				// pod to pod across nodes goes on working: the pods' gateways are resolved by
				// neighbour discovery to their own node
				if got := probeOnce(t, tc.pods["x/a"].NetNS, tc.pods["x/b"].IP(is6)); !got {
					t.Errorf("x/a → x/b (IPv6 %v): blocked", is6)
				}
				// the node reaches its own pod (the kubelet's probes), whatever its policy
				if got := probeOnce(t, tc.c.Node("a").NetNS, tc.pods["x/a"].IP(is6)); !got {
					t.Errorf("node a → x/a (IPv6 %v): blocked", is6)
				}
			}
		})
	}
}

func probeOnce(t *testing.T, fromNetNS string, to netip.Addr) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := netns.Probe(ctx, fromNetNS, to, "TCP", 80, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
