package agent

import (
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestBridgeNetfilter: the check reads a namespace's br_netfilter sysctls, never writes them, and
// reports each family at 1 when on and 0 when off.
func TestBridgeNetfilter(t *testing.T) {
	ns := netns.NewBare(t, "brnf", netns.LoopbackDown)
	reg := prometheus.NewRegistry()
	b := newBridgeNetfilter(ns.FD, slog.New(slog.DiscardHandler), reg)
	set := func(v string) {
		t.Helper()
		for _, k := range []string{"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables"} {
			if out, err := netns.Exec(t.Context(), ns.Name, "sysctl", "-qw", k+"="+v); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
	}
	for _, tc := range []struct {
		sysctl string
		want   float64
	}{{"1", 1}, {"0", 0}, {"1", 1}} {
		set(tc.sysctl)
		b.check()
		for _, f := range []string{"ipv4", "ipv6"} {
			if got := testutil.ToFloat64(b.gauge.WithLabelValues(f)); got != tc.want {
				t.Errorf("sysctls %s: nftpolicy_bridge_netfilter{family=%q} = %v, want %v", tc.sysctl, f, got, tc.want)
			}
		}
	}
}
