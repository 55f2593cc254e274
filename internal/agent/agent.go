package agent

import (
	"context"
	"log/slog"
	"runtime"
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

// Programmer is what the loop needs of the thing that programs the kernel's nftables table (Run
// gives it the nft one, through nftAdapter; tests a fake): fold the graph's messages into the
// desired table and commit the difference, read the table back and repair it, write it whole,
// and count what is committed. Each call that commits does so in one transaction.
type Programmer interface {
	// Apply folds the messages into the desired state and, once in sync, commits the difference
	// in one transaction.
	Apply(msgs []dataplane.Message) error // consumes msgs (may clear its entries)
	// Resync reads the table back and repairs any drift in one transaction; it reports whether
	// drift was found. It is also how a failed apply is retried.
	Resync() (drift bool, err error)
	// Repair replaces the table with the desired state in one transaction without reading it
	// back: the answer to a report that another process changed the table.
	Repair() error
	// Build folds the messages into the desired state and computes it without writing the
	// kernel: standing by (Config.Programming), the table is built as the graph emits and then
	// written whole by the first commit (Repair), which replaces the other agent's.
	Build(msgs []dataplane.Message) // consumes msgs
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
	// ResyncInterval is the period of the read-back that repairs drift; 0: 90 s.
	ResyncInterval time.Duration
	// CommitInterval is the least time between two commits of changes that keep coming, once
	// the full state is committed (pacer): they wait and are committed together at most once
	// per interval. 0 or less: every burst at once, the default — pacing delays changes made
	// one after the other by up to the interval, and saves CPU only while churn makes commits
	// write the whole table.
	CommitInterval time.Duration
	// CommitQuiet is the gap after the previous burst that makes a burst a lone change,
	// committed at once whatever the interval. 0: 5 ms.
	CommitQuiet time.Duration
	// RetryBackoff is the first delay before retrying a failed apply; it doubles up to
	// ResyncInterval. 0: 100 ms.
	RetryBackoff time.Duration
	// Logger: nil discards the loop's logs.
	Logger *slog.Logger
	// Metrics: nil records to metrics that no registry exports (NopMetrics).
	Metrics *Metrics
	// Health: nil records to a Health that nothing serves.
	Health *Health
	// FirstCommit, if set, is called once, when the whole state has first been committed.
	FirstCommit func()
	// Sources is the number of sources that report in-sync (model.SyncStatusUpdate{InSync}):
	// the graph is told the state is complete — and the programmer commits it — only once each
	// has (the API watcher, the interface monitor). 0 means 1.
	Sources int
	// TableChanges, if set, delivers the kernel's reports of changes that other processes made
	// to the table (ruleset.Monitor): the loop answers the reports queued together with one
	// repair.
	TableChanges <-chan ruleset.TableChange
	// Programming, if set, keeps the loop in standby until it is closed (another agent holds the
	// table's lock, lock.go): the loop feeds the graph and has the programmer build the table
	// from what the graph emits without writing it (Programmer.Build), reports ready once in sync, and writes nothing — no apply,
	// resync or repair, and table-change reports (the other agent's commits) are only counted.
	// When it is closed, the table is written whole in one transaction: the first commit.
	Programming <-chan struct{}
}

// Loop runs the agent's single goroutine: it feeds model updates to the graph, flushes the
// graph after each burst of updates, applies the messages through the programmer, and resyncs
// the table periodically and after failures. It returns when ctx is done or updates is closed.
func Loop(ctx context.Context, cfg Config, updates <-chan []model.Update, calc Calculator, prog Programmer) error {
	l := newLoop(cfg, calc, prog)
	defer l.stop()
	return l.run(ctx, updates)
}

// loop is the state of Loop's goroutine; only that goroutine touches it.
type loop struct {
	log          *slog.Logger
	metrics      *Metrics
	health       *Health
	calc         Calculator
	prog         Programmer
	tableChanges <-chan ruleset.TableChange
	firstCommit  func()
	programming  <-chan struct{} // Config.Programming while standing by; nil once programming

	// standby: another agent programs the table; built: the programmer has built (not written)
	// what the graph emitted meanwhile
	standby bool
	built   bool

	periodic     *time.Ticker // the periodic resync
	pace         pacer        // spaces the commits of changes
	paceTimer    *time.Timer  // armed while changes wait for their commit (waiting)
	now          func() time.Time
	retry        *time.Timer   // armed while failing
	firstBackoff time.Duration // Config.RetryBackoff
	maxBackoff   time.Duration // Config.ResyncInterval
	backoff      time.Duration // the delay before the next retry

	synced       syncCount         // sources that have reported in-sync
	inSync       bool              // every source has: the graph has been told
	waiting      bool              // the graph holds changes whose commit paceTimer brings
	waitingN     int               // updates the graph took for them
	waitingSince time.Time         // when the first of them arrived
	failing      bool              // the last apply, resync or repair failed
	committed    bool              // the full state has been committed once
	collected    bool              // the collection before the first full flush has run
	transactions uint64            // as counted in nftpolicy_transactions_total
	versions     map[string]string // SourceVersion updates fed to the graph since the last publish
}

// newLoop fills Config's defaults: the loop's logger, metrics and health are never nil.
func newLoop(cfg Config, calc Calculator, prog Programmer) *loop {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NopMetrics()
	}
	if cfg.Health == nil {
		cfg.Health = &Health{}
	}
	if cfg.ResyncInterval <= 0 {
		cfg.ResyncInterval = 90 * time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.CommitQuiet <= 0 {
		cfg.CommitQuiet = defaultCommitQuiet
	}
	l := &loop{
		log: cfg.Logger, metrics: cfg.Metrics, health: cfg.Health, calc: calc, prog: prog,
		tableChanges: cfg.TableChanges, firstCommit: cfg.FirstCommit,
		periodic: time.NewTicker(cfg.ResyncInterval), retry: time.NewTimer(time.Hour),
		pace: pacer{interval: max(cfg.CommitInterval, 0), quiet: cfg.CommitQuiet}, paceTimer: time.NewTimer(time.Hour), now: time.Now,
		firstBackoff: cfg.RetryBackoff, maxBackoff: cfg.ResyncInterval, backoff: cfg.RetryBackoff,
		synced: syncCount{need: max(cfg.Sources, 1)}, versions: map[string]string{},
		programming: cfg.Programming, standby: cfg.Programming != nil,
	}
	l.retry.Stop()
	l.paceTimer.Stop()
	return l
}

func (l *loop) stop() {
	l.periodic.Stop()
	l.retry.Stop()
	l.paceTimer.Stop()
}

// run waits for the next thing to do and does it, until ctx is done or updates is closed.
func (l *loop) run(ctx context.Context, updates <-chan []model.Update) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.programming:
			l.takeOver()
		case <-l.periodic.C:
			if l.inSync && !l.standby {
				l.resync(TriggerPeriodic, "periodic")
			}
		case <-l.retry.C:
			if l.failing {
				l.resync(TriggerRetry, "retry after failure")
			}
		case <-l.paceTimer.C:
			l.commitWaiting()
		case change := <-l.tableChanges:
			l.answerTableChanges(change)
		case batch, ok := <-updates:
			if !ok {
				return nil
			}
			l.handleBatch(batch, updates)
		}
	}
}

