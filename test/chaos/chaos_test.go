package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
)

// The acceptance's bounds, the only wall-clock assertions of the suite.
const (
	// changeBound: after the API server returns from an outage, a change is enforced within it.
	changeBound = 5 * time.Second
	// restoreBound: a table flushed or deleted by another process is restored within it.
	restoreBound = time.Second
)

const (
	// agentDowntime is how long a SIGKILLed agent stays down before it is started again.
	agentDowntime = 2 * time.Second
	// apiDowntime is how long the API server stays down.
	apiDowntime = 20 * time.Second
	// commitTimeout is how long the agents may take to commit a step's writes before the step
	// fails as "never enforced".
	commitTimeout = time.Minute
	// stepTimeout bounds one step.
	stepTimeout = 3 * time.Minute
)

// TestChaos runs the faults one after the other on one fixture, probing throughout; each step
// judges its own probes and logs its figures, and the last lines of the test log them all.
func TestChaos(t *testing.T) {
	su := newSuite(t)
	defer func() { t.Logf("figures:\n  %s", strings.Join(su.figures, "\n  ")) }()
	steps := []struct {
		name string
		run  func(t *testing.T, ctx context.Context) (quiet time.Time, figures string)
	}{
		{"agent SIGKILL and restart", su.agentKill},
		{"API server outage", su.apiOutage},
		{"table flushed", func(t *testing.T, ctx context.Context) (time.Time, string) {
			return su.tableFault(t, ctx, "a", "flush")
		}},
		{"table deleted", func(t *testing.T, ctx context.Context) (time.Time, string) {
			return su.tableFault(t, ctx, "b", "delete")
		}},
		{"odd objects", su.oddObjects},
		{"two agents on one node", su.overlap},
		{"paused agent", su.pausedAgent},
		{"IP reuse", su.ipReuse},
		{"upgrade and downgrade", su.upgrade},
	}
	for _, st := range steps {
		completed := false
		t.Run(st.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
			defer cancel()
			start := time.Now()
			quiet, figures := st.run(t, ctx)
			su.judge(t, ctx, st.name, start, quiet, figures)
			completed = true
		})
		if !completed {
			t.Fatalf("step %q ended early; the fixture is in an unknown state, the later steps are not run", st.name)
		}
	}
}

// judge ends a step: it waits until every cell has been probed once after quiet (the end of the
// step's last fault or settle window), then judges every probe that started since start, checks
// that no agent exited, and records the figures.
func (su *suite) judge(t *testing.T, ctx context.Context, name string, start, quiet time.Time, figures string) {
	t.Helper()
	if _, err := su.pr.waitEach(ctx, quiet, time.Minute, func(probe) bool { return true }); err != nil {
		t.Fatalf("probing after the step: %v", err)
	}
	ps, err := su.pr.since(start)
	if err != nil {
		t.Fatal(err)
	}
	v := su.tl.judge(ps, start)
	var unjudged []string
	for _, c := range su.pr.cells {
		if v.cells[c] == 0 {
			unjudged = append(unjudged, c.String())
		}
	}
	if len(unjudged) > 0 {
		t.Errorf("cells with no probe outside settle windows: %s", strings.Join(unjudged, "; "))
	}
	if v.leaks+v.drops > 0 {
		wrong := v.wrong
		if len(wrong) > 40 {
			wrong = append(wrong[:40:40], fmt.Sprintf("  … and %d more", len(v.wrong)-40))
		}
		t.Errorf("%d leaks and %d drops (times from the step's start):\n%s\nexpected at the end of the step ('.' connected, 'X' blocked):\n%s",
			v.leaks, v.drops, strings.Join(wrong, "\n"), su.table(su.allowed))
	}
	crashes := 0
	for node, p := range su.agents {
		if exited, err := p.Exited(); exited {
			crashes++
			t.Errorf("the agent of node %s exited: %v; its log (tail):\n%s", node, err, p.Tail(4000))
			su.restartAgent(t, node)
		}
	}
	line := fmt.Sprintf("%s: %s; %s, %d crashes (%.1f s)", name, figures, v, crashes, time.Since(start).Seconds())
	su.figures = append(su.figures, line)
	t.Log(line)
}

// change makes allowed the expectation from at on; the probes of the cells it changes are not
// judged from at to settled.
func (su *suite) change(at, settled time.Time, allowed func(from, to string) bool) []cell {
	old := su.allowed
	var changed []cell
	for _, c := range su.pr.cells {
		if old(c.from, c.to) != allowed(c.from, c.to) {
			changed = append(changed, c)
		}
	}
	su.tl = append(su.tl, phase{at: at, settled: settled, want: su.table(allowed),
		settling: func(c cell) bool { return old(c.from, c.to) != allowed(c.from, c.to) }})
	su.allowed = allowed
	return changed
}

