package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestTraceCommand runs the agent in a node namespace, where x-trace/server admits TCP 80 from
// the friend pod of y-trace only, and `nftpolicy trace` beside it: a denied and an allowed
// connection's first packet are traced through the agent's chains to the rule that decided,
// named by its comment, and their verdict; a trace ended by SIGTERM removes its table; after
// all of it the agent's table is what it was, rule handles included (`nft -s -a list`), and the
// agent repaired nothing.
func TestTraceCommand(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := context.Background()
	const serverNS, clientNS = "x-trace", "y-trace"
	an := newAgentNode(t, s, "tr", podSpec{serverNS, "server", true}, podSpec{clientNS, "friend", false}, podSpec{clientNS, "client", false})
	pods, node := an.pods, an.node
	port := intstr.FromInt32(80)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-friend", Namespace: serverNS},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "friend"}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": clientNS}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}}}}}}
	if _, err := s.Client.NetworkingV1().NetworkPolicies(serverNS).Create(ctx, allow, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := an.start()
	listing := func(what ...string) string {
		out, err := netns.Exec(ctx, node.NetNS, append([]string{"nft", "-s", "-a", "list"}, what...)...)
		if err != nil {
			t.Fatalf("nft list %v: %v\n%s", what, err, out)
		}
		return string(out)
	}
	armed := func() bool { return strings.Contains(listing("tables"), "nftpolicy_trace") }
	// start runs `nftpolicy trace` in the node and returns once its table is in place.
	start := func(args ...string) (*exec.Cmd, *strings.Builder) {
		cmd := exec.Command("ip", append([]string{"netns", "exec", node.NetNS, an.bin, "trace"}, args...)...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); !armed(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("trace %v: no table after 10 s: %s", args, out.String())
			}
		}
		return cmd, &out
	}
	before := listing("table", "inet", "nftpolicy")

	for _, tc := range []struct {
		from    string
		allowed bool
		want    []string // in the trace's output, in order
	}{
		{"client", false, []string{"inet nftpolicy forward_egress: chain policy accept",
			"inet nftpolicy forward_ingress rule", "goto in_", "(to a local pod with ingress policy (IPv4))",
			"inet nftpolicy in_", "goto c_", "inet nftpolicy deny_",
			": drop (tier default default deny: no rule of NetworkPolicy/x-trace/allow-friend matched)", "verdict: drop"}},
		{"friend", true, []string{"inet nftpolicy forward_egress: chain policy accept",
			"inet nftpolicy forward_ingress rule", "inet nftpolicy in_",
			": accept (NetworkPolicy/x-trace/allow-friend ingress rule 0 (allow))", "verdict: accept"}},
	} {
		from, server := pods[tc.from], pods["server"]
		cmd, out := start("--from", from.IP(false).String(), "--to", server.IP(false).String(), "--port", "80/tcp",
			"--packets", "1", "--timeout", "30s")
		if ok, err := netns.Probe(ctx, from.NetNS, server.IP(false), netns.TCP, 80, 500*time.Millisecond); err != nil || ok != tc.allowed {
			t.Errorf("%s → server: connected %v (%v), want %v", tc.from, ok, err, tc.allowed)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("trace from %s: %v\n%s", tc.from, err, out)
		}
		text := out.String()
		t.Logf("trace from %s:\n%s", tc.from, text)
		rest := text
		for _, w := range tc.want {
			i := strings.Index(rest, w)
			if i < 0 {
				t.Errorf("trace from %s: %q missing (in order):\n%s", tc.from, w, text)
				break
			}
			rest = rest[i+len(w):]
		}
		if armed() {
			t.Errorf("trace from %s ended, its table is still there", tc.from)
		}
	}

	cmd, out := start("--to", pods["server"].IP(false).String(), "--packets", "100")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("trace ended by SIGTERM: %v\n%s", err, out)
	}
	if armed() || !strings.Contains(out.String(), "table nftpolicy_trace removed") {
		t.Errorf("after SIGTERM the trace's table is still there:\n%s", out)
	}

	if after := listing("table", "inet", "nftpolicy"); after != before {
		t.Errorf("the agent's table changed while tracing\n--- before\n%s\n--- after\n%s", before, after)
	}
	_, page, err := agent.Get(agentproc.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := testenv.MetricValue(page, `nftpolicy_drift_repairs_total{trigger="event"}`); v != 0 {
		t.Errorf("the agent repaired its table %v times while tracing", v)
	}
}
