package sync_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// BenchmarkDecodePod: one realistic pod (realisticPod: managed fields, env, probes, statuses)
// from its protobuf bytes to the record the pod informer caches, as the list decodes it
// (decodePodFields into a reused Pod value) and as a watch event or client-go's typed list does
// (the generated decoder into a new Pod, then the transform).
func BenchmarkDecodePod(b *testing.B) {
	raw, err := realisticPod(7).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	w := sync.New(sync.Config{})
	b.Run("list", func(b *testing.B) {
		d := w.ListPodDecoder()
		b.ReportAllocs()
		for b.Loop() {
			if err := d.Decode(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := &corev1.Pod{}
			if err := p.Unmarshal(raw); err != nil {
				b.Fatal(err)
			}
			if _, err := w.Transform(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
