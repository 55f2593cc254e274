package main

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestAgentLogsDenied runs the agent with --log-denied at 5 lines a minute per deny reason after
// a burst of 5: a denied connection gives a log line naming both pods, the port and the policy,
// counted in nftpolicy_denied_logged_total; then a flood of 100,000 denied UDP packets (all
// counted by the deny chain, and in nftpolicy_policy_packets_total as the tier default's) gives
// no more lines than the rate lets through: the kernel's bucket holds the burst at first and
// gains the rate, 5 a minute.
func TestAgentLogsDenied(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := context.Background()
	const serverNS, clientNS = "x-denylog", "y-denylog"
	an := newAgentNode(t, s, "dl", podSpec{serverNS, "server", true}, podSpec{clientNS, "client", false})
	server, client := an.pods["server"], an.pods["client"]
	denyAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: serverNS},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := s.Client.NetworkingV1().NetworkPolicies(serverNS).Create(ctx, denyAll, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const rate, burst = 5, 5
	start := time.Now() // the deny chains' buckets cannot be older
	agent := an.start("--log-denied", "--log-denied-rate", "5/minute", "--log-denied-burst", "5")
	const reason = "tier default default deny: no rule of NetworkPolicy/x-denylog/deny-all matched"
	metric := func(name string) float64 {
		_, page, err := agent.Get(agentproc.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := testenv.MetricValue(page, name)
		return v
	}
	// lines waits until the count of log lines stops growing and equals the metric's, and
	// returns the lines.
	lines := func() []map[string]any {
		var got []map[string]any
		for prev := -1; len(got) != prev || float64(len(got)) != metric("nftpolicy_denied_logged_total"); {
			prev = len(got)
			time.Sleep(500 * time.Millisecond)
			var err error
			if got, err = agent.LogLines("packet denied"); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}

	if ok, err := netns.Probe(ctx, client.NetNS, server.IP(false), netns.TCP, 80, 500*time.Millisecond); err != nil || ok {
		t.Fatalf("client → server TCP 80: connected %v (%v), want denied", ok, err)
	}
	got := lines()
	if len(got) == 0 {
		t.Fatal("no log line for the denied connection")
	}
	if line, err := json.Marshal(got[0]); err == nil {
		t.Logf("log line: %s", line)
	}
	want := map[string]any{"src_namespace": clientNS, "src_pod": "client", "dst_namespace": serverNS, "dst_pod": "server",
		"src": client.IP(false).String(), "dst": server.IP(false).String(), "protocol": "tcp", "port": 80.0,
		"reason": reason, "tier": "default", "tier_default": "deny"}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("log line %v: %s = %v, want %v", got[0], k, got[0][k], v)
		}
	}

	denied := `nftpolicy_denied_packets_total{reason="` + reason + `"}`
	before := metric(denied)
	const flood = 100000
	for round := 0; metric(denied)-before < flood; round++ {
		if round == 10 {
			t.Fatalf("%v denied packets counted after 10 rounds of sending", metric(denied)-before)
		}
		if err := netns.Do(client.NetNS, func() error { return netns.SendUDP(netip.AddrPortFrom(server.IP(false), 9), flood) }); err != nil {
			t.Fatal(err)
		}
	}
	got = lines()
	minutes := time.Since(start).Minutes()
	most := burst + int(rate*minutes) + 1
	t.Logf("%v denied packets, %d log lines in %.1f s (at most %d)", metric(denied)-before, len(got), minutes*60, most)
	if len(got) > most {
		t.Errorf("%d log lines; the rate lets at most %d through", len(got), most)
	}
	if len(got) < burst {
		t.Errorf("%d log lines; want the burst's %d at least", len(got), burst)
	}
	// nftpolicy_policy_packets_total counts the same drops by what decided them: the default of
	// tier default, which has no policy and no direction
	tierDefault := `nftpolicy_policy_packets_total{direction="",policy="",tier="default",verdict="deny"}`
	if v, n := metric(tierDefault), metric(denied); v != n || v < flood {
		t.Errorf("%s = %v, want the deny chain's %v (≥ %d)", tierDefault, v, n, flood)
	}
}
