package agent

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Calculator is the calculation graph as the loop uses it (internal/graph.Graph).
type Calculator interface {
	OnUpdate(model.Update)
	Flush() []dataplane.Message
}

// Dataplane is the nftables dataplane as the loop uses it (internal/nft).
type Dataplane interface {
	// Apply folds the messages into the desired state and, once in sync, commits the difference
	// in one transaction.
	Apply(msgs []dataplane.Message) error // consumes msgs (may clear its entries)
	// Resync reads the table back and repairs any drift in one transaction; it reports whether
	// drift was found. It is also how a failed apply is retried.
	Resync() (drift bool, err error)
	// Repair replaces the table with the desired state in one transaction without reading it
	// back: the answer to a report that another process changed the table.
	Repair() error
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
	// Sources is the number of sources that report in-sync (model.SyncStatusUpdate{InSync}):
	// the graph is told the state is complete — and the dataplane commits it — only once each
	// has (the API watcher, the interface monitor). 0 means 1.
	Sources int
	// TableChanges, if set, delivers the kernel's reports of changes that other processes made
	// to the table (ruleset.Monitor): the loop answers the reports queued together with one
	// repair.
	TableChanges <-chan ruleset.TableChange
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
	synced := syncCount{need: max(cfg.Sources, 1)}
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
	// doResync reads the table back and repairs it; trigger labels the repair in
	// nftpolicy_drift_repairs_total, attrs add to its log line.
	doResync := func(trigger, reason string, attrs ...any) {
		cfg.Health.applyStarted()
		if cfg.Metrics != nil {
			cfg.Metrics.Resyncs.Inc()
		}
		start := time.Now()
		drift, err := dp.Resync()
		if err != nil {
			fail("resync ("+reason+")", err)
			return
		}
		if drift {
			log.Warn("nftables table had drifted from the desired state; repaired",
				append([]any{"reason", reason, "took", time.Since(start)}, attrs...)...)
			if cfg.Metrics != nil {
				cfg.Metrics.DriftRepairs.WithLabelValues(trigger).Inc()
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
				doResync(TriggerPeriodic, "periodic")
			}
			continue
		case <-retry.C:
			if failing {
				doResync(TriggerRetry, "retry after failure")
			}
			continue
		case change := <-cfg.TableChanges:
			changes, known := tableChanges(change, cfg.TableChanges, cfg.Metrics)
			switch {
			case !inSync:
				log.Info("another process changed the nftables table before the first commit; the first commit replaces it", "changes", changes)
			case known:
				// the kernel said another process changed the table: replace it, no read-back
				start := time.Now()
				cfg.Health.applyStarted()
				if err := dp.Repair(); err != nil {
					fail("repair (changed by another process)", err)
					continue
				}
				log.Warn("another process changed the nftables table; replaced it", "changes", changes, "took", time.Since(start))
				if cfg.Metrics != nil {
					cfg.Metrics.DriftRepairs.WithLabelValues(TriggerEvent).Inc()
				}
				succeed()
			default:
				doResync(TriggerEvent, "changes by others may have gone unreported", "changes", changes)
			}
			continue
		case batch, ok = <-updates:
			if !ok {
				return nil
			}
		}
		received := time.Now()
		cfg.Health.applyStarted()
		n := feed(calc, batch, &synced, &inSync, versions)
		// Coalesce whatever else is already queued: one flush and one transaction per burst.
	drain:
		for {
			select {
			case more, ok := <-updates:
				if !ok {
					break drain
				}
				n += feed(calc, more, &synced, &inSync, versions)
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
			doResync(TriggerRetry, "after recovery")
			continue
		}
		succeed()
	}
}

// Triggers of a resync, the label of nftpolicy_drift_repairs_total.
const (
	TriggerEvent    = "event"    // the kernel reported a change by another process, or lost reports
	TriggerPeriodic = "periodic" // Config.ResyncInterval
	TriggerRetry    = "retry"    // after a failed apply
)

// tableChanges takes first and every report queued behind it (a burst: one repair answers them
// all), counts them, and describes them for the log; known says that at least one reports a
// change, not only a gap (ruleset.TableChange.Lost).
func tableChanges(first ruleset.TableChange, more <-chan ruleset.TableChange, m *Metrics) (desc string, known bool) {
	var descs []string
	for c, ok := first, true; ok; {
		known = known || !c.Lost
		if m != nil {
			if c.Lost {
				m.TableEventsLost.Inc()
			} else {
				m.ForeignChanges.Inc()
			}
		}
		descs = append(descs, c.String())
		select {
		case c = <-more:
		default:
			ok = false
		}
	}
	return strings.Join(descs, " | "), known
}

// syncCount counts the sources that have reported in-sync.
type syncCount struct{ seen, need int }

// feed hands a batch to the graph, noting in-sync and the sources' versions. An in-sync report
// reaches the graph only when it is the last source's: until every source is in sync, the graph
// emits nothing the dataplane would commit. It drops each update from the batch once the graph
// has it: what the graph does not keep of an update (the boxed update, an endpoint's address and
// port slices) is then garbage at the next collection instead of live until the batch ends. A
// cold start's first batch is the whole cluster (an update per pod, namespace and policy), and
// the collections during it set the heap's goal for the first apply.
func feed(calc Calculator, batch []model.Update, synced *syncCount, inSync *bool, versions map[string]string) int {
	n := 0
	for i, u := range batch {
		batch[i] = nil
		if v, ok := u.(model.SourceVersion); ok {
			versions[v.Resource] = v.ResourceVersion
			continue
		}
		if s, ok := u.(model.SyncStatusUpdate); ok && s.Status == model.InSync {
			if synced.seen++; synced.seen < synced.need {
				continue
			}
			*inSync = true
		}
		calc.OnUpdate(u)
		n++
	}
	return n
}
