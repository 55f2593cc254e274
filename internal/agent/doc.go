// Package agent is the loop that joins the stages of DESIGN.md inside the running agent:
//
//	sources (internal/sync, internal/ifmon) ──[]model.Update──► Loop ──► graph ──[]graph.Message──► nft
//
// One goroutine owns the graph and the dataplane, so neither needs locks. Updates that arrive
// together are coalesced into one graph flush and one netlink transaction. A failed apply is
// retried by a full resync with exponential backoff; a periodic resync repairs drift. The loop
// also drives the agent's metrics (Metrics) and health (Health): /healthz fails after
// FailureThreshold consecutive failures, /readyz turns ready once the first full apply after
// in-sync has committed.
package agent
