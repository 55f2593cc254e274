package agentproc

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// Addresses inside a node namespace: the forwarded API server, and the agent's servers.
const (
	APIAddr     = "127.0.0.1:6443"
	MetricsURL  = "http://127.0.0.1:9464/metrics"
	ReadyURL    = "http://127.0.0.1:9465/readyz"
	metricsAddr = "127.0.0.1:9464"
	healthAddr  = "127.0.0.1:9465"
)

// Build compiles cmd/nftpolicy into dir, with the build tags given (nftpolicy_profile: the
// agent writes Go profiles, cmd/nftpolicy/profile.go), and returns the binary's path.
func Build(dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "nftpolicy")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	if out, err := exec.Command("go", append(args, "github.com/nftpolicy/nftpolicy/cmd/nftpolicy")...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the agent: %w\n%s", err, out)
	}
	return bin, nil
}

// ForwardAPI makes the API server reachable at APIAddr inside the namespace.
func ForwardAPI(cl *netns.Cluster, netnsName string, s *kube.Server) error {
	if err := cl.Forward(netnsName, netip.MustParseAddrPort(APIAddr), strings.TrimPrefix(s.URL, "https://")); err != nil {
		return fmt.Errorf("forwarding the API server into %s: %w", netnsName, err)
	}
	return nil
}

// Config describes one agent process.
type Config struct {
	Bin    string
	Node   string // the node's name (--node-name)
	NetNS  string // the node's network namespace
	Server *kube.Server
	Dir    string   // its kubeconfig and log file are written here
	Args   []string // flags after the common ones (node name, kubeconfig, listen addresses, JSON logs)
	// Wrap, if set, is a command the agent runs under inside the namespace (e.g. setpriv, to run
	// it with a container's capabilities): the agent's command line follows it.
	Wrap []string
	// Env is added to the environment the agent inherits from the test process ("KEY=value").
	Env []string
	// LockFile is the agent's --lock-file: agents given the same one program the table one at a
	// time. "": a file of the node under Dir, so the nodes of one cluster, which share the
	// machine's file system, do not exclude each other, and the machine's /run is not touched.
	LockFile string
	// NoLockFile: the binary predates --lock-file (an earlier release), which is not passed.
	NoLockFile bool
	// MetricsAddr and HealthAddr are the agent's listen addresses inside the namespace; "": the
	// defaults of MetricsURL and ReadyURL. A second agent in one namespace is given others, so
	// that a test reaches each (the product's agents share them, SO_REUSEPORT).
	MetricsAddr, HealthAddr string
}

// Process is a running agent.
type Process struct {
	Node, LogPath string
	cmd           *exec.Cmd
	log           *os.File
	exited        chan error
	client        *http.Client
	// addrs maps the default listen addresses to this agent's (Config.MetricsAddr, HealthAddr)
	addrs *strings.Replacer
}

