package agent

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestHostProblems: through the graph the agent runs, a host endpoint whose expected IP is not
// the node's and whose interface does not exist yet gets one log line and one count per
// problem, however often it resolves again; the interface's address, when ifmon reports it,
// adds none.
func TestHostProblems(t *testing.T) {
	var logs bytes.Buffer
	metrics := NopMetrics()
	g := graph.New(graph.Config{NodeName: "n1", ReportHost: hostProblemReporter(slog.New(slog.NewTextHandler(&logs, nil)), metrics)})
	addr := netip.MustParseAddr
	for _, u := range []model.Update{
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Name: "n1-eth9"}, Node: "n1", Running: true,
			Addrs: []netip.Addr{addr("10.9.9.9")}, Host: &model.HostEndpoint{Interface: "eth9"}}},
		model.HostAddrSet{Addr: addr("10.0.0.1"), Interface: "eth0"},
		model.SyncStatusUpdate{Status: model.InSync},
	} {
		g.OnUpdate(u)
		g.Flush()
	}
	g.OnUpdate(model.HostAddrSet{Addr: addr("10.0.0.2"), Interface: "eth0"})
	g.Flush()
	g.OnUpdate(model.HostAddrSet{Addr: addr("10.0.0.9"), Interface: "eth9"})
	g.Flush()
	if got := testutil.ToFloat64(metrics.HostEndpointProblems); got != 2 {
		t.Errorf("nftpolicy_host_endpoint_problems_total %v, want 2", got)
	}
	for _, want := range []string{"expected IP 10.9.9.9 is not an address of this node", "interface eth9 holds no address of this node"} {
		if n := strings.Count(logs.String(), want); n != 1 {
			t.Errorf("%d lines with %q, want 1:\n%s", n, want, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "object=HostEndpoint/n1-eth9") {
		t.Errorf("the lines do not name the endpoint:\n%s", logs.String())
	}
}
