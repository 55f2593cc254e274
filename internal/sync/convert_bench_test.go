package sync_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// BenchmarkConvertPodManyPorts: a pod declaring n named ports (in containers of 100 ports, as a
// container may name each port once) converts in time linear in n.
func BenchmarkConvertPodManyPorts(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "big"},
				Spec:   corev1.PodSpec{NodeName: "node-1"},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}
			for c := range n / 100 {
				ct := corev1.Container{Name: fmt.Sprint("c", c)}
				for i := range 100 {
					ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: fmt.Sprint("p", c*100+i), ContainerPort: int32(1 + (c*100+i)%65535)})
				}
				p.Spec.Containers = append(p.Spec.Containers, ct)
			}
			for range b.N {
				ep, ok, err := sync.ConvertPod(p)
				if err != nil || !ok || len(ep.NamedPorts) != n {
					b.Fatalf("%d named ports, endpoint %v, error %v", len(ep.NamedPorts), ok, err)
				}
			}
		})
	}
}
