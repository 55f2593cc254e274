package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// agentProcesses runs the agent as the product runs: the nftpolicy binary, one process per node,
// started inside the node's network namespace with `ip netns exec`, watching the test's API
// server through a forwarder on the node's loopback (as a node reaches its API server).
type agentProcesses struct {
	t   *testing.T
	s   *kube.Server
	cl  *netns.Cluster
	bin string
	dir string
}

// apiAddr is where each node namespace reaches the API server (forwarded to the test's).
var apiAddr = netip.MustParseAddrPort("127.0.0.1:6443")

// newEnforcer builds the agent binary once for the test.
func newEnforcer(t *testing.T, s *kube.Server, cl *netns.Cluster) Enforcer {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "nftpolicy")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/nftpolicy").CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return &agentProcesses{t: t, s: s, cl: cl, bin: bin, dir: dir}
}

func (e *agentProcesses) Start(ctx context.Context, node string) (func(), error) {
	ns := e.cl.Node(node).NetNS
	if err := e.cl.Forward(ns, apiAddr, strings.TrimPrefix(e.s.URL, "https://")); err != nil {
		return nil, fmt.Errorf("forwarding the API server into node %s: %w", node, err)
	}
	kubeconfig := filepath.Join(e.dir, "kubeconfig-"+node)
	if err := e.s.Kubeconfig(kubeconfig, "https://"+apiAddr.String()); err != nil {
		return nil, err
	}
	logPath := filepath.Join(e.dir, "agent-"+node+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", ns, e.bin, "run", "--node-name", node, "--kubeconfig", kubeconfig,
		"--metrics-addr", "127.0.0.1:9464", "--health-addr", "127.0.0.1:9465", "--resync-interval", "1m",
		"--anti-spoofing", "--workload-iface-prefixes", "nftp", // the harness routes each pod through its own veth nftp<n>
		"--cleanup-on-exit", "--log-format", "json", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting the agent on node %s: %w", node, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logFile.Close()
		if b, _ := os.ReadFile(logPath); len(b) > 0 {
			e.t.Logf("agent on node %s logged (tail):\n%s", node, tail(string(b), 3000))
		}
	}
	// ready once it is in sync and has applied (/readyz), as a DaemonSet's readiness probe waits
	client := netns.HTTPClient(ns, time.Second)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			stop()
			return nil, fmt.Errorf("agent on node %s exited: %v", node, err)
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		default:
		}
		if resp, err := client.Get("http://127.0.0.1:9465/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("agent on node %s not ready after 60 s", node)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
