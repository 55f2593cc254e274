package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// fakeCalc emits one message per flush that saw updates, and InSync after the sync status.
type fakeCalc struct {
	pending int
	inSync  bool
	sent    bool
}

func (c *fakeCalc) OnUpdate(u model.Update) {
	c.pending++
	if s, ok := u.(model.SyncStatusUpdate); ok && s.Status == model.InSync {
		c.inSync = true
	}
}

func (c *fakeCalc) Flush() []dataplane.Message {
	if c.pending == 0 || !c.inSync {
		return nil
	}
	c.pending = 0
	var msgs []dataplane.Message
	msgs = append(msgs, dataplane.PolicyRemoved{})
	if !c.sent {
		c.sent = true
		msgs = append(msgs, dataplane.InSync{})
	}
	return msgs
}

type fakeProgrammer struct {
	mu       sync.Mutex
	applies  int
	messages int // applied, in all
	resyncs  int
	repairs  int
	built    int // messages built (Build), in all
	failNext int
	tx       uint64 // transactions: successful applies and resyncs
	applied  chan struct{}
	resynced chan struct{}
}

func (d *fakeProgrammer) Apply(msgs []dataplane.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.applies++
	d.messages += len(msgs)
	defer func() { d.applied <- struct{}{} }()
	if d.failNext > 0 {
		d.failNext--
		return errors.New("kernel said no")
	}
	d.tx++
	return nil
}

func (d *fakeProgrammer) Build(msgs []dataplane.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.built += len(msgs)
}

func (d *fakeProgrammer) Resync() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resyncs++
	defer func() { d.resynced <- struct{}{} }()
	d.tx++
	return true, nil
}

func (d *fakeProgrammer) Repair() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.repairs++
	d.tx++
	return nil
}

func (d *fakeProgrammer) Stats() TableStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return TableStats{Sets: 2, Elements: 7, Chains: 3, Rules: 9, Transactions: d.tx}
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestLoopReadinessFailuresAndRecovery(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := &Health{FailureThreshold: 2}
	dp := &fakeProgrammer{applied: make(chan struct{}, 10), resynced: make(chan struct{}, 10)}
	updates := make(chan []model.Update)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var firstCommits atomic.Int32
	go func() {
		done <- Loop(ctx, Config{ResyncInterval: time.Hour, RetryBackoff: time.Millisecond, Metrics: m, Health: h,
			FirstCommit: func() { firstCommits.Add(1) }},
			updates, &fakeCalc{}, dp)
	}()

	srv := httptest.NewServer(h.Handler())
	defer srv.Close()
	status := func(path string) int {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// Before in-sync nothing is applied and the agent is not ready.
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}}
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before in-sync = %d, want 503", got)
	}
	if n := firstCommits.Load(); n != 0 {
		t.Fatalf("FirstCommit called %d times before in-sync, want 0", n)
	}
	// In-sync: the first full apply commits, the agent turns ready.
	updates <- []model.Update{model.SyncStatusUpdate{Status: model.InSync}, model.SourceVersion{Resource: "pods", ResourceVersion: "42"}}
	wait(t, dp.applied, "first apply")
	time.Sleep(10 * time.Millisecond)
	if got := status("/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz after the first apply = %d, want 200", got)
	}
	if n := firstCommits.Load(); n != 1 {
		t.Fatalf("FirstCommit called %d times after the first full apply, want 1", n)
	}
	if got := testutil.ToFloat64(m.InSync); got != 1 {
		t.Fatalf("nftpolicy_in_sync = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.SetElements); got != 7 {
		t.Fatalf("nftpolicy_set_elements = %v, want 7", got)
	}
	if got := testutil.ToFloat64(m.Transactions); got != 1 {
		t.Fatalf("nftpolicy_transactions_total = %v after the first apply, want 1", got)
	}
	podsVersion := func() float64 { return testutil.ToFloat64(m.SourceVersion.WithLabelValues("pods")) }
	if got := podsVersion(); got != 42 {
		t.Fatalf("nftpolicy_source_resource_version{pods} = %v after the first apply, want 42", got)
	}

	// Two failed applies: /healthz fails; the retry goes through a resync that repairs.
	dp.mu.Lock()
	dp.failNext = 2
	dp.mu.Unlock()
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "y"}}, model.SourceVersion{Resource: "pods", ResourceVersion: "50"}}
	wait(t, dp.applied, "failing apply 1")
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "z"}}}
	wait(t, dp.applied, "failing apply 2")
	if got := testutil.ToFloat64(m.ApplyErrors); got < 2 {
		t.Fatalf("nftpolicy_apply_errors_total = %v, want ≥ 2", got)
	}
	wait(t, dp.resynced, "retry resync")
	time.Sleep(10 * time.Millisecond)
	if got := status("/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz after recovery = %d, want 200", got)
	}
	if got := testutil.ToFloat64(m.DriftRepairs.WithLabelValues(TriggerRetry)); got < 1 {
		t.Fatalf("nftpolicy_drift_repairs_total{trigger=retry} = %v, want ≥ 1", got)
	}
	if got := podsVersion(); got != 50 {
		t.Fatalf("nftpolicy_source_resource_version{pods} = %v after the repairing resync, want 50", got)
	}
	// a version whose batch changes nothing is published at once
	updates <- []model.Update{model.SourceVersion{Resource: "pods", ResourceVersion: "51"}}
	for deadline := time.Now().Add(10 * time.Second); podsVersion() != 51; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("nftpolicy_source_resource_version{pods} = %v after a batch with nothing to apply, want 51", podsVersion())
		}
	}
	if n := firstCommits.Load(); n != 1 {
		t.Fatalf("FirstCommit called %d times after later applies and resyncs, want 1", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestHealthFailsAfterThreshold(t *testing.T) {
	h := &Health{FailureThreshold: 3}
	for i := 0; i < 2; i++ {
		h.applyFailed()
	}
	if !h.Healthy() {
		t.Fatal("unhealthy after 2 of 3 failures")
	}
	h.applyFailed()
	if h.Healthy() {
		t.Fatal("healthy after 3 consecutive failures")
	}
	h.applySucceeded(false)
	if !h.Healthy() || h.Ready() {
		t.Fatalf("after a partial success: healthy=%v ready=%v, want true/false", h.Healthy(), h.Ready())
	}
}

// TestLoopWaitsForEverySource: with two sources, the first in-sync report reaches neither the
// graph nor the dataplane; the second does, and the first full apply follows.
func TestLoopWaitsForEverySource(t *testing.T) {
	dp := &fakeProgrammer{applied: make(chan struct{}, 10), resynced: make(chan struct{}, 10)}
	calc := &fakeCalc{}
	updates := make(chan []model.Update)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Loop(ctx, Config{ResyncInterval: time.Hour, Sources: 2}, updates, calc, dp)
	}()
	inSync := func() []model.Update { return []model.Update{model.SyncStatusUpdate{Status: model.InSync}} } // feed consumes a batch
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}}
	updates <- inSync() // the API watcher
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "y"}}}
	select {
	case <-dp.applied:
		t.Fatal("the dataplane applied after one of two sources reported in-sync")
	case <-time.After(100 * time.Millisecond):
	}
	updates <- inSync() // the interface monitor
	wait(t, dp.applied, "the first apply once both sources are in sync")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !calc.inSync {
		t.Fatal("the graph never saw in-sync")
	}
}
