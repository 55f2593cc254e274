package sync

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the watcher's Prometheus metrics.
type Metrics struct {
	// InvalidObjects counts object versions the converters rejected, by kind (Pod,
	// NetworkPolicy). A version seen again unchanged (resync, relist) is not counted twice. The
	// agent also counts here the policies its dataplane rejects (too costly to compile).
	InvalidObjects *prometheus.CounterVec
	// PartlyEnforced counts object versions enforced only in part, by kind: a
	// ClusterNetworkPolicy's peers or protocols of a newer API, or domainNames in a Deny or Pass
	// rule, are not enforced as written. Each version is counted once, and logged with what is not enforced.
	PartlyEnforced *prometheus.CounterVec
	// Updates counts the model updates the watcher emitted, by kind (endpoint, namespace,
	// policy, sync).
	Updates *prometheus.CounterVec
	// WatchOpen is 1 while a watch of the resource is open (Watcher.WatchDown).
	WatchOpen *prometheus.GaugeVec
	// WatchRestarts counts the watches of a resource opened after its first: after the API
	// server's watch timeout (every 5–10 minutes), a broken connection or an expired
	// resourceVersion.
	WatchRestarts *prometheus.CounterVec
	// Lists counts the complete lists of a resource: the initial one, and relists after a
	// watch could not resume (an expired resourceVersion, an API server restart).
	Lists *prometheus.CounterVec
	// Streaming is 1 when the resource's last list was streamed (client-go's WatchListClient: a
	// watch that sends the initial objects first), 0 when it was a plain list: the API server
	// cannot stream lists (its etcd lacks progress notifications), or the resource is listed by
	// design (Nodes, ClusterNetworkPolicies).
	Streaming *prometheus.GaugeVec
	// LastEvent is when the API server last sent something of the resource (a list, an event
	// or a bookmark), in seconds since the Unix epoch.
	LastEvent *prometheus.GaugeVec
	// Relists counts the relists of a resource: the lists after the first, which the reflector
	// makes when a watch could not resume; each is logged with what it changed.
	Relists *prometheus.CounterVec
	// ClusterPolicyVersion is 1 for the ClusterNetworkPolicy API version the Watcher reads
	// (v1beta1, or v1alpha2 where only it is served) and 0 for the other; 0 for both while the
	// API server serves neither (no CRD).
	ClusterPolicyVersion *prometheus.GaugeVec
	// RelistStaleness observes, at each relist, how long the resource's view had been stale: from
	// the last list, event or bookmark received before it to the relist.
	RelistStaleness *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		InvalidObjects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_invalid_objects_total",
			Help: "API objects skipped because they cannot be converted (each version counted once), or policies not enforced as written because they are too costly to compile, by kind.",
		}, []string{"kind"}),
		PartlyEnforced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_partly_enforced_objects_total",
			Help: "API objects enforced only in part (ClusterNetworkPolicy peers of a newer API, domainNames outside Accept rules), each version counted once, by kind.",
		}, []string{"kind"}),
		Updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_sync_updates_total",
			Help: "Model updates emitted by the API watcher, by kind.",
		}, []string{"kind"}),
		WatchOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftpolicy_watch_open",
			Help: "1 while a watch of the resource on the API server is open.",
		}, []string{"resource"}),
		WatchRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_watch_restarts_total",
			Help: "Watches of the resource opened after the first (API server watch timeouts, broken connections, expired resourceVersions).",
		}, []string{"resource"}),
		Lists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_watch_lists_total",
			Help: "Complete lists of the resource: the initial one and relists when a watch could not resume.",
		}, []string{"resource"}),
		Streaming: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftpolicy_watch_streaming",
			Help: "1 when the resource's last list was streamed from the API server (WatchList), 0 when it was a plain list.",
		}, []string{"resource"}),
		LastEvent: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftpolicy_watch_last_event_timestamp_seconds",
			Help: "When the API server last sent a list, event or bookmark of the resource (Unix time).",
		}, []string{"resource"}),
		Relists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_watch_relists_total",
			Help: "Relists of the resource: lists after the first, when a watch could not resume (an expired resourceVersion, an API server restart).",
		}, []string{"resource"}),
		ClusterPolicyVersion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "nftpolicy_cnp_api_version",
			Help: "1 for the ClusterNetworkPolicy API version read (v1beta1, or v1alpha2 where only it is served), 0 for the other; 0 for both while neither is served.",
		}, []string{"version"}),
		RelistStaleness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "nftpolicy_watch_relist_staleness_seconds",
			Help:    "At each relist of the resource, how long its view had been stale: from the last list, event or bookmark received before it.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14), // 0.5 s to ~2.3 h
		}, []string{"resource"}),
	}
	if reg != nil {
		reg.MustRegister(m.InvalidObjects, m.PartlyEnforced, m.Updates, m.WatchOpen, m.WatchRestarts, m.Lists, m.Streaming, m.LastEvent,
			m.Relists, m.RelistStaleness, m.ClusterPolicyVersion)
	}
	return m
}
