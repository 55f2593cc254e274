package agent

import (
	"fmt"
	"net/http"
	"sync/atomic"
)

// Health answers /healthz and /readyz from the agent loop's state.
//   - /healthz: alive; fails once FailureThreshold consecutive applies have failed.
//   - /readyz: ready once the first full apply after in-sync has committed.
type Health struct {
	FailureThreshold int64
	consecutiveFails atomic.Int64
	ready            atomic.Bool
}

func (h *Health) applySucceeded(full bool) {
	h.consecutiveFails.Store(0)
	if full {
		h.ready.Store(true)
	}
}

func (h *Health) applyFailed() { h.consecutiveFails.Add(1) }

// Ready reports whether the first full apply has committed.
func (h *Health) Ready() bool { return h.ready.Load() }

// Healthy reports whether fewer than FailureThreshold consecutive applies failed.
func (h *Health) Healthy() bool {
	t := h.FailureThreshold
	if t <= 0 {
		t = 5
	}
	return h.consecutiveFails.Load() < t
}

// Handler serves /healthz and /readyz.
func (h *Health) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.Healthy() {
			http.Error(w, fmt.Sprintf("unhealthy: %d consecutive failed applies", h.consecutiveFails.Load()), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.Ready() {
			http.Error(w, "not ready: the first full apply has not committed yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
