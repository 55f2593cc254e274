package nft_test

import (
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// BenchmarkCompileLargePolicy compiles scale.LargePolicyBench's one policy of 200 rules × 50
// peers over 10,000 pods into the table, offline (graph flush and Builder.Apply).
func BenchmarkCompileLargePolicy(b *testing.B) {
	spec := scale.LargePolicyBench()
	ups, pol := scale.LargePolicy(spec)
	ups = append(ups, model.PolicySet{Policy: pol})
	for b.Loop() {
		_, dp := programOffline(b, spec.Node, ups)
		st := dp.Table().Stats()
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
		dp.Apply(g.Flush())
		g.OnUpdate(model.PolicyDeleted{Key: pol.Key})
		dp.Apply(g.Flush())
	}
}

// programOffline feeds updates to a new graph for node and applies its flush to a new builder.
func programOffline(tb testing.TB, node string, ups []model.Update) (*graph.Graph, *nft.Builder) {
	tb.Helper()
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	dp := nft.NewBuilder(nft.Config{})
	dp.Apply(g.Flush())
	return g, dp
}
