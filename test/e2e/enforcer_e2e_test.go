package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// agentProcesses runs the agent as the product runs it: the nftpolicy binary, one process per
// node namespace (internal/testenv/agentproc).
type agentProcesses struct {
	t     *testing.T
	s     *kube.Server
	cl    *netns.Cluster
	bin   string
	dir   string
	procs []*agentproc.Process // the started agents
}

// newEnforcer builds the agent binary once for the test.
func newEnforcer(t *testing.T, s *kube.Server, cl *netns.Cluster) Enforcer {
	t.Helper()
	dir := t.TempDir()
	bin, err := agentproc.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &agentProcesses{t: t, s: s, cl: cl, bin: bin, dir: dir}
}

func (e *agentProcesses) Start(ctx context.Context, node string) (func(), error) {
	ns := e.cl.Node(node).NetNS
	if err := agentproc.ForwardAPI(e.cl, ns, e.s); err != nil {
		return nil, err
	}
	p, err := agentproc.Start(agentproc.Config{Bin: e.bin, Node: node, NetNS: ns, Server: e.s, Dir: e.dir,
		Args: []string{"--resync-interval", "1m", "--cleanup-on-exit", "--log-level", "warn",
			"--anti-spoofing", "--workload-iface-prefixes", "nftp"}}) // each pod's node-side veth is nftp<n>, routed (ptp) or a bridge port
	if err != nil {
		return nil, err
	}
	stop := func() {
		_ = p.Stop()
		if tail := p.Tail(3000); tail != "" {
			e.t.Logf("agent on node %s logged (tail):\n%s", node, tail)
		}
	}
	// ready once it is in sync and has applied, as a DaemonSet's readiness probe waits
	if err := p.WaitReady(ctx, 60*time.Second); err != nil {
		stop()
		return nil, err
	}
	e.procs = append(e.procs, p)
	return stop, nil
}

// CaughtUp waits until each agent's table reflects versions (agentproc.Process.WaitCaughtUp).
func (e *agentProcesses) CaughtUp(ctx context.Context, versions map[string]uint64) error {
	for _, p := range e.procs {
		if err := p.WaitCaughtUp(ctx, versions, 30*time.Second); err != nil {
			return err
		}
	}
	return nil
}
