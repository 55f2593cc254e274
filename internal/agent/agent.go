package agent

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Calculator is the calculation graph as the loop uses it (internal/graph.Graph).
type Calculator interface {
	OnUpdate(model.Update)
	Flush() []graph.Message
}

// Dataplane is the nftables dataplane as the loop uses it (internal/nft).
type Dataplane interface {
	// Apply folds the messages into the desired state and, once in sync, commits the difference
	// in one transaction.
	Apply(msgs []graph.Message) error // consumes msgs (may clear its entries)
	// Resync reads the table back and repairs any drift in one transaction; it reports whether
	// drift was found. It is also how a failed apply is retried.
	Resync() (drift bool, err error)
	// Stats describes the committed table, for the gauges.
	Stats() TableStats
}

// TableStats counts the objects of the committed table.
type TableStats struct {
	Sets, Elements, Chains, Rules int
	Transactions                  uint64
}

// Config configures the loop.
type Config struct {
	ResyncInterval time.Duration
	// RetryBackoff is the first delay before retrying a failed apply; it doubles up to
	// ResyncInterval.
	RetryBackoff time.Duration
	Logger       *slog.Logger
	Metrics      *Metrics
	Health       *Health
	// FirstCommit, if set, is called once, when the whole state has first been committed.
	FirstCommit func()
}

// Loop runs the agent's single goroutine: it feeds model updates to the graph, flushes the
// graph after each burst of updates, applies the messages to the dataplane, and resyncs the
// dataplane periodically and after failures. It returns when ctx is done or updates is closed.
func Loop(ctx context.Context, cfg Config, updates <-chan []model.Update, calc Calculator, dp Dataplane) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 90 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	resync := time.NewTicker(cfg.ResyncInterval)
	defer resync.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	backoff := cfg.RetryBackoff
	failing := false
	inSync := false
	var transactions uint64         // as counted in nftpolicy_transactions_total
	versions := map[string]string{} // SourceVersion updates fed to the graph since the last publish
	committed := false              // the full state has been committed once
	// publish exports the source versions the kernel's table now reflects
	publish := func() {
		if cfg.Metrics == nil || !committed || failing {
			return
		}
		for res, rv := range versions {
			if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
				cfg.Metrics.SourceVersion.WithLabelValues(res).Set(float64(v))
			}
		}
		clear(versions)
	}

	fail := func(what string, err error) {
		log.Error("dataplane apply failed; will resync and retry", "op", what, "err", err, "retry_in", backoff)
		if cfg.Metrics != nil {
			cfg.Metrics.ApplyErrors.Inc()
		}
		if cfg.Health != nil {
			cfg.Health.applyFailed()
		}
		failing = true
		retry.Reset(backoff)
		backoff = min(backoff*2, cfg.ResyncInterval)
	}
	succeed := func() {
		failing = false
		backoff = cfg.RetryBackoff
		if cfg.Health != nil {
			cfg.Health.applySucceeded(inSync)
		}
		if cfg.Metrics != nil {
			s := dp.Stats()
			cfg.Metrics.Sets.Set(float64(s.Sets))
			cfg.Metrics.SetElements.Set(float64(s.Elements))
			cfg.Metrics.Chains.Set(float64(s.Chains))
			cfg.Metrics.Rules.Set(float64(s.Rules))
			if s.Transactions > transactions {
				cfg.Metrics.Transactions.Add(float64(s.Transactions - transactions))
				transactions = s.Transactions
			}
			if inSync {
				cfg.Metrics.InSync.Set(1)
			}
		}
		if inSync && !committed {
			committed = true
			if cfg.FirstCommit != nil {
				cfg.FirstCommit()
			}
		}
		publish()
	}
	doResync := func(reason string) {
		cfg.Health.applyStarted()
		if cfg.Metrics != nil {
			cfg.Metrics.Resyncs.Inc()
		}
		drift, err := dp.Resync()
		if err != nil {
			fail("resync ("+reason+")", err)
			return
		}
		if drift {
			log.Warn("nftables table had drifted from the desired state; repaired", "reason", reason)
			if cfg.Metrics != nil {
				cfg.Metrics.DriftRepairs.Inc()
			}
		}
		succeed()
	}

	for {
		var batch []model.Update
		var ok bool
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			if inSync {
				doResync("periodic")
			}
			continue
		case <-retry.C:
			if failing {
				doResync("retry after failure")
			}
			continue
		case batch, ok = <-updates:
			if !ok {
				return nil
			}
		}
		received := time.Now()
		cfg.Health.applyStarted()
		n := feed(calc, batch, &inSync, versions)
		// Coalesce whatever else is already queued: one flush and one transaction per burst.
	drain:
		for {
			select {
			case more, ok := <-updates:
				if !ok {
					break drain
				}
				n += feed(calc, more, &inSync, versions)
			default:
				break drain
			}
		}
		msgs := calc.Flush()
		if cfg.Metrics != nil {
			cfg.Metrics.GraphUpdates.Add(float64(n))
			cfg.Metrics.DataplaneMessages.Add(float64(len(msgs)))
		}
		if len(msgs) == 0 {
			cfg.Health.applyEnded()
			publish() // nothing to change: the table already reflects these versions
			continue
		}
		start := time.Now()
		err := dp.Apply(msgs)
		took := time.Since(start)
		if err != nil {
			fail("apply", err)
			continue
		}
		if cfg.Metrics != nil {
			cfg.Metrics.ApplyDuration.Observe(took.Seconds())
			cfg.Metrics.EventToCommit.Observe(time.Since(received).Seconds())
		}
		log.Debug("applied", "updates", n, "messages", len(msgs), "duration", took)
		if failing {
			// A failed apply may have left the kernel behind the desired state.
			doResync("after recovery")
			continue
		}
		succeed()
	}
}

// feed hands a batch to the graph, noting in-sync and the sources' versions. It drops each update
// from the batch once the graph has it: what the graph does not keep of an update (the boxed
// update, an endpoint's address and port slices) is then garbage at the next collection instead
// of live until the batch ends. A cold start's first batch is the whole cluster (P3: ≈ 98,000
// updates, ≈ 20 MB), and the collections during it set the heap's goal for the first apply.
func feed(calc Calculator, batch []model.Update, inSync *bool, versions map[string]string) int {
	n := 0
	for i, u := range batch {
		batch[i] = nil
		if v, ok := u.(model.SourceVersion); ok {
			versions[v.Resource] = v.ResourceVersion
			continue
		}
		if s, ok := u.(model.SyncStatusUpdate); ok && s.Status == model.InSync {
			*inSync = true
		}
		calc.OnUpdate(u)
		n++
	}
	return n
}
