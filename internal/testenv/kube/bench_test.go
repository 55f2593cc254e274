package kube_test

import (
	"fmt"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	corev1 "k8s.io/api/core/v1"
)

// BenchmarkCreatePod measures CreatePod (create + status patch) against the real API server,
// sequentially and from 8 goroutines: how long fixtures of thousands of pods take to build.
func BenchmarkCreatePod(b *testing.B) {
	s := kube.Require(b, srv)
	ctx := b.Context()
	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	for _, workers := range []int{1, 8} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			ns := testenv.UniqueName("bench") // b.N repeats across runs: a fixed name would exist already
			if err := s.CreateNamespace(ctx, ns, nil); err != nil {
				b.Fatal(err)
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			b.ResetTimer()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						ip := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
						if _, err := s.CreatePod(ctx, ns, fmt.Sprintf("p%d", i), "node-1",
							map[string]string{"app": "bench"}, ports, []netip.Addr{ip}); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
		})
	}
}
