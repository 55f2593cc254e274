package chaos

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
)

// overlapTime is how long two agents run side by side on one node in the overlap step: a
// DaemonSet rolling update with maxSurge 1 runs the new pod beside the old one until the new one
// is ready and the old one has ended.
const overlapTime = 5 * time.Second

// overlap: a second agent starts on node a beside the running one, sharing its lock file (as the
// pods of a DaemonSet share the node's /run/nftpolicy; its servers on other addresses, so that
// the test asks each), and must turn ready in standby; overlapTime later the first is stopped
// (SIGTERM) and the second takes over. Nothing settles: the first's table stays in force until
// the second's first commit replaces it with an equal one, so every probe is judged. While both
// run, no transaction touches the table (neither fights the other), the second has committed
// nothing and repaired nothing, and the first has repaired nothing. Figure: the handover, from
// the first's exit to the second's first commit (the kernel's report of it).
func (su *suite) overlap(t *testing.T, ctx context.Context) (time.Time, string) {
	first := su.agents["a"]
	before, err := su.tableState(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	events := su.watchTable(t, "a")
	firstRepairs := driftRepairs(t, first)
	second, err := su.launch("a", true)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := second.WaitReady(ctx, time.Minute); err != nil {
		t.Fatalf("the second agent never turned ready in standby: %v", err)
	}
	ready := time.Since(start)
	time.Sleep(max(overlapTime-ready, 0))
	select {
	case e := <-events:
		t.Errorf("a transaction on node a's table while two agents ran: %s", e.String())
	default:
	}
	if n := metric(t, second, "nftpolicy_transactions_total") + driftRepairs(t, second); n != 0 {
		t.Errorf("the standing-by agent committed or repaired %v times while the first ran", n)
	}
	if held := metric(t, second, "nftpolicy_lock_held"); held != 0 {
		t.Errorf("the standing-by agent says it holds the lock (nftpolicy_lock_held %v)", held)
	}
	if n := driftRepairs(t, first) - firstRepairs; n != 0 {
		t.Errorf("the first agent repaired its table %v times while the second stood by", n)
	}
	term := time.Now()
	if err := first.Stop(); err != nil {
		t.Errorf("the first agent's exit on SIGTERM: %v", err)
	}
	exited := time.Now()
	su.agents["a"] = second
	takeover := agentproc.NextTableEvent(t, events, commitTimeout)
	if _, err := su.waitCommitted(ctx, commitTimeout); err != nil {
		t.Errorf("the second agent does not commit the cluster's writes after taking over: %v", err)
	}
	if after, err := su.tableState(ctx, "a"); err != nil || after != before {
		t.Errorf("the second agent's table differs from the first's (%v)\n--- after\n%s\n--- before\n%s", err, after, before)
	}
	checkLog(t, second, "waiting for the lock held by another agent", "took the lock after")
	return time.Now(), fmt.Sprintf("a second agent on node a ready in standby %.2f s after its start, no transaction while both ran %v; "+
		"the first stopped %.2f s after SIGTERM, the second's first commit %v after its exit",
		ready.Seconds(), overlapTime, exited.Sub(term).Seconds(), takeover.At.Sub(exited).Round(time.Millisecond))
}

// metric reads one sample of an agent's metrics (0 when absent).
func metric(t *testing.T, p *agentproc.Process, sample string) float64 {
	t.Helper()
	_, page, err := p.Get(agentproc.MetricsURL)
	if err != nil {
		t.Fatalf("the metrics of the agent of node %s: %v", p.Node, err)
	}
	v, _ := testenv.MetricValue(page, sample)
	return v
}

// driftRepairs is the sum of an agent's nftpolicy_drift_repairs_total over its triggers.
func driftRepairs(t *testing.T, p *agentproc.Process) float64 {
	t.Helper()
	var n float64
	for _, trigger := range []string{"event", "periodic", "retry"} {
		n += metric(t, p, `nftpolicy_drift_repairs_total{trigger="`+trigger+`"}`)
	}
	return n
}

// checkLog fails the test unless the agent's log holds each of lines.
func checkLog(t *testing.T, p *agentproc.Process, lines ...string) {
	t.Helper()
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if !strings.Contains(string(b), l) {
			t.Errorf("the log of the agent of node %s lacks %q", p.Node, l)
		}
	}
}
