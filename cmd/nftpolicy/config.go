package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// runConfig is the configuration of `nftpolicy run`: flags, with environment variables as
// defaults where operators expect them (NODE_NAME from the downward API, KUBECONFIG).
type runConfig struct {
	NodeName   string
	Kubeconfig string
	// APICompression: accept the API server's large answers gzipped (restConfig).
	APICompression   bool
	ResyncInterval   time.Duration
	WorkloadPrefixes []string
	AntiSpoofing     bool
	Bridges          []string
	MetricsAddr      string
	HealthAddr       string
	HealthSocket     string
	LogFormat        string
	LogLevel         slog.Level
	CleanupOnExit    bool
	Table            string
	// LockFile: one agent at a time programs the node's table (agent.RunConfig.LockFile).
	LockFile string
	// FailureThreshold is the number of consecutive failed applies after which /healthz fails.
	FailureThreshold int
	// WatchStaleAfter: /readyz fails once a watch of the API server has been closed this long.
	WatchStaleAfter time.Duration
	// CRDRecheck: how often the API server is asked again for ClusterNetworkPolicies, and for
	// each resource of Calico's policy API, while it does not serve them.
	CRDRecheck time.Duration
	// CompileBudget bounds the work of one endpoint group's compile (nft.DefaultCompileBudget).
	CompileBudget int64
	// DenyLog, with --log-denied: the NFLOG group and rate of the deny chains' logs.
	DenyLog *nft.DenyLog
	// DNSGroup, --dns-answers-group: the NFLOG group of the DNS answers that domainNames peers
	// learn their addresses from (0: such peers match nothing).
	DNSGroup uint16
	// CountAllowed: count what each policy allows too (nft.Config.CountAllowed).
	CountAllowed bool
	// FailsafeIn and FailsafeOut: the ports no host endpoint's policy blocks.
	FailsafeIn, FailsafeOut []nft.Failsafe
	// AutoHostEndpoints: every Node is a "*" host endpoint (agent.RunConfig.AutoHostEndpoints).
	AutoHostEndpoints bool
}

// errUsage marks configuration errors: one clear line on stderr and exit code 2.
var errUsage = errors.New("usage")

func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
}

