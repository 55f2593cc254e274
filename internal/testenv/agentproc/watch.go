package agentproc

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// TableEvent is one transaction on a table as WatchTable saw it, and when it arrived: within
// microseconds of the kernel's commit.
type TableEvent struct {
	ruleset.TableChange
	At time.Time
}

// WatchTable reports every transaction on the inet table named table in the network namespace
// netnsFD refers to — the agent's own included, since it watches through a netlink connection
// of its own — until the test ends. Tests time a repair by it: from the commit of the change to
// the commit of the repair, with neither process's start-up or polling in between.
func WatchTable(tb testing.TB, netnsFD int, table string) <-chan TableEvent {
	tb.Helper()
	c, err := ruleset.Open(netnsFD)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	changes := make(chan ruleset.TableChange, 64)
	m, err := c.Monitor(table, changes)
	if err != nil {
		tb.Fatal(err)
	}
	events := make(chan TableEvent, 64)
	testenv.Go(tb, "table watch", m.Run)
	testenv.Go(tb, "table watch stamps", func(ctx context.Context) error {
		for {
			select {
			case c := <-changes:
				select {
				case events <- TableEvent{c, time.Now()}:
				case <-ctx.Done():
					return nil
				}
			case <-ctx.Done():
				return nil
			}
		}
	})
	return events
}

// NextTableEvent waits up to timeout for the next event of WatchTable.
func NextTableEvent(tb testing.TB, events <-chan TableEvent, timeout time.Duration) TableEvent {
	tb.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(timeout):
		tb.Fatalf("no transaction on the table within %v", timeout)
		return TableEvent{}
	}
}

// TimeRepair runs `nft script` in the network namespace netnsName — another process changing the
// agent's table, in one transaction — and waits for the next two transactions events (of
// WatchTable) reports: nft's, then the agent's repair, a Replace (the table deleted and added
// again). It logs the time from the change to the repair as WatchTable saw them (their commits,
// unless it read both at once when delayed: then less) and an upper bound of it, from the start
// of nft (nft's start-up included), and fails the test if the former exceeds limit, if nft
// fails, or if either transaction does not come within 10 s. It returns nft's pid and the two
// transactions.
func TimeRepair(tb testing.TB, netnsName, script string, events <-chan TableEvent, limit time.Duration) (pid uint32, change, repair TableEvent) {
	tb.Helper()
	cmd := exec.Command("ip", "netns", "exec", netnsName, "nft", script)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	pid = uint32(cmd.Process.Pid) // ip netns exec execs nft in this process
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("nft %s: %v: %s", script, err, out.String())
	}
	change = NextTableEvent(tb, events, 10*time.Second)
	if change.PID != pid {
		tb.Fatalf("first transaction after nft %s: %v; want nft's (pid %d)", script, change.TableChange, pid)
	}
	repair = NextTableEvent(tb, events, 10*time.Second)
	replace := slices.ContainsFunc(repair.Objects, func(o ruleset.ObjectChange) bool { return o.Op == "delete" && o.Kind == "table" })
	if repair.PID == pid || !replace {
		tb.Fatalf("transaction after nft's: %v; want the agent's Replace", repair.TableChange)
	}
	took := repair.At.Sub(change.At)
	tb.Logf("nft %s: repaired %v after the change (%v after nft started)", script, took, repair.At.Sub(start))
	if took > limit {
		tb.Errorf("nft %s: repaired %v after the change; want within %v", script, took, limit)
	}
	return pid, change, repair
}
