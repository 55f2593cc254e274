package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// logBuffer collects the loop's log lines; the loop writes from its goroutine.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond every millisecond until it holds and returns how long that took; it fails
// the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// TestRepairOfChangesByOthers runs the agent's loop with the real graph, dataplane and table
// monitor, as Run wires them, with the default resync interval (90 s), on node a of a harness
// cluster: y/client may not reach x/server (only pods labelled role=peer may). Ten applies of the
// agent's own (peers joining the selector) report nothing. Then another process (nft, inside the
// node's namespace) flushes the table, deletes it, deletes the server's dispatch element and
// inserts an accepting rule into a base chain of ours: each time the loop repairs the table
// without reading it back (the listing equals the one before, the client is blocked again),
// counts one repair with trigger "event" and one foreign change, and logs the nft process's pid
// and command. The repair commits within 1 s of the change each time (a generous bound,
// timed between the two transactions by a second event monitor, agentproc.TimeRepair; the
// figures are logged). Without the monitor the table would stay open until the periodic resync,
// 90 s later: the test would fail.
func TestRepairOfChangesByOthers(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a"}})
	server, err := c.AddPod("a", "x", "server")
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.AddPod("a", "y", "client")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*netns.Pod{server, client} {
		if err := c.Serve(p.NetNS, netns.TCP, 80); err != nil {
			t.Fatal(err)
		}
	}
	node := c.Node("a")
	dp, fd := openApplier(t, node)
	changes := make(chan ruleset.TableChange, 16)
	mon, err := dp.Monitor(changes)
	if err != nil {
		t.Fatal(err)
	}

	m := NewMetrics(prometheus.NewRegistry())
	var logs logBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("loop log:\n%s", logs.String())
		}
	})
	updates := make(chan []model.Update, 16)
	testenv.Go(t, "table monitor", mon.Run)
	testenv.Go(t, "loop", func(ctx context.Context) error {
		return Loop(ctx, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: m, TableChanges: changes},
			updates, graph.New(graph.Config{NodeName: "a"}), nftAdapter{Applier: dp})
	})

	endpoint := func(p *netns.Pod, labels map[string]string) model.Update {
		return model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: p.Namespace, Name: p.Name},
			Node: p.Node, Labels: model.LabelsOf(labels), Addrs: p.Addrs}}
	}
	updates <- []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}},
		model.NamespaceSet{Namespace: model.Namespace{Name: "y", Labels: map[string]string{"ns": "y"}}},
		endpoint(server, map[string]string{"app": "server"}),
		endpoint(client, map[string]string{"app": "client"}),
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "peers-only"},
			Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "all()", ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "role == 'peer'"}}}}},
		model.SyncStatusUpdate{Status: model.InSync},
	}
	transactions := func() float64 { return testutil.ToFloat64(m.Transactions) }
	waitFor(t, 10*time.Second, "the first commit", func() bool { return transactions() >= 1 })
	// the agent's own commits: peers on another node join the selector, one apply each
	for i := range 10 {
		updates <- []model.Update{model.EndpointSet{Endpoint: model.Endpoint{
			Key: model.EndpointKey{Namespace: "x", Name: fmt.Sprintf("peer-%d", i)}, Node: "b",
			Labels: model.LabelsOf(map[string]string{"role": "peer"}), Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, 1, byte(10 + i)})}}}}
		waitFor(t, 10*time.Second, fmt.Sprintf("own apply %d", i+1), func() bool { return transactions() >= float64(2+i) })
	}

	list := func() string {
		out, err := netns.Exec(context.Background(), node.NetNS, "nft", "list", "table", "inet", nft.DefaultTable)
		if err != nil {
			t.Fatalf("nft list table: %v: %s", err, out)
		}
		return testenv.NormalizeListing(string(out))
	}
	before := list()
	reaches := func(from, to *netns.Pod) bool {
		ok, err := netns.Probe(context.Background(), from.NetNS, to.IP(false), netns.TCP, 80, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if reaches(client, server) || !reaches(server, client) {
		t.Fatalf("before any change by others: client→server %v, server→client %v; want false, true",
			reaches(client, server), reaches(server, client))
	}
	repairs := func(trigger string) float64 { return testutil.ToFloat64(m.DriftRepairs.WithLabelValues(trigger)) }
	observed := agentproc.WatchTable(t, fd, nft.DefaultTable) // from here on: the changes and the repairs

	for i, tc := range []struct {
		name   string
		script string
	}{
		{"table flushed", "flush table inet nftpolicy"},
		{"table deleted", "delete table inet nftpolicy"},
		{"the server's dispatch element deleted", fmt.Sprintf("delete element inet nftpolicy ingress_v4 { %s }", server.IP(false))},
		{"accepting rule inserted into forward_ingress", "insert rule inet nftpolicy forward_ingress accept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, _, _ := agentproc.TimeRepair(t, node.NetNS, tc.script, observed, time.Second)
			waitFor(t, 10*time.Second, "the repair's count", func() bool { return repairs(TriggerEvent) >= float64(i+1) })
			if got := list(); got != before {
				t.Errorf("table after the repair differs from the table before\n--- after\n%s\n--- before\n%s", got, before)
			}
			if got := testutil.ToFloat64(m.ForeignChanges); got != float64(i+1) {
				t.Errorf("nftpolicy_table_foreign_changes_total = %v, want %d", got, i+1)
			}
			if want := fmt.Sprintf("pid %d (nft)", pid); !strings.Contains(logs.String(), want) {
				t.Errorf("no log line names %q:\n%s", want, logs.String())
			}
			if reaches(client, server) {
				t.Errorf("client reaches server after the repair")
			}
		})
	}
	if got := repairs(TriggerPeriodic) + repairs(TriggerRetry); got != 0 {
		t.Errorf("%v periodic or retry repairs, want 0", got)
	}
	if got := testutil.ToFloat64(m.Resyncs); got != 0 {
		t.Errorf("nftpolicy_resyncs_total = %v, want 0 (a reported change is repaired without a read-back)", got)
	}
	if got := testutil.ToFloat64(m.TableEventsLost); got != 0 {
		t.Errorf("nftpolicy_table_events_lost_total = %v, want 0", got)
	}
}