// parseRunFlags reads run's flags; -h prints its usage to helpOut.
func parseRunFlags(args []string, getenv func(string) string, helpOut io.Writer) (runConfig, error) {
	var c runConfig
	fs := flag.NewFlagSet("nftpolicy run", flag.ContinueOnError)
	fs.StringVar(&c.NodeName, "node-name", getenv("NODE_NAME"), "this node's name (env NODE_NAME); local endpoints are pods with spec.nodeName equal to it")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", getenv("KUBECONFIG"), "kubeconfig file (env KUBECONFIG); empty: in-cluster configuration")
	fs.BoolVar(&c.APICompression, "api-compression", true, "ask the API server to gzip its answers of over 128 KiB (the initial lists and relists of every pod, namespace and policy; watch events never are): fewer bytes for the agent's CPU to inflate them; false: uncompressed, as kube-controller-manager and kube-scheduler run (a kubeconfig's disable-compression does the same)")
	fs.DurationVar(&c.ResyncInterval, "resync-interval", 90*time.Second, "how often the nftables table is read back and drift repaired")
	prefixes := fs.String("workload-iface-prefixes", "veth,cali,cni,lxc,eni,tap", "comma-separated prefixes of host interfaces that lead to pods")
	fs.BoolVar(&c.AntiSpoofing, "anti-spoofing", true, "forward from a workload interface only its pod's source addresses, nothing before its endpoint is programmed; a prefix is checked once a local pod is seen behind it (its host route's interface, or its bridge port)")
	bridges := fs.String("bridge", "", "comma-separated bridges whose ports lead to pods (flannel, the bridge plugin: cni0); empty: every bridge, found without configuration")
	fs.StringVar(&c.MetricsAddr, "metrics-addr", ":9464", "address of the Prometheus /metrics endpoint; empty disables it")
	fs.StringVar(&c.HealthAddr, "health-addr", "127.0.0.1:9465", "address of /healthz and /readyz (the kubelet probes the node's loopback); empty disables them")
	fs.StringVar(&c.HealthSocket, "health-socket", "", "unix socket of this agent's own that also serves /healthz and /readyz, for `nftpolicy probe` (a file in the pod's own emptyDir: the health address is shared with a standing-by agent); empty disables it")
	fs.StringVar(&c.LogFormat, "log-format", "", "tint or json (default: tint on a terminal, json otherwise)")
	level := fs.String("log-level", "info", "debug, info, warn or error")
	fs.BoolVar(&c.CleanupOnExit, "cleanup-on-exit", false, "remove the nftables table on exit (default: leave it, so policy stays enforced across restarts)")
	fs.StringVar(&c.Table, "table", "nftpolicy", "name of the inet nftables table the agent owns")
	fs.StringVar(&c.LockFile, "lock-file", "/run/nftpolicy/agent.lock", "lock that makes one agent at a time program the table (the table's name is added: agent.<table>.lock); a second agent stands by, in sync and ready, until the first exits; empty disables it")
	fs.IntVar(&c.FailureThreshold, "failure-threshold", 5, "consecutive failed applies after which /healthz reports unhealthy")
	fs.Int64Var(&c.CompileBudget, "compile-budget", nft.DefaultCompileBudget, "work one group of endpoints' compile may do (about a rule visited or a port range painted each); a group over it has its costliest policy rejected: counted in nftpolicy_invalid_objects_total and logged")
	fs.DurationVar(&c.WatchStaleAfter, "watch-stale-after", time.Minute, "/readyz fails once a watch of the API server has been closed, or an apply has run, this long (the table stays in force; /healthz is not affected); 0 disables")
	fs.DurationVar(&c.CRDRecheck, "crd-recheck-interval", 30*time.Second, "while the API server does not serve ClusterNetworkPolicies or a resource of Calico's projectcalico.org/v3 (no CRD), how often to look for them again")
	logDenied := fs.Bool("log-denied", false, "log each denied packet (pods, port, the policy or tier default that denied), within --log-denied-rate per deny reason; the accept path is not touched")
	def := nft.DefaultDenyLogLimit
	logRate := fs.String("log-denied-rate", fmt.Sprintf("%d/%s", def.Rate, def.Unit), "most denied packets logged per deny reason: N/second, N/minute, N/hour or N/day, after a burst of --log-denied-burst")
	logBurst := fs.Uint("log-denied-burst", uint(def.Burst), "denied packets logged at once above --log-denied-rate")
	fs.BoolVar(&c.CountAllowed, "count-allowed", false, "count the packets each policy allows too, in nftpolicy_policy_packets_total (denied ones are always counted)")
	logGroup := fs.Uint("log-denied-group", 100, "NFLOG group the deny chains log to, which the agent reads (no other process of the node may bind it)")
	failsafeIn := fs.String("failsafe-inbound-host-ports", nft.DefaultFailsafeIn, "ports to this node that no host endpoint's policy blocks, in Felix's form: protocol:port or protocol:net:port for sources in net (tcp:22,udp:10.0.0.0/8:68,tcp:[fd00::/8]:22; none for no port)")
	failsafeOut := fs.String("failsafe-outbound-host-ports", nft.DefaultFailsafeOut, "ports from this node that no host endpoint's policy blocks, in Felix's form: protocol:port or protocol:net:port for destinations in net (none for no port)")
	fs.BoolVar(&c.AutoHostEndpoints, "auto-host-endpoints", false, "make every Node a host endpoint of all its interfaces, with its labels and Calico's projectcalico-default-allow profile (blocks nothing until a GlobalNetworkPolicy selects it); nothing is written to the API")
	dnsGroup := fs.Uint("dns-answers-group", 0, "enforce ClusterNetworkPolicy domainNames peers: NFLOG group the DNS answers to the node's pods are copied to and held in while the agent commits their addresses (no other process of the node may bind it); 0: domainNames peers match nothing")
	if err := parseFlags(fs, args, helpOut); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, usageErrorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if c.FailsafeIn, err = nft.ParseFailsafes(*failsafeIn); err != nil {
		return c, usageErrorf("--failsafe-inbound-host-ports: %v", err)
	}
	if c.FailsafeOut, err = nft.ParseFailsafes(*failsafeOut); err != nil {
		return c, usageErrorf("--failsafe-outbound-host-ports: %v", err)
	}
	if *logDenied {
		limit, err := parseRate(*logRate)
		if err != nil {
			return c, err
		}
		if *logBurst < 1 || *logBurst > 1<<16 || *logGroup > 1<<16-1 {
			return c, usageErrorf("--log-denied-burst must be 1-65536 and --log-denied-group 0-65535")
		}
		limit.Burst = uint32(*logBurst)
		c.DenyLog = &nft.DenyLog{Group: uint16(*logGroup), Limit: limit}
	}
	if *dnsGroup > 1<<16-1 {
		return c, usageErrorf("--dns-answers-group must be 0-65535")
	}
	c.DNSGroup = uint16(*dnsGroup)
	if c.NodeName == "" {
		return c, usageErrorf("the node name is required: set NODE_NAME or --node-name")
	}
	if err := c.LogLevel.UnmarshalText([]byte(*level)); err != nil {
		return c, usageErrorf("--log-level %q: want debug, info, warn or error", *level)
	}
	switch c.LogFormat {
	case "", "tint", "json":
	default:
		return c, usageErrorf("--log-format %q: want tint or json", c.LogFormat)
	}
	if c.ResyncInterval <= 0 {
		return c, usageErrorf("--resync-interval must be positive, got %v", c.ResyncInterval)
	}
	if c.WatchStaleAfter < 0 {
		return c, usageErrorf("--watch-stale-after must not be negative, got %v", c.WatchStaleAfter)
	}
	if c.CRDRecheck <= 0 {
		return c, usageErrorf("--crd-recheck-interval must be positive, got %v", c.CRDRecheck)
	}
	if c.CompileBudget < 1 {
		return c, usageErrorf("--compile-budget must be positive, got %d", c.CompileBudget)
	}
	if c.FailureThreshold < 1 {
		return c, usageErrorf("--failure-threshold must be at least 1")
	}
	for _, b := range strings.Split(*bridges, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.Bridges = append(c.Bridges, b)
		}
	}
	for _, p := range strings.Split(*prefixes, ",") {
		if p = strings.TrimSpace(p); p != "" {
			c.WorkloadPrefixes = append(c.WorkloadPrefixes, p)
		}
	}
	return c, nil
}

// parseRate reads N/second, N/minute, N/hour or N/day.
func parseRate(s string) (ruleset.Limit, error) {
	units := map[string]ruleset.LimitUnit{"second": ruleset.PerSecond, "minute": ruleset.PerMinute, "hour": ruleset.PerHour, "day": ruleset.PerDay}
	n, unit, _ := strings.Cut(s, "/")
	rate, err := strconv.ParseUint(n, 10, 32)
	u, ok := units[unit]
	if err != nil || rate == 0 || !ok {
		return ruleset.Limit{}, usageErrorf("--log-denied-rate %q: want N/second, N/minute, N/hour or N/day with N ≥ 1", s)
	}
	return ruleset.Limit{Rate: rate, Unit: u}, nil
}

// isTerminal reports whether f is a character device (a terminal), without a dependency.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parseFlags parses a subcommand's flags: -h prints its usage to helpOut (flag.ErrHelp is
// returned), any other problem is a usage error.
func parseFlags(fs *flag.FlagSet, args []string, helpOut io.Writer) error {
	fs.SetOutput(io.Discard) // errors are reported once, by the caller
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(fs, helpOut)
			return err
		}
		return usageErrorf("%v", err)
	}
	return nil
}
