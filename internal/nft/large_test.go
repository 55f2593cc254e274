package nft_test

import (
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// BenchmarkCompileLargePolicy compiles scale.LargePolicyBench's one policy of 200 rules × 50
// peers over 10,000 pods into the table, offline (graph flush and Dataplane.Apply).
func BenchmarkCompileLargePolicy(b *testing.B) {
	spec := scale.LargePolicyBench()
	ups, pol := scale.LargePolicy(spec)
	ups = append(ups, model.PolicySet{Policy: pol})
	for b.Loop() {
		_, dp := programOffline(b, spec.Node, ups)
		st, _ := dp.Stats()
		b.ReportMetric(float64(st.Elements), "elements")
		b.ReportMetric(float64(st.Chains), "chains")
	}
}

// BenchmarkAddLargePolicy adds scale.LargePolicyBench's policy to its cluster already applied,
// offline: the graph's and the compiler's share of test/bench's BenchmarkLargePolicy.
func BenchmarkAddLargePolicy(b *testing.B) {
	spec := scale.LargePolicyBench()
	ups, _ := scale.LargePolicy(spec)
	g, dp := programOffline(b, spec.Node, ups)
	for b.Loop() {
		b.StopTimer()
		_, pol := scale.LargePolicy(spec)
		b.StartTimer()
		g.OnUpdate(model.PolicySet{Policy: pol})
		if err := dp.Apply(g.Flush()); err != nil {
			b.Fatal(err)
		}
		g.OnUpdate(model.PolicyDeleted{Key: pol.Key})
		if err := dp.Apply(g.Flush()); err != nil {
			b.Fatal(err)
		}
	}
}

// programOffline feeds updates to a new graph for node and applies its flush to a new offline
// dataplane.
func programOffline(tb testing.TB, node string, ups []model.Update) (*graph.Graph, *nft.Dataplane) {
	tb.Helper()
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	dp := nft.NewOffline(nft.Config{})
	if err := dp.Apply(g.Flush()); err != nil {
		tb.Fatal(err)
	}
	return g, dp
}
