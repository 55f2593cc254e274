package agent

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Health answers /healthz and /readyz from the agent loop's state.
//   - /healthz: alive; fails once FailureThreshold consecutive applies have failed. Nothing about
//     the API server counts: during an outage the table stays in force and restarting the agent
//     would not bring the API server back.
//   - /readyz: the table reflects the cluster as the agent last saw it, and that view is fresh.
//     Ready once the first full apply after in-sync has committed — or, for an agent standing by
//     for another's lock (lock.go), once in sync: it is ready to take over; not ready while the
//     last apply failed, while the loop has worked on one batch or resync (the graph's work and
//     the apply) longer than StaleAfter, or while a watch of the API server has been closed
//     longer than StaleAfter (WatchDown).
//
// The loop records to it whether or not anything serves it: a zero Health is valid.
type Health struct {
	FailureThreshold int64
	// StaleAfter bounds how long the agent's view may lag before /readyz fails; 0: only failed
	// applies and the first apply count.
	StaleAfter time.Duration
	// WatchDown, if set, reports the API resource whose watch has been closed longest and for
	// how long (sync.Watcher.WatchDown).
	WatchDown func() (resource string, down time.Duration)

	consecutiveFails atomic.Int64
	ready            atomic.Bool
	// applyingSince is when the loop started on the batch or resync it works on (Unix
	// nanoseconds: the graph's work and the apply), 0 when it waits
	applyingSince atomic.Int64
}

func (h *Health) applySucceeded(full bool) {
	h.applyingSince.Store(0)
	h.consecutiveFails.Store(0)
	if full {
		h.ready.Store(true)
	}
}

func (h *Health) applyFailed() {
	h.applyingSince.Store(0)
	h.consecutiveFails.Add(1)
}

// applyStarted marks the start of the loop's work on a batch or a resync, which applySucceeded,
// applyFailed or applyEnded ends.
func (h *Health) applyStarted() { h.applyingSince.Store(time.Now().UnixNano()) }

// applyEnded ends a batch that needed no apply.
func (h *Health) applyEnded() { h.applyingSince.Store(0) }

// Ready reports whether the first full apply has committed.
func (h *Health) Ready() bool { return h.ready.Load() }

// NotReady says why /readyz fails at now, "" when it does not.
func (h *Health) NotReady(now time.Time) string {
	if !h.ready.Load() {
		return "the first full apply has not committed yet"
	}
	if n := h.consecutiveFails.Load(); n > 0 {
		return fmt.Sprintf("the last %d applies failed; retrying", n)
	}
	if h.StaleAfter <= 0 {
		return ""
	}
	if since := h.applyingSince.Load(); since != 0 {
		if d := now.Sub(time.Unix(0, since)); d > h.StaleAfter {
			return fmt.Sprintf("an apply has been running for %v", d.Round(time.Second))
		}
	}
	if h.WatchDown != nil {
		if res, d := h.WatchDown(); d > h.StaleAfter {
			return fmt.Sprintf("no watch of %s on the API server for %v (the table stays in force)", res, d.Round(time.Second))
		}
	}
	return ""
}

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
		if why := h.NotReady(time.Now()); why != "" {
			http.Error(w, "not ready: "+why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}
