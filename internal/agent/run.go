package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/ifmon"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// RunConfig is everything one agent needs: where the cluster is, which node it is, which network
// namespace it programs.
type RunConfig struct {
	Client   sync.Client
	NodeName string
	// NetNSFD is an open handle of the network namespace to program and watch; < 0: the current
	// one (the product); tests run one agent per node namespace inside one process.
	NetNSFD        int
	Table          string
	ResyncInterval time.Duration
	// WorkloadPrefixes are the name prefixes of host interfaces that lead to pods: ifmon maps
	// each pod to its interface (a /32 or /128 host route through one).
	WorkloadPrefixes []string
	// AntiSpoofing makes the dataplane forward from a workload interface only its pod's source
	// addresses, and nothing before the pod's endpoint is programmed (fail closed). A prefix is
	// checked once a local pod has been seen behind an interface of it: its host route's (Calico,
	// kindnet, ptp) or its bridge port's (flannel, the bridge plugin: checked in the bridge
	// companion table, internal/nft/kernel).
	AntiSpoofing bool
	// Bridges, when set, are the only bridges whose ports ifmon looks behind for pods; empty:
	// every bridge of the namespace.
	Bridges []string
	// MetricsAddr and HealthAddr are listen addresses ("" disables); MetricsListener and
	// HealthListener, when set, are used instead (tests listen inside a namespace).
	MetricsAddr, HealthAddr         string
	MetricsListener, HealthListener net.Listener
	// HealthSocket, if set, is a unix socket of this agent's own (a file in the pod's own
	// emptyDir) that serves /healthz and /readyz too: HealthAddr is shared with a standing-by
	// agent (SO_REUSEPORT), so either may answer there, while the kubelet's exec probes
	// (`nftpolicy probe`) reach this agent alone through the socket. A file left at the path
	// (a previous container of the pod) is replaced.
	HealthSocket     string
	FailureThreshold int
	Logger           *slog.Logger
	// CleanupOnExit removes the table when Run returns — only if this agent holds the table's
	// lock (or none is configured): an agent that stood by never removes what another wrote, and
	// the lock is released only after the removal. A rolling update of agents that clean up
	// leaves the node without the table from the old agent's exit to the new one's first commit.
	CleanupOnExit bool
	// LockFile is the path of the lock that makes one agent at a time program a node's table
	// (LockPath adds the table's name; lock.go); "" disables it.
	LockFile string
	// Registry receives the metrics; nil makes a new one.
	Registry *prometheus.Registry
	// FirstCommit, if set, is called once, when the whole state has first been committed (the
	// end of the start-up: the binary ends TuneGoRuntime's start-up settings there).
	FirstCommit func()
	// WatchStaleAfter: /readyz fails once a watch of the API server has been closed, or an
	// apply has been running, for longer (Health.StaleAfter); 0: never.
	WatchStaleAfter time.Duration
	// CRDRecheck: how often the API server is asked again for ClusterNetworkPolicies while it
	// does not serve them (sync.Config.AbsentRecheck); 0: 30 s.
	CRDRecheck time.Duration
	// CompileBudget bounds one endpoint group's compile (nft.Config.CompileBudget; 0: the default).
	CompileBudget int64
	// DenyLog, if set, logs denied packets within a rate per deny reason: the deny chains send
	// them to its NFLOG group and the agent writes a line for each (denylog.go).
	DenyLog *nft.DenyLog
	// CountAllowed counts the packets each policy allows too (nft.Config.CountAllowed), for
	// nftpolicy_policy_packets_total (policycounts.go).
	CountAllowed bool
	// Host configures the policing of the node's own traffic through host endpoints: failsafe
	// ports and the API server addresses kept open whatever the policies say. Its
	// WorkloadPrefixes are WorkloadPrefixes (traffic between the node and its pods is not a host
	// endpoint's).
	Host nft.HostConfig
	// AutoHostEndpoints makes each Node a "*" host endpoint with its labels and Calico's
	// default-allow profile (sync.Config.AutoHostEndpoints).
	AutoHostEndpoints bool
	// DNSGroup, when not 0, enforces domainNames peers: the NFLOG group the DNS answers to the
	// node's pods are copied to, which the agent reads (domainnames.go). 0: such peers match
	// nothing.
	DNSGroup uint16
	// DNSLimits bound the addresses learnt from DNS answers and set their timeouts; nil:
	// fqdn.DefaultLimits.
	DNSLimits *fqdn.Limits
}

