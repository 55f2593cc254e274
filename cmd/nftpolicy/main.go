// Command nftpolicy is the per-node network-policy agent. See doc.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nftpolicy/nftpolicy/internal/agent"
	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// version is set at build time (-X main.version=...).
var version = "dev"

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run dispatches the subcommand and maps errors to exit codes: 2 for usage, 1 otherwise. Without
// a command it runs the agent with args as run's flags; -h or --help alone lists the commands.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	name := "run"
	switch {
	case len(args) > 0 && isHelpFlag(args[0]):
		name, args = "help", nil
	case len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-':
		name, args = args[0], args[1:]
	}
	var err error
	if c, ok := lookup(name); ok {
		err = c.run(ctx, args, env{getenv: getenv, stdout: stdout, stderr: stderr})
	} else {
		printCommands(stderr)
		err = usageErrorf("unknown command %q", name)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "nftpolicy:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "nftpolicy:", err)
		return 1
	}
}

// runAgent runs the agent until SIGTERM or SIGINT, after which it stops within a second, leaving
// its table in force; a second signal ends the process at once. Other subcommands end at the
// first signal, as any process does.
func runAgent(ctx context.Context, args []string, e env) error {
	cfg, err := parseRunFlags(args, e.getenv, e.stdout)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	log := newLogger(e.stderr, cfg.LogFormat, cfg.LogLevel)
	set, endStartup := agent.TuneGoRuntime(e.getenv, os.ReadFile)
	if len(set) > 0 {
		log.LogAttrs(ctx, slog.LevelInfo, "Go runtime tuned (GOGC and GOMEMLIMIT override)", set...)
	}
	rc, err := restConfig(cfg.Kubeconfig, cfg.APICompression)
	if err != nil {
		return err
	}
	client, err := sync.NewClient(rc)
	if err != nil {
		return fmt.Errorf("creating the API client: %w", err)
	}
	return agent.Run(ctx, agent.RunConfig{
		Client: client, NodeName: cfg.NodeName, NetNSFD: -1, Table: cfg.Table,
		ResyncInterval: cfg.ResyncInterval, WorkloadPrefixes: cfg.WorkloadPrefixes, AntiSpoofing: cfg.AntiSpoofing, Bridges: cfg.Bridges,
		MetricsAddr: cfg.MetricsAddr, HealthAddr: cfg.HealthAddr, HealthSocket: cfg.HealthSocket, FailureThreshold: cfg.FailureThreshold,
		CleanupOnExit: cfg.CleanupOnExit, LockFile: cfg.LockFile, Logger: log, FirstCommit: endStartup, WatchStaleAfter: cfg.WatchStaleAfter,
		CRDRecheck: cfg.CRDRecheck, CompileBudget: cfg.CompileBudget, DenyLog: cfg.DenyLog, CountAllowed: cfg.CountAllowed,
		Host:              nft.HostConfig{FailsafeIn: cfg.FailsafeIn, FailsafeOut: cfg.FailsafeOut, APIServers: apiServers(ctx, rc.Host, log)},
		AutoHostEndpoints: cfg.AutoHostEndpoints,
		DNSGroup:          cfg.DNSGroup,
	})
}

// restConfig is the API server's configuration: from a kubeconfig file, else in-cluster. With
// compress, answers of over 128 KiB are accepted gzipped, as Go's transport does by default,
// unless the kubeconfig sets disable-compression; without it they are asked for plain. That is
// the initial list and every relist of each resource (watch events are never compressed): plain
// costs the API server more bytes and CPU, gzipped costs the agent the inflating.
func restConfig(kubeconfig string, compress bool) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("loading the API server configuration: %w", err)
	}
	rc.UserAgent = "nftpolicy/" + version
	rc.DisableCompression = rc.DisableCompression || !compress
	return rc, nil
}

// render prints, offline, the table the agent would program on a node for a directory of
// manifests, through the same graph and compiler as the agent.
func render(args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy render", flag.ContinueOnError)
	dir := fs.String("f", "", "directory of YAML manifests (Namespaces, Pods with status, NetworkPolicies, ClusterNetworkPolicies, Nodes; Calico's Tiers, GlobalNetworkPolicies, NetworkPolicies, GlobalNetworkSets, NetworkSets)")
	node := fs.String("node", "", "the node to render for")
	table := fs.String("table", nft.DefaultTable, "table name")
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	if *dir == "" || *node == "" {
		return usageErrorf("render needs -f DIR and --node NAME")
	}
	defer limitRenderMemory(e.getenv)()
	updates, problems := sync.LoadDir(*dir)
	for _, p := range problems {
		if partial := (*sync.PartlyEnforcedError)(nil); errors.As(p, &partial) {
			fmt.Fprintln(e.stderr, "nftpolicy:", p)
			continue
		}
		fmt.Fprintln(e.stderr, "nftpolicy: skipped:", p)
	}
	// Each stage's input is let go once the next stage holds what it needs (nothing refers to
	// it afterwards): each update once the graph has it, the graph once it has flushed, the
	// messages once the builder has folded them, the builder's compiler state once its table
	// is built. Render's peak is the builder's state alone.
	msgs, graphProblems := calculate(*node, updates)
	fsIn, _ := nft.ParseFailsafes(nft.DefaultFailsafeIn)
	fsOut, _ := nft.ParseFailsafes(nft.DefaultFailsafeOut)
	b := nft.NewBuilder(nft.Config{Table: *table, Host: nft.HostConfig{FailsafeIn: fsIn, FailsafeOut: fsOut}})
	b.Apply(msgs)
	for _, p := range graphProblems {
		fmt.Fprintln(e.stderr, "nftpolicy: problem:", p)
	}
	_, err := io.WriteString(e.stdout, ruleset.Render(b.Table()))
	return err
}

// renderMemory is render's soft memory limit (the Go runtime's memory), agent.RenderMemory.
const renderMemory = agent.RenderMemory

// limitRenderMemory sets render's soft memory limit, renderMemory, unless GOMEMLIMIT or GOGC
// says otherwise, and returns what restores the limit found (render also runs inside tests).
// render builds the whole state from nothing, and the builder holds most of it at the end
// (about 85 MiB for BENCHMARKS.md's P7): under Go's GOGC=100 alone the heap would reach twice
// that before a collection. Under the limit the collector runs as the heap nears it instead,
// on the core the single-threaded graph and builder leave free; a state that outgrows the
// limit makes the collector run often, never fail: the runtime caps its CPU at half.
func limitRenderMemory(getenv func(string) string) (restore func()) {
	if getenv("GOMEMLIMIT") != "" || getenv("GOGC") != "" {
		return func() {}
	}
	found := debug.SetMemoryLimit(renderMemory)
	return func() { debug.SetMemoryLimit(found) }
}

// calculate runs updates through a graph for node, which it then lets go: the dataplane
// messages of its first flush and its problems are all that render needs of it.
func calculate(node string, updates []model.Update) ([]dataplane.Message, []graph.Problem) {
	g := graph.New(graph.Config{NodeName: node})
	for i, u := range updates {
		g.OnUpdate(u)
		updates[i] = nil
	}
	return g.Flush(), g.Problems()
}

// cleanup removes the table from the current network namespace.
func cleanup(args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy cleanup", flag.ContinueOnError)
	table := fs.String("table", nft.DefaultTable, "table name")
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	dp, err := kernel.Open(-1, nft.Config{Table: *table})
	if err != nil {
		return err
	}
	defer dp.Close()
	return dp.Cleanup()
}
