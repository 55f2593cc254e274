package chaos

// The upgrade step: node a's agent replaced by the previous release's binary (a downgrade) and
// that by the current one (an upgrade), under probes. The previous release programs another
// layout with other set names in the same table; each agent must replace the other's table in
// one transaction, so that no probe sees a window.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
)

// previousRelease is the commit of the release before the current table layout: the binary the
// upgrade step starts from and downgrades to. Move it to the last release's commit whenever a
// release changes the layout (the table's chains, sets or their names), so that the step keeps
// testing the upgrade users make. A commit, not a tag: the repository has no tags, and a commit
// is in every clone with full history. Its whole name, so that a machine that has built it once
// needs no history at all.
const previousRelease = "fa2b2c8a380678529e8df1cdc79c8ba75dec2cc1"

// previousBinary builds cmd/nftpolicy of previousRelease (CGO_ENABLED=0) from a temporary
// worktree, once per machine: the binary is kept as $NFTPOLICY_CACHE/nftpolicy-<commit>
// (/var/cache/nftpolicy by default).
func previousBinary(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("NFTPOLICY_CACHE")
	if cache == "" {
		cache = "/var/cache/nftpolicy"
	}
	commit := previousRelease
	bin := filepath.Join(cache, "nftpolicy-"+commit)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	repo, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("building the previous release needs the repository's git history: %v", err)
	}
	root := strings.TrimSpace(string(repo))
	if err := exec.Command("git", "-C", root, "rev-parse", "--verify", commit+"^{commit}").Run(); err != nil {
		t.Fatalf("the previous release %s is not in this clone (a shallow clone? `git fetch --unshallow`): %v", commit, err)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "previous")
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", wt, commit).CombinedOutput(); err != nil {
		t.Fatalf("git worktree add %s: %v\n%s", commit, err, out)
	}
	defer func() {
		if out, err := exec.Command("git", "-C", root, "worktree", "remove", "--force", wt).CombinedOutput(); err != nil {
			t.Errorf("git worktree remove: %v\n%s", err, out)
		}
	}()
	tmp := bin + ".tmp"
	build := exec.Command("go", "build", "-o", tmp, "./cmd/nftpolicy")
	build.Dir = wt
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the previous release %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// upgrade: node a's agent is stopped (SIGTERM: its table stays) and the previous release started
// in its place, which replaces the current layout with its own; then that one is stopped and
// the current binary started, which replaces it back. Nothing settles: every probe is judged.
// Each start's first transaction on the table must be the whole replacement (the table deleted
// and added in one), and the current binary's table must then equal the one before.
// Figures: each replacement's time from the start of the process and from its readiness.
func (su *suite) upgrade(t *testing.T, ctx context.Context) (time.Time, string) {
	prev := previousBinary(t)
	before, err := su.tableState(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	events := su.watchTable(t, "a")
	var figures []string
	for _, to := range []struct {
		what string
		bin  string // "": the current one
	}{{"downgrade to " + previousRelease[:7], prev}, {"upgrade to the current binary", ""}} {
		if err := su.agents["a"].Stop(); err != nil {
			t.Errorf("%s: stopping the agent of node a: %v", to.what, err)
		}
		drain(events)
		start := time.Now()
		ready, err := su.startAgentBin(ctx, "a", to.bin)
		if err != nil {
			t.Fatalf("%s: %v; its log (tail):\n%s", to.what, err, su.agents["a"].Tail(3000))
		}
		first := agentproc.NextTableEvent(t, events, 10*time.Second)
		n := 1 + len(drain(events))
		if !replaces(first) {
			t.Errorf("%s: the first transaction on the table is not a replacement of the table: %+v", to.what, first.Objects)
		}
		figures = append(figures, fmt.Sprintf("%s: table replaced %v after the start (%d transactions by /readyz, ready %.2f s after the start)",
			to.what, first.At.Sub(start).Round(time.Millisecond), n, ready.Seconds()))
	}
	if after, err := su.tableState(ctx, "a"); err != nil || after != before {
		t.Errorf("the table after the upgrade back differs from the one before (%v)\n--- after\n%s\n--- before\n%s", err, after, before)
	}
	return time.Now(), strings.Join(figures, "; ") + "; table after the upgrade equal to the one before"
}

// replaces reports whether a transaction deleted the table and added it again.
func replaces(e agentproc.TableEvent) bool {
	var del, add bool
	for _, o := range e.Objects {
		if o.Kind == "table" {
			del = del || o.Op == "delete"
			add = add || o.Op == "add"
		}
	}
	return del && add
}

// drain returns the events already queued.
func drain(events <-chan agentproc.TableEvent) []agentproc.TableEvent {
	var out []agentproc.TableEvent
	for {
		select {
		case e := <-events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// startAgentBin is startAgent with the binary of an earlier release, bin ("": the current one,
// startAgent itself), which takes no --lock-file.
func (su *suite) startAgentBin(ctx context.Context, node, bin string) (time.Duration, error) {
	if bin == "" {
		return su.startAgent(ctx, node)
	}
	dir := filepath.Join(su.dir, fmt.Sprintf("agent-%d", len(su.procs)+1))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return 0, err
	}
	p, err := agentproc.Start(agentproc.Config{Bin: bin, Node: node, NetNS: su.cl.Node(node).NetNS, Server: su.s,
		Dir: dir, Args: agentArgs, NoLockFile: true})
	if err != nil {
		return 0, err
	}
	su.procs = append(su.procs, p)
	su.agents[node] = p
	start := time.Now()
	err = p.WaitReady(ctx, time.Minute)
	return time.Since(start), err
}