// Run runs the agent until ctx is done: sync → graph → nft, with ifmon beside. On return the
// table stays in force unless CleanupOnExit. Once ctx is done Run returns within shutdownGrace,
// leaving an apply that still runs to finish or to end with the process; with CleanupOnExit it
// waits for that apply, then removes the table.
func Run(ctx context.Context, cfg RunConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	metrics := NewMetrics(reg)
	syncMetrics := sync.NewMetrics(reg)
	watcher := sync.New(sync.Config{Client: cfg.Client, NodeName: cfg.NodeName, Logger: log.With("stage", "sync"),
		Metrics: syncMetrics, AbsentRecheck: cfg.CRDRecheck, AutoHostEndpoints: cfg.AutoHostEndpoints})
	health := &Health{FailureThreshold: int64(cfg.FailureThreshold), StaleAfter: cfg.WatchStaleAfter,
		WatchDown: watcher.WatchDown}
	dp, err := newApplier(cfg, log, syncMetrics)
	if err != nil {
		return err
	}
	loopRunning := false
	defer func() {
		if !loopRunning { // else the loop is still in an apply, and the process is ending
			_ = dp.Close()
		}
	}()
	reg.MustRegister(newPacketCollector(dp))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 4) // the first error of a server or source ends the agent
	if err := serveEndpoints(ctx, cfg, reg, health, errs); err != nil {
		return err
	}
	updates := make(chan []model.Update, 64)
	if err := startSources(ctx, cfg, log, dp, reg, watcher, updates, errs); err != nil {
		return err
	}
	tableChanges, err := startTableMonitor(ctx, dp, errs)
	if err != nil {
		return err
	}
	domains := &domainNames{log: log.With("stage", "fqdn")}
	if cfg.DNSGroup != 0 {
		if domains, err = startDomainNames(ctx, cfg, log, reg, errs); err != nil {
			return err
		}
	}
	lock, programming, err := lockTable(ctx, cfg.LockFile, dp.Table().Name, log, metrics)
	if err != nil {
		return err
	}
	defer func() {
		if !loopRunning { // else the loop may still write the table: the lock ends with the process
			_ = lock.release()
		}
	}()

	loopErr := make(chan error, 1)
	loopRunning = true
	go func() {
		loopErr <- Loop(ctx, Config{ResyncInterval: cfg.ResyncInterval, Logger: log, Metrics: metrics, Health: health,
			FirstCommit: cfg.FirstCommit, Sources: 2, // the API watcher and the interface monitor
			TableChanges: tableChanges, Programming: programming},
			updates, graph.New(graph.Config{NodeName: cfg.NodeName, ReportHost: hostProblemReporter(log, metrics)}), nftAdapter{dp, domains})
	}()
	log.Info("agent started", "node", cfg.NodeName, "table", cfg.Table)
	select {
	case err = <-errs:
	case err = <-loopErr:
		loopRunning = false
	case <-ctx.Done():
	}
	cancel()
	if loopRunning {
		var lerr error
		if loopRunning, lerr = awaitLoop(loopErr, cfg.CleanupOnExit, log); err == nil {
			err = lerr
		}
	}
	cleanup := cfg.CleanupOnExit && lock.Held() // a standing-by agent never removes another's table
	if cleanup {
		if cerr := dp.Cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the table: %w", cerr))
		}
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	log.Info("agent stopped", "node", cfg.NodeName, "table_kept", !cleanup)
	return err
}

// newApplier opens the kernel applier of cfg's namespace and table.
func newApplier(cfg RunConfig, log *slog.Logger, syncMetrics *sync.Metrics) (*kernel.Applier, error) {
	ncfg := nft.Config{Table: cfg.Table, Logger: log.With("stage", "nft"), CompileBudget: cfg.CompileBudget,
		// a policy the compiler cannot afford counts as an invalid object of its kind
		Rejected: func(k model.PolicyKey, _ string) { syncMetrics.InvalidObjects.WithLabelValues(k.Kind).Inc() }}
	if cfg.AntiSpoofing {
		ncfg.WorkloadPrefixes = cfg.WorkloadPrefixes
	}
	ncfg.DenyLog, ncfg.CountAllowed = cfg.DenyLog, cfg.CountAllowed
	ncfg.Host = cfg.Host
	ncfg.Host.WorkloadPrefixes = cfg.WorkloadPrefixes
	log.Info("host endpoints: kept open whatever the policies say", "api_servers", fmt.Sprint(cfg.Host.APIServers),
		"failsafe_inbound", fmt.Sprint(cfg.Host.FailsafeIn), "failsafe_outbound", fmt.Sprint(cfg.Host.FailsafeOut),
		"auto_host_endpoints", cfg.AutoHostEndpoints)
	return kernel.Open(cfg.NetNSFD, ncfg)
}

// serveEndpoints serves /metrics and /healthz, /readyz on their listeners or addresses until ctx
// ends; a server's failure is sent to errs.
func serveEndpoints(ctx context.Context, cfg RunConfig, reg *prometheus.Registry, health *Health, errs chan<- error) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err := serve(ctx, "metrics", cfg.MetricsListener, cfg.MetricsAddr, mux, errs); err != nil {
		return err
	}
	if err := serve(ctx, "health", cfg.HealthListener, cfg.HealthAddr, health.Handler(), errs); err != nil {
		return err
	}
	if cfg.HealthSocket == "" {
		return nil
	}
	if err := os.Remove(cfg.HealthSocket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the previous health socket: %w", err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", cfg.HealthSocket)
	if err != nil {
		return fmt.Errorf("listening for health on %s: %w", cfg.HealthSocket, err)
	}
	return serve(ctx, "health socket", l, "", health.Handler(), errs)
}

