package sync

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the watcher's Prometheus metrics.
type Metrics struct {
	// InvalidObjects counts object versions the converters rejected, by kind (Pod,
	// NetworkPolicy). A version seen again unchanged (resync, relist) is not counted twice. The
	// agent also counts here the policies its dataplane rejects (too costly to compile).
	InvalidObjects *prometheus.CounterVec
	// Updates counts the model updates the watcher emitted, by kind (endpoint, namespace,
	// policy, sync).
	Updates *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		InvalidObjects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_invalid_objects_total",
			Help: "API objects skipped because they cannot be converted (each version counted once), or policies not enforced as written because they are too costly to compile, by kind.",
		}, []string{"kind"}),
		Updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nftpolicy_sync_updates_total",
			Help: "Model updates emitted by the API watcher, by kind.",
		}, []string{"kind"}),
	}
	if reg != nil {
		reg.MustRegister(m.InvalidObjects, m.Updates)
	}
	return m
}