// agentKill: the agent of node a is killed (SIGKILL), stays down agentDowntime and is started
// again. Its table stays in force all along, so nothing settles: every probe is judged.
func (su *suite) agentKill(t *testing.T, ctx context.Context) (time.Time, string) {
	before, err := su.tableState(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := su.agents["a"].Kill(); err == nil {
		t.Fatal("the agent of node a exited cleanly on SIGKILL")
	}
	time.Sleep(agentDowntime)
	if during, err := su.tableState(ctx, "a"); err != nil || during != before {
		t.Errorf("the table of node a changed while its agent was down (%v)\n--- during\n%s\n--- before\n%s", err, during, before)
	}
	ready, err := su.startAgent(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if after, err := su.tableState(ctx, "a"); err != nil || after != before {
		t.Errorf("the restarted agent's table differs from the one before (%v)\n--- after\n%s\n--- before\n%s", err, after, before)
	}
	return time.Now(), fmt.Sprintf("agent of node a killed, down %v, ready %.2f s after its restart, table unchanged",
		agentDowntime, ready.Seconds())
}

// apiOutage: the API server is killed and started again after apiDowntime. The agents keep
// their tables meanwhile (every probe judged). As soon as it is back, a policy is deleted
// (y/isolate-other: y/other-b accepts everyone but y/cli-a, whose egress is restricted) and a
// pod relabelled (x/cli-b app=other: web pods no longer accept it); both agents must have
// committed the change within changeBound of the API server's return, and the cells it changes
// settle until then.
func (su *suite) apiOutage(t *testing.T, ctx context.Context) (time.Time, string) {
	down := time.Now()
	if err := su.s.RestartAPIServer(ctx, apiDowntime); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	c := su.s.Client
	if err := c.NetworkingV1().NetworkPolicies("y").Delete(ctx, "isolate-other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Pods("x").Patch(ctx, "cli-b", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"other"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	changed := su.change(back, back.Add(changeBound), afterOutageAllowed)
	committed, err := su.waitCommitted(ctx, commitTimeout)
	// when the probes first saw each changed cell as it now should be (when the agents have not
	// committed, what the probes saw meanwhile)
	wait := commitTimeout
	if err != nil {
		wait = 0
	}
	seen, serr := su.pr.waitEach(ctx, back, wait, func(p probe) bool {
		return p.ok == afterOutageAllowed(p.from, p.to) || !slices.Contains(changed, p.cell)
	})
	observed := "NOT by then"
	if serr == nil {
		observed = fmt.Sprintf("by %.2f s", seen.Sub(back).Seconds())
	}
	figures := fmt.Sprintf("API server killed, started again after %v, ready %.1f s after the kill; a policy deleted and a pod relabelled %.2f s after its return; probes saw every changed cell (%d) so %s",
		apiDowntime, back.Sub(down).Seconds(), written.Sub(back).Seconds(), len(changed), observed)
	if err != nil {
		t.Errorf("the change made after the API server's return is not committed %v after it: %v", time.Since(back).Round(time.Second), err)
		for node := range su.agents {
			su.restartAgent(t, node)
		}
		return time.Now(), figures + fmt.Sprintf("; NOT committed by both agents (barrier) after %v: agents restarted", commitTimeout)
	}
	took := committed.Sub(back)
	if took > changeBound {
		t.Errorf("the agents committed the change %.2f s after the API server's return; the acceptance bound is %v", took.Seconds(), changeBound)
	}
	return maxTime(committed, back.Add(changeBound)), figures + fmt.Sprintf("; committed by both agents (barrier) %.2f s after the return", took.Seconds())
}

// afterOutageAllowed: baseAllowed without y/isolate-other, x/cli-b relabelled app=other.
func afterOutageAllowed(from, to string) bool {
	switch {
	case from == "y/cli-a":
		return isWeb(to)
	case isWeb(to):
		return from == "x/cli-a"
	}
	return true
}

// tableFault: another process (nft in the node's namespace) flushes or deletes the table. The
// agent must repair it within restoreBound of the change's commit — timed by
// agentproc.TimeRepair from the kernel's reports of both transactions, in a subtest of its own —
// and the table must then equal the one before. The cells from or to the node's pods settle
// from nft's start to restoreBound after the change's commit.
func (su *suite) tableFault(t *testing.T, ctx context.Context, node, verb string) (time.Time, string) {
	n := su.cl.Node(node)
	before, err := su.tableState(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	onNode := func(c cell) bool { return su.byKey[c.from].Node == node || su.byKey[c.to].Node == node }
	start := time.Now()
	su.tl = append(su.tl, phase{at: start, settled: start.Add(restoreBound), want: su.table(su.allowed), settling: onNode})
	var change, repair agentproc.TableEvent
	t.Run("repair", func(t *testing.T) {
		events := su.watchTable(t, node)
		_, change, repair = agentproc.TimeRepair(t, n.NetNS, verb+" table inet nftpolicy", events, restoreBound)
	})
	if repair.At.IsZero() {
		su.restartAgent(t, node)
		return time.Now(), fmt.Sprintf("`nft %s table` on node %s: NOT repaired (agent restarted)", verb, node)
	}
	settled := change.At.Add(restoreBound)
	su.tl[len(su.tl)-1].settled = settled
	if after, err := su.tableState(ctx, node); err != nil || after != before {
		t.Errorf("the repaired table differs from the one before (%v)\n--- after\n%s\n--- before\n%s", err, after, before)
	}
	return maxTime(time.Now(), settled), fmt.Sprintf("`nft %s table` on node %s: repaired %v after the change's commit (%v after nft started), equal to the one before",
		verb, node, repair.At.Sub(change.At).Round(time.Microsecond), repair.At.Sub(start).Round(time.Microsecond))
}

// watchTable reports the transactions on node's nftpolicy table, as the kernel reports them,
// until the test ends.
func (su *suite) watchTable(t *testing.T, node string) <-chan agentproc.TableEvent {
	t.Helper()
	fd, err := su.cl.Node(node).FD()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	return agentproc.WatchTable(t, fd, "nftpolicy")
}