// serve serves h on l, else on a listener of addr ("" serves nothing), until ctx ends.
func serve(ctx context.Context, name string, l net.Listener, addr string, h http.Handler, errs chan<- error) error {
	if l == nil {
		if addr == "" {
			return nil
		}
		var err error
		if l, err = listenShared(ctx, addr); err != nil {
			return fmt.Errorf("listening for %s on %s: %w", name, addr, err)
		}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("%s server: %w", name, err)
		}
	}()
	return nil
}

// startSources starts the API watcher (behind the deny log's pod index with RunConfig.DenyLog)
// and the interface monitor, which send their updates to the loop's channel until ctx ends; a
// source's failure is sent to errs.
func startSources(ctx context.Context, cfg RunConfig, log *slog.Logger, dp *kernel.Applier, reg prometheus.Registerer,
	watcher *sync.Watcher, updates chan []model.Update, errs chan<- error) error {
	watched := updates
	if cfg.DenyLog != nil {
		var err error
		if watched, err = startDenyLog(ctx, cfg, dp, log, reg, updates, errs); err != nil {
			return err
		}
	}
	go func() {
		if err := watcher.Run(ctx, watched); err != nil && ctx.Err() == nil {
			errs <- fmt.Errorf("watching the API server: %w", err)
		}
	}()
	fd := cfg.NetNSFD
	if fd < 0 {
		fd = 0
	}
	brnf := newBridgeNetfilter(cfg.NetNSFD, log, reg)
	mon := ifmon.New(ifmon.Config{NetNS: fd, WorkloadPrefixes: cfg.WorkloadPrefixes, Bridges: cfg.Bridges,
		Handler: ifmon.HandlerFunc(func(evs []ifmon.Event, us []model.Update) {
			if slices.ContainsFunc(evs, func(e ifmon.Event) bool { _, ok := e.(ifmon.PortAddrSet); return ok }) {
				brnf.check()
			}
			if len(us) == 0 {
				return
			}
			select {
			case updates <- us:
			case <-ctx.Done():
			}
		}),
		// the first commit waits for the first dump: the anti-spoofing and fail-closed sets
		// hold the interfaces of the pods already running
		Synced: func() {
			select {
			case updates <- []model.Update{model.SyncStatusUpdate{Status: model.InSync}}:
			case <-ctx.Done():
			}
		}})
	go func() {
		if err := mon.Run(ctx); err != nil && ctx.Err() == nil {
			errs <- fmt.Errorf("watching interfaces: %w", err)
		}
	}()
	return nil
}

// startTableMonitor watches the table for changes by other processes until ctx ends; a failure
// is sent to errs.
func startTableMonitor(ctx context.Context, dp *kernel.Applier, errs chan<- error) (<-chan ruleset.TableChange, error) {
	tableChanges := make(chan ruleset.TableChange, 16)
	tableMon, err := dp.Monitor(tableChanges)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := tableMon.Run(ctx); err != nil && ctx.Err() == nil {
			errs <- fmt.Errorf("watching the nftables table: %w", err)
		}
	}()
	return tableChanges, nil
}

// awaitLoop waits, once Run's context is done, for the loop to return; running says that it has
// not. The loop returns at once unless an apply or resync runs. The table in force is then the
// one the kernel last committed (a transaction is all or nothing), as after a SIGKILL; without
// cleanup the agent waits at most shutdownGrace for it. The kernel finishes a transaction it is
// committing even if the process exits meanwhile.
func awaitLoop(loopErr <-chan error, cleanup bool, log *slog.Logger) (running bool, err error) {
	var grace <-chan time.Time
	if !cleanup {
		grace = time.After(shutdownGrace)
	}
	select {
	case err = <-loopErr:
		return false, err
	case <-grace:
		log.Warn("stopping without waiting for the running apply; the table stays as last committed",
			"waited", shutdownGrace)
		return true, nil
	}
}

// shutdownGrace is how long Run waits, once its context is done, for an apply or resync the loop
// is running: the agent exits well within a second of SIGTERM.
const shutdownGrace = 100 * time.Millisecond

// nftAdapter gives the kernel applier the loop's Programmer interface; after each apply it
// gives the DNS observer (nil: none) the patterns the table declares sets for.
type nftAdapter struct {
	*kernel.Applier
	domains *domainNames
}

func (a nftAdapter) Apply(msgs []dataplane.Message) error {
	err := a.Applier.Apply(msgs)
	if a.domains != nil {
		a.domains.sync(a.Applier.Builder().DomainNames())
	}
	return err
}

func (a nftAdapter) Stats() TableStats {
	s, tx := a.Applier.Stats()
	return TableStats{Sets: s.Sets, Elements: s.Elements, Chains: s.Chains, Rules: s.Rules, Transactions: tx}
}

// hostProblemReporter logs and counts a host endpoint's problem (graph.Config.ReportHost): an
// expected IP that is not the node's, an interface that does not exist yet, no interface
// holding the expected IPs of an endpoint without interfaceName.
func hostProblemReporter(log *slog.Logger, metrics *Metrics) func(graph.Problem) {
	return func(p graph.Problem) {
		log.Warn("host endpoint: "+p.Message, "object", p.Object)
		metrics.HostEndpointProblems.Inc()
	}
}
