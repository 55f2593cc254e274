package sync

import (
	"bufio"
	"bytes"
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestDecodePodList: a PodList as the API server encodes it (protobuf, in its envelope) decodes
// into the records the transform makes of the typed decode, in order, with the list's metadata.
func TestDecodePodList(t *testing.T) {
	want := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "4711", Continue: "next"}}
	for i := range 50 {
		p := corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprint("ns", i%3), Name: fmt.Sprint("p", i), ResourceVersion: fmt.Sprint(100 + i),
				Annotations: map[string]string{"big": "dropped"}},
			Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa", HostNetwork: i%7 == 0},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i+1),
				PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i+1)}, {IP: fmt.Sprintf("fd00::%x", i+1)}}},
		}
		// items differ from the one before in what they hold (the decoder reuses one Pod value):
		// labels or none, one to three containers with more or fewer ports, one IP or two
		if i%5 != 0 {
			p.Labels = map[string]string{"app": fmt.Sprint("a", i%4)}
		}
		for c := range i%3 + 1 {
			ct := corev1.Container{Name: fmt.Sprint("c", c), Image: "img", Env: []corev1.EnvVar{{Name: "X", Value: "y"}}}
			for k := range (i + c) % 3 {
				ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: fmt.Sprintf("p%d-%d", c, k), ContainerPort: int32(8080 + k), Protocol: corev1.ProtocolTCP})
			}
			p.Spec.Containers = append(p.Spec.Containers, ct)
		}
		if i%4 == 1 {
			p.Status.PodIPs = p.Status.PodIPs[:1]
		}
		want.Items = append(want.Items, p)
	}
	var buf bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(want, &buf); err != nil {
		t.Fatal(err)
	}
	raw := buf.Bytes()
	w := New(Config{})
	if !bytes.HasPrefix(raw, protobufMagic) {
		t.Fatalf("encoded list starts with %q", raw[:4])
	}
	got, err := decodePodList(bufio.NewReader(bytes.NewReader(raw[len(protobufMagic):])), w.recordPod)
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "4711" || got.Continue != "next" {
		t.Errorf("list metadata %+v", got.ListMeta)
	}
	if len(got.Items) != len(want.Items) {
		t.Fatalf("%d pods decoded, want %d", len(got.Items), len(want.Items))
	}
	for i := range want.Items {
		g, _ := CachedPod(got.Items[i])
		r, _ := CachedPod(w.recordPod(&want.Items[i]))
		if !reflect.DeepEqual(g, r) {
			t.Fatalf("pod %d:\n got %+v\nwant %+v", i, g, r)
		}
	}
	for _, cut := range []int{3, len(raw) / 2, len(raw) - len(protobufMagic) - 1} {
		if _, err := decodePodList(bufio.NewReader(bytes.NewReader(raw[len(protobufMagic):len(raw)-cut])), w.recordPod); err == nil {
			t.Errorf("a list truncated by %d bytes decoded without error", cut)
		}
	}
}
