package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestAgentRepairsChangesByOthers runs the agent binary with the default resync interval (90 s)
// on a node where y-repair/client may not reach x-repair/server (default-deny ingress). Another
// process (nft in the node's namespace) flushes the table, then deletes it: each time the table
// is repaired within 1 s (a generous bound, timed by agentproc.TimeRepair; the figures are
// logged) — `nft list table` then equals the listing before — the client is blocked again, the
// log names the nft process, and /metrics counts the repairs with trigger "event". (Other
// changes take the same path: internal/agent's TestRepairOfChangesByOthers.)
func TestAgentRepairsChangesByOthers(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := context.Background()
	an := newAgentNode(t, s, "repair", podSpec{"x-repair", "server", true}, podSpec{"y-repair", "client", true})
	server, client, node := an.pods["server"], an.pods["client"], an.node
	denyAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: "x-repair"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if _, err := s.Client.NetworkingV1().NetworkPolicies("x-repair").Create(ctx, denyAll, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	agent := an.start()
	reaches := func(from, to *netns.Pod) bool {
		ok, err := netns.Probe(ctx, from.NetNS, to.IP(false), netns.TCP, 80, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for deadline := time.Now().Add(15 * time.Second); reaches(client, server); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("client still reaches server 15 s after the default-deny policy was created")
		}
	}
	list := func() string {
		out, err := netns.Exec(ctx, node.NetNS, "nft", "list", "table", "inet", "nftpolicy")
		if err != nil {
			return "" // the table is gone (deleted, not yet restored)
		}
		return testenv.NormalizeListing(string(out))
	}
	before := list()
	if !strings.Contains(before, server.IP(false).String()) {
		t.Fatalf("the table lacks the server's dispatch element:\n%s", before)
	}
	fd, err := node.FD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	observed := agentproc.WatchTable(t, fd, "nftpolicy")

	for _, tc := range []struct {
		name   string
		script string
	}{
		{"table flushed", "flush table inet nftpolicy"},
		{"table deleted", "delete table inet nftpolicy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, _, _ := agentproc.TimeRepair(t, node.NetNS, tc.script, observed, time.Second)
			if got := list(); got != before {
				t.Errorf("table after the repair differs from the table before\n--- after\n%s\n--- before\n%s", got, before)
			}
			want := fmt.Sprintf("pid %d (nft)", pid) // logged right after the repair's commit
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				log, err := os.ReadFile(agent.LogPath)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(log), want) {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("the agent's log does not name %q", want)
					break
				}
			}
			if reaches(client, server) {
				t.Errorf("client reaches server after the repair")
			}
		})
	}
	_, page, err := agent.Get(agentproc.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	for sample, want := range map[string]float64{
		`nftpolicy_drift_repairs_total{trigger="event"}`:    2,
		`nftpolicy_drift_repairs_total{trigger="periodic"}`: 0,
		`nftpolicy_table_foreign_changes_total`:             2,
		`nftpolicy_table_events_lost_total`:                 0,
	} {
		if got, ok := testenv.MetricValue(page, sample); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", sample, got, ok, want)
		}
	}
}
