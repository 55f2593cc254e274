package e2e

// TestConformance: the runner on the netns cluster (internal/testenv/netns) with one enforcer
// (the agent process, enforcer_e2e_test.go) per node namespace.

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// Enforcer enforces policy on one node of the harness: the agent, programming the node's
// network namespace. newEnforcer provides it.
type Enforcer interface {
	// Start runs enforcement for node and returns once it is ready; it runs until stop is
	// called (stop waits for it to end).
	Start(ctx context.Context, node string) (stop func(), err error)
	// CaughtUp returns once every started node's programmed state reflects each resource up to
	// the given resourceVersion (the barrier, kube.Server.Barrier).
	CaughtUp(ctx context.Context, versions map[string]uint64) error
}

// TestConformance runs every case on IPv4 and on IPv6 on the netns cluster, the agent
// enforcing; nftpolicy explain must give every matrix the traffic validated (explainAgrees).
func TestConformance(t *testing.T) {
	testenv.RequireRoot(t)
	s := kube.Require(t, srv)
	fab := &netnsFabric{cl: netns.NewForTest(t, netns.Config{Nodes: nodeNames(), Layout: podLayout(t)}),
		nsFD: map[string]int{}}
	t.Cleanup(fab.close)
	enf := newEnforcer(t, s, fab.cl)
	h := newHarness(t, s, fab, netpolWorld())
	h.enf = enf
	h.explained = explainAgrees(t, s)

	startEnforcers(t, enf)
	h.runAll(t)
}

// startEnforcers starts enf on every node; they stop when the test ends.
func startEnforcers(t *testing.T, enf Enforcer) {
	t.Helper()
	ctx, stopAll := context.WithCancel(context.Background())
	t.Cleanup(stopAll)
	for _, node := range nodeNames() {
		stop, err := enf.Start(ctx, node)
		if err != nil {
			t.Fatalf("starting the enforcer on node %s: %v", node, err)
		}
		t.Cleanup(stop)
	}
}

// netnsFabric is the netns cluster: TCP and UDP probed by its prober, SCTP by the raw-socket
// prober (sctp_test.go; the kernel has no SCTP sockets).
type netnsFabric struct {
	cl   *netns.Cluster
	list []*netns.Pod   // in the order added
	nsFD map[string]int // open handles of the pods' namespaces, for the SCTP prober
}

func (f *netnsFabric) addPod(_ context.Context, node, ns, name string, serves []served) ([]netip.Addr, error) {
	key := ns + "/" + name
	p, err := f.cl.AddPod(node, ns, name)
	if err != nil {
		return nil, err
	}
	for _, s := range serves {
		if err := f.cl.Serve(p.NetNS, netns.Protocol(s.proto), uint16(s.port)); err != nil {
			return nil, fmt.Errorf("serving %s/%d in %s: %w", s.proto, s.port, key, err)
		}
	}
	fd, err := unix.Open("/run/netns/"+p.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0) // where `ip netns` mounts it, as netns does
	if err != nil {
		return nil, fmt.Errorf("opening the namespace of pod %s: %w", key, err)
	}
	f.nsFD[key] = fd
	f.list = append(f.list, p)
	return p.Addrs, nil
}

func (f *netnsFabric) probe(ctx context.Context, v familyView, proto corev1.Protocol, port int32) (map[[2]string]bool, error) {
	if proto != protocolSCTP {
		return f.cl.ProbeMatrix(ctx, f.list, netns.Protocol(proto), uint16(port), v.is6, probeTimeout)
	}
	var ends []sctpEnd
	for _, p := range f.list {
		ends = append(ends, sctpEnd{Key: p.Key(), NetNS: f.nsFD[p.Key()], IP: v.IP(p.Key())})
	}
	return probeSCTPMatrix(ctx, ends, uint16(port), probeTimeout)
}

func (f *netnsFabric) close() {
	for _, fd := range f.nsFD {
		unix.Close(fd)
	}
}
