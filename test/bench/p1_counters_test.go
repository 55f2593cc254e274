package bench_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// BenchmarkPacketPathCounters is BenchmarkPacketPath with nftpolicy's allow-side counters
// (nft.Config.CountAllowed, nftpolicy_policy_packets_total) and its deny logging
// (nft.Config.DenyLog): the same topology and policies at 10,000 policies (1,000 with
// BENCH_QUICK), the server judged, the table written alternately with counters and logging and
// without, 15 rounds of 300 ms each way; the figure is the median of the rounds' ratios, counted
// to plain, with its interval (ratioStat) and the connect latency percentiles of each side. Alternating cancels most of the load other processes put on the machine, which moves
// BenchmarkPacketPath's own ratio by several percent. Each rewrite replaces some 10,000 elements
// and is followed by settle before measuring: without it, work the kernel does after the commit
// lands in the window.
func BenchmarkPacketPathCounters(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	n, d, rounds, settle := 10000, 300*time.Millisecond, 15, time.Second
	if quick {
		n = 1000
	}
	pp := newPacketPath(b)
	server, clients := pp.endpoints(benchNode)
	program := func(cfg nft.Config) *kernel.Applier {
		g := graph.New(graph.Config{NodeName: benchNode})
		for _, u := range scale.PacketPathPolicies(n, server, clients...).Updates {
			g.OnUpdate(u)
		}
		dp, err := kernel.Open(pp.node.fd, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { dp.Close() })
		if err := dp.Apply(g.Flush()); err != nil {
			b.Fatal(err)
		}
		return dp
	}
	setStage(fmt.Sprintf("P1 counters, %d policies: programming", n))
	counted := program(nft.Config{CountAllowed: true, DenyLog: &nft.DenyLog{Group: 100, Limit: nft.DefaultDenyLogLimit}})
	if !strings.Contains(counted.Render(), "counter") {
		b.Fatal("the counted table has no counter")
	}
	plain := program(nft.Config{})
	setStage(fmt.Sprintf("P1 counters, %d policies: measuring", n))
	var ratios, on, off []float64
	var onLats, offLats []time.Duration
	var allowed uint64
	for r := range rounds {
		if err := plain.Repair(); err != nil {
			b.Fatal(err)
		}
		if r == 0 {
			pp.check(b, "nftpolicy", n, true)
		}
		time.Sleep(settle)
		base := pp.measureClean(b, d)
		if err := counted.Repair(); err != nil {
			b.Fatal(err)
		}
		if r == 0 {
			pp.check(b, "nftpolicy counted", n, true)
		}
		time.Sleep(settle)
		m := pp.measureClean(b, d)
		if packets, err := counted.Packets(); err != nil {
			b.Fatal(err)
		} else if r == 0 {
			for k, v := range packets.Policies {
				if k.Verdict == "allow" {
					allowed += v
				}
			}
		}
		ratios, on, off = append(ratios, m.perSec/base.perSec), append(on, m.perSec), append(off, base.perSec)
		onLats, offLats = append(onLats, m.lats...), append(offLats, base.lats...)
	}
	if allowed == 0 {
		b.Fatal("the counted table counted no allowed packet")
	}
	ratio := ratioStats(ratios)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ratio.median, "ratio")
	b.ReportMetric(ratio.lo, "ratio-lo")
	b.ReportMetric(ratio.hi, "ratio-hi")
	report.add(row{"P1", fmt.Sprintf("%5d policies select the server: conn/s with counters and deny logging, to without [its ≥ 95 %% interval]", n),
		fmt.Sprintf("%.3f× [%.3f–%.3f] (%.0f vs %.0f conn/s; rounds %.3f–%.3f×; connect p50/p90/p99 %s, without %s)",
			ratio.median, ratio.lo, ratio.hi, median(on), median(off), ratio.min, ratio.max, connectPercentiles(onLats), connectPercentiles(offLats)),
		"≥ 0.98× to be on by default (off: --count-allowed, --log-denied)", ratio.verdict(0.98)})
}
