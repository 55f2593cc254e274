package graph_test

import (
	"runtime"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// BenchmarkHeapAtScale is the heap the graph retains for scale.ColdStart's cluster (100,000 pods,
// 1,000 namespaces, 5,000 policies, 250 local pods), input streamed as the agent receives it and
// the first flush's messages dropped: what set membership and the rest of the graph cost at scale.
func BenchmarkHeapAtScale(b *testing.B) {
	spec := scale.ColdStart()
	var heap uint64
	var sets, members int
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g := graph.New(graph.Config{NodeName: spec.Node})
		for u := range scale.Updates(spec) {
			g.OnUpdate(u)
		}
		sets, members = 0, 0
		for _, m := range g.Flush() {
			if s, ok := m.(dataplane.SetReplaced); ok {
				sets++
				members += len(s.Members)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
		runtime.KeepAlive(g)
	}
	b.ReportMetric(float64(heap)/(1<<20), "retained-MiB")
	b.ReportMetric(float64(sets), "sets")
	b.ReportMetric(float64(members), "members")
}