// Start starts the agent; it reaches the API server at APIAddr (see ForwardAPI), which need not
// be reachable yet.
func Start(cfg Config) (*Process, error) {
	kubeconfig := filepath.Join(cfg.Dir, "kubeconfig-"+cfg.Node)
	if err := cfg.Server.Kubeconfig(kubeconfig, "https://"+APIAddr); err != nil {
		return nil, err
	}
	mAddr, hAddr := cmp.Or(cfg.MetricsAddr, metricsAddr), cmp.Or(cfg.HealthAddr, healthAddr)
	p := &Process{Node: cfg.Node, LogPath: filepath.Join(cfg.Dir, "agent-"+cfg.Node+".log"), exited: make(chan error, 1),
		client: netns.HTTPClient(cfg.NetNS, 2*time.Second), addrs: strings.NewReplacer(metricsAddr, mAddr, healthAddr, hAddr)}
	var err error
	if p.log, err = os.Create(p.LogPath); err != nil {
		return nil, err
	}
	lockFile := cfg.LockFile
	if lockFile == "" {
		lockFile = filepath.Join(cfg.Dir, "lock-"+cfg.Node, "agent.lock")
	}
	args := append(append([]string{"netns", "exec", cfg.NetNS}, cfg.Wrap...), cfg.Bin, "run", "--node-name", cfg.Node,
		"--kubeconfig", kubeconfig, "--metrics-addr", mAddr, "--health-addr", hAddr, "--log-format", "json")
	if !cfg.NoLockFile {
		args = append(args, "--lock-file", lockFile)
	}
	args = append(args, cfg.Args...)
	p.cmd = exec.Command("ip", args...)
	if len(cfg.Env) > 0 {
		p.cmd.Env = append(os.Environ(), cfg.Env...)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// the agent dies with this process; the starting thread must not exit before (Pdeathsig)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("starting the agent of node %s: %w", cfg.Node, err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	return p, nil
}

// Pid is the process id of the agent's `ip netns exec` wrapper (which execs the agent).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Get fetches a URL of the agent's servers inside its namespace (MetricsURL, ReadyURL: at the
// addresses the agent was given): status code and body.
func (p *Process) Get(url string) (int, string, error) {
	resp, err := p.client.Get(p.addrs.Replace(url))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// WaitCaughtUp polls the agent's nftpolicy_source_resource_version until its table reflects
// each resource ("pods", "namespaces", "networkpolicies") at least up to the given
// resourceVersion — the version of a write the caller made — or timeout passes.
func (p *Process) WaitCaughtUp(ctx context.Context, versions map[string]uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, body, err := p.Get(MetricsURL)
		behind := ""
		for res, want := range versions {
			if got := sourceVersion(body, res); got < want {
				behind += fmt.Sprintf(" %s at %d, want %d;", res, got, want)
			}
		}
		if err == nil && behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("agent of node %s has not committed:%s (%v)", p.Node, behind, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sourceVersion reads nftpolicy_source_resource_version{resource="res"} from a metrics page
// (0 when absent).
func sourceVersion(metrics, res string) uint64 {
	v, _ := testenv.MetricValue(metrics, `nftpolicy_source_resource_version{resource="`+res+`"}`)
	return uint64(v)
}

// WaitReady polls /readyz until the agent is ready (in sync and applied), it exits, ctx ends or
// timeout passes.
func (p *Process) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := p.Get(ReadyURL)
		if code == http.StatusOK {
			return nil
		}
		select {
		case werr := <-p.exited:
			p.exited <- werr
			return fmt.Errorf("agent of node %s exited: %v (log %s)", p.Node, werr, p.LogPath)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("/readyz %d %s", code, strings.TrimSpace(body))
			}
			return fmt.Errorf("agent of node %s not ready after %v: %w (log %s)", p.Node, timeout, err, p.LogPath)
		}
	}
}

// Stop sends SIGTERM (the agent stops cleanly, leaving its table unless --cleanup-on-exit) and
// waits for the exit, killing it after 10 s.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		err = errors.Join(errors.New("killed after 10 s"), <-p.exited)
	}
	p.exited <- err // Stop may be called again
	p.log.Close()
	return err
}

// Kill sends SIGKILL, as a crash or the kernel's OOM killer would end the agent (its table stays),
// and waits for the exit.
func (p *Process) Kill() error {
	_ = p.cmd.Process.Kill()
	err := <-p.exited
	p.exited <- err // Stop and Exited still see it
	p.log.Close()
	return err
}

// Exited reports, without waiting, whether the agent has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case err := <-p.exited:
		p.exited <- err
		return true, err
	default:
		return false, nil
	}
}

// Tail is the end of the agent's log, at most n bytes.
func (p *Process) Tail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	if len(b) <= n {
		return string(b)
	}
	return "…" + string(b[len(b)-n:])
}

// LogLines are the agent's JSON log lines whose message is msg, each decoded into a map; lines
// that are not JSON are skipped.
func (p *Process) LogLines(msg string) ([]map[string]any, error) {
	f, err := os.Open(p.LogPath)
	if err != nil {
		return nil, fmt.Errorf("agent log: %w", err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("agent log %s: %w", p.LogPath, err)
	}
	return out, nil
}
