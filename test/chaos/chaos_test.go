package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	// agentDowntime is how long a SIGKILLed agent stays down before it is started again.
	agentDowntime = 2 * time.Second
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