// handleBatch feeds a batch, and whatever else is already queued behind it, to the graph, and
// applies what the graph emits: one flush and one transaction per burst. Once the full state is
// committed, a burst of sustained churn (pacer) waits in the graph for the commit the pacer
// allows, which takes every burst until then.
func (l *loop) handleBatch(batch []model.Update, updates <-chan []model.Update) {
	received := l.now()
	l.health.applyStarted()
	n := l.feed(batch)
drain:
	for {
		select {
		case more, ok := <-updates:
			if !ok {
				break drain // run sees the closed channel next
			}
			n += l.feed(more)
		default:
			break drain
		}
	}
	var wait time.Duration
	if n > 0 { // a burst of only source versions is no change: it neither waits nor makes churn
		wait = l.pace.arrive(received)
	}
	if l.waiting {
		l.waitingN += n
		l.health.applyEnded()
		return
	}
	if wait > 0 && l.committed && !l.standby && !l.failing {
		l.waiting, l.waitingN, l.waitingSince = true, n, received
		l.paceTimer.Reset(wait)
		l.health.applyEnded()
		return
	}
	l.commitBurst(n, received)
}

// commitWaiting commits the changes that waited for the pacer.
func (l *loop) commitWaiting() {
	if !l.waiting {
		return
	}
	l.waiting = false
	l.health.applyStarted()
	l.commitBurst(l.waitingN, l.waitingSince)
}

