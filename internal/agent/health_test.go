package agent

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestReadiness: /readyz says whether the table reflects a fresh view of the cluster; /healthz
// ignores the API server. Each case sets the loop's and the watches' state and checks both.
func TestReadiness(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		set       func(h *Health)
		watchDown time.Duration
		wantReady string // "" ready, else a part of the reason
		healthy   bool
	}{
		{"before the first apply", func(h *Health) {}, 0, "first full apply", true},
		{"in sync", func(h *Health) { h.applySucceeded(true) }, 0, "", true},
		{"the last apply failed", func(h *Health) { h.applySucceeded(true); h.applyFailed() }, 0, "last 1 applies failed", true},
		{"failures past the threshold", func(h *Health) {
			h.applySucceeded(true)
			for range 3 {
				h.applyFailed()
			}
		}, 0, "last 3 applies failed", false},
		{"recovered", func(h *Health) { h.applySucceeded(true); h.applyFailed(); h.applySucceeded(false) }, 0, "", true},
		{"a watch closed briefly", func(h *Health) { h.applySucceeded(true) }, 20 * time.Second, "", true},
		{"a watch closed too long", func(h *Health) { h.applySucceeded(true) }, 61 * time.Second, "no watch of pods", true},
		{"an apply running briefly", func(h *Health) {
			h.applySucceeded(true)
			h.applyingSince.Store(now.Add(-5 * time.Second).UnixNano())
		}, 0, "", true},
		{"an apply running too long", func(h *Health) {
			h.applySucceeded(true)
			h.applyingSince.Store(now.Add(-2 * time.Minute).UnixNano())
		}, 0, "an apply has been running", true},
		{"an apply that ended", func(h *Health) { h.applySucceeded(true); h.applyStarted(); h.applyEnded() }, 0, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Health{FailureThreshold: 3, StaleAfter: time.Minute,
				WatchDown: func() (string, time.Duration) { return "pods", tt.watchDown }}
			tt.set(h)
			got := h.NotReady(now)
			if (got == "") != (tt.wantReady == "") || !strings.Contains(got, tt.wantReady) {
				t.Errorf("NotReady = %q, want %q", got, tt.wantReady)
			}
			if h.Healthy() != tt.healthy {
				t.Errorf("Healthy = %v, want %v", h.Healthy(), tt.healthy)
			}
		})
	}
	// without a bound only the applies count
	h := &Health{WatchDown: func() (string, time.Duration) { return "pods", time.Hour }}
	h.applySucceeded(true)
	if got := h.NotReady(now); got != "" {
		t.Errorf("StaleAfter 0: NotReady = %q with a watch closed for an hour, want ready", got)
	}
}

// slowCalc is a graph whose work on a batch takes until release is closed.
type slowCalc struct {
	fakeCalc
	working chan struct{}
	release chan struct{}
}

func (c *slowCalc) OnUpdate(u model.Update) {
	if _, ok := u.(model.NamespaceSet); ok && c.inSync {
		c.working <- struct{}{}
		<-c.release
	}
	c.fakeCalc.OnUpdate(u)
}

// TestLoopReadinessWhileBusy: the loop working on one batch — the graph's work included — for
// longer than StaleAfter makes /readyz fail, and the end of that work makes it ready again.
func TestLoopReadinessWhileBusy(t *testing.T) {
	h := &Health{StaleAfter: 20 * time.Millisecond}
	calc := &slowCalc{working: make(chan struct{}), release: make(chan struct{})}
	dp := &fakeProgrammer{applied: make(chan struct{}, 10), resynced: make(chan struct{}, 10)}
	updates := make(chan []model.Update)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Loop(ctx, Config{ResyncInterval: time.Hour, Health: h}, updates, calc, dp) }()
	defer func() {
		cancel()
		<-done
	}()
	updates <- []model.Update{model.SyncStatusUpdate{Status: model.InSync}}
	wait(t, dp.applied, "first apply")
	if got := h.NotReady(time.Now()); got != "" {
		t.Fatalf("after the first apply: NotReady = %q, want ready", got)
	}
	updates <- []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}}
	<-calc.working
	time.Sleep(50 * time.Millisecond)
	if got := h.NotReady(time.Now()); !strings.Contains(got, "running") {
		t.Errorf("50 ms into a batch's work with StaleAfter 20 ms: NotReady = %q, want a running apply", got)
	}
	close(calc.release)
	wait(t, dp.applied, "the slow batch's apply")
	for deadline := time.Now().Add(10 * time.Second); h.NotReady(time.Now()) != ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the slow batch: NotReady = %q, want ready", h.NotReady(time.Now()))
		}
	}
}

// TestHealthSocketIsTheAgentsOwn: /readyz on RunConfig.HealthSocket answers for this agent's
// Health, as on the TCP address, and a file left at the path by a previous container is replaced.
func TestHealthSocketIsTheAgentsOwn(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "health.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &Health{}
	errs := make(chan error, 2)
	if err := serveEndpoints(ctx, RunConfig{HealthSocket: sock}, prometheus.NewRegistry(), h, errs); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	get := func(path string) int {
		t.Helper()
		resp, err := client.Get("http://agent" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before the first apply: %d, want 503", got)
	}
	h.applySucceeded(true)
	if got, live := get("/readyz"), get("/healthz"); got != http.StatusOK || live != http.StatusOK {
		t.Fatalf("/readyz, /healthz in sync: %d, %d; want 200, 200", got, live)
	}
}
