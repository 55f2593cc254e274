package bench_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// BenchmarkIncrementalClusterPolicies is BenchmarkIncremental for ClusterNetworkPolicies: fanout
// with its 2,000 policies shaped as converted ClusterNetworkPolicies (scale.Fanout.Cluster: admin
// and baseline tiers, priorities 0–1000, Allow, Deny and Pass rules in turn), and one spare pod
// joining or leaving one policy's peer selector per change, timed from the graph's update to the
// dataplane's commit; by the action of the rule whose selector it joins, too.
func BenchmarkIncrementalClusterPolicies(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	setStage("P2 incremental, ClusterNetworkPolicies")
	f := fanout
	f.Cluster = true
	_, g, dp := programFanout(b, f, f.Updates(), nft.Config{}, "bc", "table programmed for P2 with ClusterNetworkPolicies (first apply)")
	joinsByAction(b, f, g, dp, func(k int) string { return strings.ToLower(scale.ClusterAction(k).String()) },
		"one pod joins/leaves one ClusterNetworkPolicy peer selector")
}

// joinsByAction times 600 joins and leaves (150 with BENCH_QUICK) of f's spares, programmed in
// g and dp, each from the graph's update to the dataplane's commit, in all and by action(k), the
// action of the rule of selector k; the figures are named by what.
func joinsByAction(b *testing.B, f scale.Fanout, g *graph.Graph, dp *kernel.Applier, action func(k int) string, what string) {
	samples := 600
	if quick {
		samples = 150
	}
	b.Run("apply", func(b *testing.B) {
		n := max(b.N, samples)
		j := joinAndLeave(b, f, g, dp, n, action)
		p50, p99 := percentile(j.total, 50), percentile(j.total, 99)
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(us(p50), "p50-µs/apply")
		b.ReportMetric(us(p99), "p99-µs/apply")
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(j.byClass)) {
			d := percentile(j.byClass[c], 50)
			b.ReportMetric(us(d), "p50-µs/"+c)
			parts = append(parts, fmt.Sprintf("%s %.0f µs", c, us(d)))
		}
		report.add(row{"P2", fmt.Sprintf("%s: graph flush + Applier.Apply, p50 / p99 (%d changes)", what, n),
			fmt.Sprintf("%.0f µs / %.0f µs (p50 by the rule's action: %s)", us(p50), us(p99), strings.Join(parts, ", ")),
			"≤ 500 µs", meets(p50 <= 500*time.Microsecond)})
	})
}