// commitBurst flushes the graph and applies what it emits for n updates, the first of which
// arrived at received.
func (l *loop) commitBurst(n int, received time.Time) {
	if l.inSync && !l.collected {
		// once, before the first full flush: the initial lists' garbage goes before the flush's
		// messages and the table are made (see the package documentation)
		l.collected = true
		runtime.GC()
	}
	msgs := l.calc.Flush()
	l.metrics.GraphUpdates.Add(float64(n))
	l.metrics.DataplaneMessages.Add(float64(len(msgs)))
	switch {
	case l.standby:
		l.hold(msgs)
	case len(msgs) == 0:
		l.health.applyEnded()
		l.publish() // nothing to change: the table already reflects these versions
	default:
		l.apply(msgs, n, received)
	}
}

// apply commits what the graph emitted for n updates, the first of which arrived at received.
func (l *loop) apply(msgs []dataplane.Message, n int, received time.Time) {
	start := time.Now()
	err := l.prog.Apply(msgs)
	took := time.Since(start)
	l.pace.committed(l.now())
	if err != nil {
		l.fail("apply", err)
		return
	}
	l.metrics.ApplyDuration.Observe(took.Seconds())
	l.metrics.EventToCommit.Observe(l.now().Sub(received).Seconds())
	l.log.Debug("applied", "updates", n, "messages", len(msgs), "duration", took)
	if l.failing {
		// A failed apply may have left the kernel behind the desired state.
		l.resync(TriggerRetry, "after recovery")
		return
	}
	l.succeed()
}

// hold has the programmer build the table from what the graph emitted while standing by, for
// the first commit (takeOver). Standing by is ready once in sync: the agent has all it needs to
// program the table, and a DaemonSet's rolling update waits for the new pod's readiness before it
// deletes the old one, whose exit frees the lock.
func (l *loop) hold(msgs []dataplane.Message) {
	if len(msgs) > 0 {
		start := time.Now()
		l.prog.Build(msgs)
		l.built = true
		l.log.Debug("built the table, standing by", "messages", len(msgs), "took", time.Since(start))
	}
	l.health.applyEnded()
	if l.inSync && !l.health.Ready() {
		l.log.Info("in sync; standing by, ready to program the table once the lock is free")
		l.health.applySucceeded(true)
	}
}

// takeOver ends the standby: the lock is held, and the table built meanwhile is written at once,
// whole and without a read-back (Repair): one transaction that replaces the table the other agent
// left (in force until then). Before in-sync nothing is written: the first Apply in sync commits
// the whole state.
func (l *loop) takeOver() {
	l.programming, l.standby = nil, false
	built := l.built
	l.built = false
	if built && l.inSync {
		l.health.applyStarted()
		if err := l.prog.Repair(); err != nil {
			l.fail("first commit", err)
			return
		}
		l.succeed()
	}
}

// feed hands a batch to the graph, noting in-sync and the sources' versions, and returns the
// number of updates the graph took. An in-sync report reaches the graph only when it is the last
// source's: until every source is in sync, the graph emits nothing the programmer would commit.
// It drops each update from the batch once the graph has it: what the graph does not keep of an
// update (the boxed update, an endpoint's address and port slices) is then garbage at the next
// collection instead of live until the batch ends. A cold start's first batch is the whole
// cluster (an update per pod, namespace and policy), and the collections during it set the
// heap's goal for the first apply.
func (l *loop) feed(batch []model.Update) int {
	n := 0
	for i, u := range batch {
		batch[i] = nil
		if v, ok := u.(model.SourceVersion); ok {
			l.versions[v.Resource] = v.ResourceVersion
			continue
		}
		if s, ok := u.(model.SyncStatusUpdate); ok && s.Status == model.InSync {
			if l.synced.seen++; l.synced.seen < l.synced.need {
				continue
			}
			l.inSync = true
		}
		l.calc.OnUpdate(u)
		n++
	}
	return n
}

// resync reads the table back and repairs it; trigger labels the repair in
// nftpolicy_drift_repairs_total, attrs add to its log line.
func (l *loop) resync(trigger, reason string, attrs ...any) {
	l.health.applyStarted()
	l.metrics.Resyncs.Inc()
	start := time.Now()
	drift, err := l.prog.Resync()
	if err != nil {
		l.fail("resync ("+reason+")", err)
		return
	}
	if drift {
		l.log.Warn("nftables table had drifted from the desired state; repaired",
			append([]any{"reason", reason, "took", time.Since(start)}, attrs...)...)
		l.metrics.DriftRepairs.WithLabelValues(trigger).Inc()
	}
	l.succeed()
}

