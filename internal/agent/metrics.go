package agent

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics. They are created per agent and registered on the
// registerer the caller passes, so tests can run several agents in one process.
type Metrics struct {
	ApplyDuration     prometheus.Histogram
	ApplyErrors       prometheus.Counter
	EventToCommit     prometheus.Histogram
	InSync            prometheus.Gauge
	Resyncs           prometheus.Counter
	DriftRepairs      *prometheus.CounterVec
	ForeignChanges    prometheus.Counter
	TableEventsLost   prometheus.Counter
	Sets              prometheus.Gauge
	SetElements       prometheus.Gauge
	Chains            prometheus.Gauge
	Rules             prometheus.Gauge
	Transactions      prometheus.Counter
	GraphUpdates      prometheus.Counter
	DataplaneMessages prometheus.Counter
	SourceVersion     *prometheus.GaugeVec
	LockHeld          prometheus.Gauge
	LockWait          prometheus.Gauge
	// HostEndpointProblems counts the problems of this node's host endpoints, each once when
	// it appears (graph.Config.ReportHost).
	HostEndpointProblems prometheus.Counter
}

// NewMetrics creates the metrics and registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	// Buckets from 100 µs to ~13 s: an incremental apply is sub-millisecond, a cold start seconds.
	buckets := prometheus.ExponentialBuckets(0.0001, 2, 18)
	m := &Metrics{
		ApplyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nftpolicy_apply_duration_seconds", Help: "Time to compile and commit one dataplane apply.", Buckets: buckets}),
		ApplyErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_apply_errors_total", Help: "Dataplane applies that failed (the kernel rejected or could not be reached)."}),
		EventToCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nftpolicy_event_to_commit_seconds", Help: "Latency from receiving an API event to the kernel commit that reflects it.", Buckets: buckets}),
		InSync: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_in_sync", Help: "1 once the sources are in sync and the full state has been committed."}),
		Resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_resyncs_total", Help: "Read-backs of the nftables table."}),
		DriftRepairs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_drift_repairs_total", Help: "Repairs of the table after a change made behind the agent's back, by what found it: " +
				"event (the kernel reported another process's change, or a read-back after a lost report found one), periodic, retry (after a failed apply)."},
			[]string{"trigger"}),
		ForeignChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_table_foreign_changes_total", Help: "Transactions of other processes that changed the table, as the kernel's nftables events reported them."}),
		TableEventsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_table_events_lost_total", Help: "Reports that changes by others may have gone unreported (the event socket overflowed, " +
				"or a transaction committed during one of the agent's own large commits, which are not watched); each is answered by a resync."}),
		Sets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_sets", Help: "Sets and maps in the programmed table."}),
		SetElements: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_set_elements", Help: "Elements in all sets and maps of the programmed table."}),
		Chains: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_chains", Help: "Chains in the programmed table."}),
		Rules: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_rules", Help: "Rules in the programmed table."}),
		Transactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_transactions_total", Help: "Netlink transactions committed."}),
		GraphUpdates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_model_updates_total", Help: "Model updates fed to the calculation graph."}),
		DataplaneMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_dataplane_messages_total", Help: "Messages the calculation graph emitted to the dataplane."}),
		LockHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_lock_held", Help: "1 while this agent holds its table's lock (--lock-file) and programs the table; 0 while it stands by for another agent's."}),
		LockWait: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nftpolicy_lock_wait_seconds", Help: "How long this agent waited for its table's lock before it took it (0: it was free)."}),
		HostEndpointProblems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nftpolicy_host_endpoint_problems_total", Help: "Problems of this node's host endpoints, each counted when it appears: " +
				"an expected IP that is not the node's, an interface that does not exist yet, no interface holding the expected IPs of one without interfaceName."}),
	}
	m.SourceVersion = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nftpolicy_source_resource_version",
		Help: "Newest resourceVersion of each watched API resource whose changes the programmed table reflects " +
			"(compare with an object's metadata.resourceVersion to tell whether the table has caught up with it).",
	}, []string{"resource"})
	for _, trigger := range []string{TriggerEvent, TriggerPeriodic, TriggerRetry} {
		m.DriftRepairs.WithLabelValues(trigger)
	}
	reg.MustRegister(m.SourceVersion, m.LockHeld, m.LockWait, m.HostEndpointProblems)
	reg.MustRegister(m.ApplyDuration, m.ApplyErrors, m.EventToCommit, m.InSync, m.Resyncs, m.DriftRepairs,
		m.ForeignChanges, m.TableEventsLost, m.Sets, m.SetElements, m.Chains, m.Rules, m.Transactions, m.GraphUpdates, m.DataplaneMessages)
	return m
}

// NopMetrics returns metrics registered on a registry of their own, which nothing exports: what
// the loop records to when Config.Metrics is nil.
func NopMetrics() *Metrics { return NewMetrics(prometheus.NewRegistry()) }
