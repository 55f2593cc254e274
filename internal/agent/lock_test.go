package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

func TestLockPath(t *testing.T) {
	for _, tt := range []struct{ file, table, want string }{
		{"/run/nftpolicy/agent.lock", "nftpolicy", "/run/nftpolicy/agent.nftpolicy.lock"},
		{"/run/nftpolicy/agent.lock", "other", "/run/nftpolicy/agent.other.lock"},
		{"/tmp/lock", "t", "/tmp/lock.t"},
		{"", "nftpolicy", ""},
	} {
		if got := LockPath(tt.file, tt.table); got != tt.want {
			t.Errorf("LockPath(%q, %q) = %q, want %q", tt.file, tt.table, got, tt.want)
		}
	}
}

// TestLockOneHolderAtATime: of two agents on one lock file the first takes it at once, the second
// waits for it and takes it once the first releases it; an agent of another table does not wait.
func TestLockOneHolderAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "agent.nftpolicy.lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, firstProgramming, err := takeLock(ctx, path, discard(), NopMetrics())
	if err != nil || firstProgramming != nil || !first.Held() {
		t.Fatalf("first agent: err %v, programming %v, held %v; want the lock at once", err, firstProgramming, first.Held())
	}
	m := NopMetrics()
	second, programming, err := takeLock(ctx, path, discard(), m)
	if err != nil || programming == nil {
		t.Fatalf("second agent: err %v, programming %v; want a wait", err, programming)
	}
	select {
	case <-programming:
		t.Fatal("the second agent took the lock while the first held it")
	case <-time.After(5 * lockPoll):
	}
	if second.Held() || testutil.ToFloat64(m.LockHeld) != 0 {
		t.Fatal("the second agent says it holds the lock")
	}
	other, otherProgramming, err := takeLock(ctx, LockPath(filepath.Join(filepath.Dir(path), "agent.lock"), "other"), discard(), NopMetrics())
	if err != nil || otherProgramming != nil {
		t.Fatalf("an agent of another table: err %v, programming %v; want its own lock at once", err, otherProgramming)
	}
	released := time.Now()
	if err := first.release(); err != nil {
		t.Fatal(err)
	}
	wait(t, programming, "the second agent to take the lock")
	if !second.Held() || testutil.ToFloat64(m.LockHeld) != 1 {
		t.Fatal("the second agent took the lock but does not say so")
	}
	if w := testutil.ToFloat64(m.LockWait); w < (5 * lockPoll).Seconds() {
		t.Fatalf("nftpolicy_lock_wait_seconds = %v, want ≥ %v", w, (5 * lockPoll).Seconds())
	}
	t.Logf("handover %v after the release", time.Since(released).Round(time.Millisecond))
	cancel()
	if err := second.release(); err != nil {
		t.Fatal(err)
	}
	if err := other.release(); err != nil {
		t.Fatal(err)
	}
}

// TestLoopStandsByUntilTheLock: an agent whose lock another holds syncs, builds the table from
// everything the graph emits and turns ready, but writes nothing — no apply, no periodic resync,
// no repair of the other's commits — until the lock is free; then it writes the built table
// whole with one Repair and no Apply, and later batches are applied.
func TestLoopStandsByUntilTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.nftpolicy.lock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, _, err := takeLock(ctx, path, discard(), NopMetrics())
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	second, programming, err := takeLock(ctx, path, discard(), m)
	if err != nil || programming == nil {
		t.Fatalf("err %v, programming %v; want a wait", err, programming)
	}
	h := &Health{}
	dp := &fakeProgrammer{applied: make(chan struct{}, 10), resynced: make(chan struct{}, 10)}
	updates := make(chan []model.Update)
	changes := make(chan ruleset.TableChange, 4)
	done := make(chan error)
	go func() {
		done <- Loop(ctx, Config{ResyncInterval: 10 * time.Millisecond, Metrics: m, Health: h, TableChanges: changes,
			Programming: programming}, updates, &fakeCalc{}, dp)
	}()
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}}
	updates <- []model.Update{model.SyncStatusUpdate{Status: model.InSync}, model.SourceVersion{Resource: "pods", ResourceVersion: "7"}}
	changes <- ruleset.TableChange{PID: 41, Comm: "nftpolicy", Gen: 3}
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "y"}}}
	time.Sleep(100 * time.Millisecond) // periodic resyncs would have run meanwhile
	if !h.Ready() {
		t.Fatalf("not ready while standing by in sync: %s", h.NotReady(time.Now()))
	}
	dp.mu.Lock()
	calls := dp.applies + dp.resyncs + dp.repairs
	dp.mu.Unlock()
	if calls != 0 || testutil.ToFloat64(m.Transactions) != 0 || testutil.ToFloat64(m.InSync) != 0 {
		t.Fatalf("standing by: %d programmer calls, %v transactions, in_sync %v; want none", calls,
			testutil.ToFloat64(m.Transactions), testutil.ToFloat64(m.InSync))
	}
	if got := testutil.ToFloat64(m.SourceVersion.WithLabelValues("pods")); got != 0 {
		t.Fatalf("nftpolicy_source_resource_version{pods} = %v while standing by, want none published", got)
	}
	if err := first.release(); err != nil {
		t.Fatal(err)
	}
	// the periodic resyncs (10 ms) follow the first commit at once: wait for it to have happened
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(m.Transactions) < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no first commit once the lock is free")
		}
	}
	dp.mu.Lock()
	applies, repairs, built := dp.applies, dp.repairs, dp.built
	dp.mu.Unlock()
	if emitted := testutil.ToFloat64(m.DataplaneMessages); applies != 0 || repairs != 1 || float64(built) != emitted || built < 2 {
		t.Fatalf("took over with %d applies and %d repairs of %d built messages, want the table written whole once, "+
			"built of all %v the graph emitted meanwhile", applies, repairs, built, emitted)
	}
	if n := testutil.ToFloat64(m.DriftRepairs.WithLabelValues(TriggerEvent)); n != 0 || testutil.ToFloat64(m.InSync) != 1 {
		t.Fatalf("the takeover counted as %v drift repairs, in_sync %v; want none, 1", n, testutil.ToFloat64(m.InSync))
	}
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(m.SourceVersion.WithLabelValues("pods")) != 7; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nftpolicy_source_resource_version{pods} not published after the takeover")
		}
	}
	wait(t, dp.resynced, "a periodic resync once programming")
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "z"}}}
	wait(t, dp.applied, "an apply after the takeover")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := second.release(); err != nil {
		t.Fatal(err)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