// answerTableChanges answers first and the reports queued behind it: before in-sync it only
// logs them (the first commit replaces the table); when one names a change it writes the table
// whole, without a read-back; when they only say that changes may have gone unreported, it
// resyncs.
func (l *loop) answerTableChanges(first ruleset.TableChange) {
	changes, known := l.takeTableChanges(first)
	switch {
	case l.standby:
		l.log.Debug("another agent changed the nftables table; standing by", "changes", changes)
	case !l.inSync:
		l.log.Info("another process changed the nftables table before the first commit; the first commit replaces it", "changes", changes)
	case known:
		l.repairForeign(changes)
	default:
		l.resync(TriggerEvent, "changes by others may have gone unreported", "changes", changes)
	}
}

// takeTableChanges takes first and every report queued behind it (a burst: one repair answers
// them all), counts them, and describes them for the log; known says that at least one reports a
// change, not only a gap (ruleset.TableChange.Lost).
func (l *loop) takeTableChanges(first ruleset.TableChange) (desc string, known bool) {
	var descs []string
	for c, ok := first, true; ok; {
		known = known || !c.Lost
		if c.Lost {
			l.metrics.TableEventsLost.Inc()
		} else {
			l.metrics.ForeignChanges.Inc()
		}
		descs = append(descs, c.String())
		select {
		case c = <-l.tableChanges:
		default:
			ok = false
		}
	}
	return strings.Join(descs, " | "), known
}

// repairForeign replaces the table, which the kernel said another process changed, with the
// desired state: no read-back.
func (l *loop) repairForeign(changes string) {
	start := time.Now()
	l.health.applyStarted()
	if err := l.prog.Repair(); err != nil {
		l.fail("repair (changed by another process)", err)
		return
	}
	l.log.Warn("another process changed the nftables table; replaced it", "changes", changes, "took", time.Since(start))
	l.metrics.DriftRepairs.WithLabelValues(TriggerEvent).Inc()
	l.succeed()
}

// fail records a failed apply, resync or repair and arms the retry, with exponential backoff.
func (l *loop) fail(what string, err error) {
	l.log.Error("dataplane apply failed; will resync and retry", "op", what, "err", err, "retry_in", l.backoff)
	l.metrics.ApplyErrors.Inc()
	l.health.applyFailed()
	l.failing = true
	l.retry.Reset(l.backoff)
	l.backoff = min(l.backoff*2, l.maxBackoff)
}

// succeed records a committed apply, resync or repair: the gauges of the table, readiness, the
// first commit, and the source versions the table now reflects.
func (l *loop) succeed() {
	l.failing = false
	l.backoff = l.firstBackoff
	l.health.applySucceeded(l.inSync)
	s := l.prog.Stats()
	l.metrics.Sets.Set(float64(s.Sets))
	l.metrics.SetElements.Set(float64(s.Elements))
	l.metrics.Chains.Set(float64(s.Chains))
	l.metrics.Rules.Set(float64(s.Rules))
	if s.Transactions > l.transactions {
		l.metrics.Transactions.Add(float64(s.Transactions - l.transactions))
		l.transactions = s.Transactions
	}
	if l.inSync {
		l.metrics.InSync.Set(1)
	}
	if l.inSync && !l.committed {
		l.committed = true
		if l.firstCommit != nil {
			l.firstCommit()
		}
	}
	l.publish()
}

// publish exports the source versions the kernel's table now reflects: once the full state has
// been committed and while no apply is failing.
func (l *loop) publish() {
	if !l.committed || l.failing {
		return
	}
	for res, rv := range l.versions {
		if v, err := strconv.ParseUint(rv, 10, 64); err == nil {
			l.metrics.SourceVersion.WithLabelValues(res).Set(float64(v))
		}
	}
	clear(l.versions)
}

// Triggers of a resync, the label of nftpolicy_drift_repairs_total.
const (
	TriggerEvent    = "event"    // the kernel reported a change by another process, or lost reports
	TriggerPeriodic = "periodic" // Config.ResyncInterval
	TriggerRetry    = "retry"    // after a failed apply
)

// syncCount counts the sources that have reported in-sync.
type syncCount struct{ seen, need int }