// TestLoopAnswersTableChanges: the loop answers the reports of changes by others that are queued
// together with one repair — a Repair (no read-back) when one of them reports a change, a Resync
// when they only report that changes may have gone unreported — counted as foreign changes or
// lost reports, the repair labelled "event"; before in-sync it counts and logs them and leaves
// the table to the first commit.
func TestLoopAnswersTableChanges(t *testing.T) {
	change := func(pid uint32) ruleset.TableChange {
		return ruleset.TableChange{PID: pid, Comm: "nft", Gen: 7,
			Objects: []ruleset.ObjectChange{{Op: "delete", Kind: "element", Name: "ingress_v4", Count: 1}}}
	}
	for _, tc := range []struct {
		name             string
		inSync           bool
		changes          []ruleset.TableChange
		repairs, resyncs int
		foreign, lost    float64
		log              string
	}{
		{"one change", true, []ruleset.TableChange{change(41)}, 1, 0, 1, 0, "pid 41 (nft), generation 7: delete element in set ingress_v4"},
		{"a burst, one repair", true, []ruleset.TableChange{change(41), change(42), change(43), {Lost: true, Reason: "the event socket overflowed"}, change(44)},
			1, 0, 4, 1, "pid 41 (nft), generation 7: delete element in set ingress_v4 | pid 42 (nft)"},
		{"changes may have gone unreported", true, []ruleset.TableChange{{Lost: true, Reason: "the event socket overflowed"}},
			0, 1, 0, 1, "changes may have gone unreported: the event socket overflowed"},
		{"before in-sync", false, []ruleset.TableChange{change(41)}, 0, 0, 1, 0, "before the first commit; the first commit replaces it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry())
			dp := &fakeProgrammer{applied: make(chan struct{}, 10), resynced: make(chan struct{}, 10)}
			updates := make(chan []model.Update)
			changes := make(chan ruleset.TableChange, 16)
			var logs logBuffer
			testenv.Go(t, "loop", func(ctx context.Context) error {
				return Loop(ctx, Config{ResyncInterval: time.Hour, Metrics: m, TableChanges: changes,
					Logger: slog.New(slog.NewTextHandler(&logs, nil))}, updates, &fakeCalc{}, dp)
			})
			// The loop takes a batch and, in sync, blocks in Apply on the held lock: the reports
			// are all queued before it looks at them.
			dp.mu.Lock()
			batch := []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}}
			if tc.inSync {
				batch = append(batch, model.SyncStatusUpdate{Status: model.InSync})
			}
			updates <- batch
			for _, c := range tc.changes {
				changes <- c
			}
			dp.mu.Unlock()
			if tc.inSync {
				wait(t, dp.applied, "the first apply")
				waitFor(t, 10*time.Second, "the repair", func() bool {
					return testutil.ToFloat64(m.DriftRepairs.WithLabelValues(TriggerEvent)) >= 1
				})
				if n := len(changes); n != 0 {
					t.Errorf("%d reports still queued at the repair, want 0 (one repair answers a burst)", n)
				}
			} else {
				waitFor(t, 10*time.Second, "the log line", func() bool { return strings.Contains(logs.String(), tc.log) })
			}
			dp.mu.Lock()
			repairs, resyncs := dp.repairs, dp.resyncs
			dp.mu.Unlock()
			if repairs != tc.repairs || resyncs != tc.resyncs {
				t.Errorf("%d repairs and %d resyncs, want %d and %d", repairs, resyncs, tc.repairs, tc.resyncs)
			}
			// the fake's Resync always finds drift
			if got := testutil.ToFloat64(m.DriftRepairs.WithLabelValues(TriggerEvent)); got != float64(tc.repairs+tc.resyncs) {
				t.Errorf("nftpolicy_drift_repairs_total{trigger=event} = %v, want %d", got, tc.repairs+tc.resyncs)
			}
			if got := testutil.ToFloat64(m.ForeignChanges); got != tc.foreign {
				t.Errorf("nftpolicy_table_foreign_changes_total = %v, want %v", got, tc.foreign)
			}
			if got := testutil.ToFloat64(m.TableEventsLost); got != tc.lost {
				t.Errorf("nftpolicy_table_events_lost_total = %v, want %v", got, tc.lost)
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log lacks %q:\n%s", tc.log, logs.String())
			}
		})
	}
}

// openApplier opens a kernel Applier on node's network namespace and returns it with the
// namespace's descriptor; both are closed when t ends.
func openApplier(t *testing.T, node *netns.Node) (*kernel.Applier, int) {
	t.Helper()
	fd, err := node.FD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	dp, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp, fd
}
