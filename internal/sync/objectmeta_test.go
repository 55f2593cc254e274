package sync

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestRecordIsObjectMeta: the caches key a record, and read its version, without allocating;
// what a record lacks reads as empty.
func TestRecordIsObjectMeta(t *testing.T) {
	w := New(Config{})
	r := w.recordPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "7",
		UID: "u", Labels: map[string]string{"a": "b"}}})
	key, err := cache.MetaNamespaceKeyFunc(r)
	if err != nil || key != "ns/p" {
		t.Fatalf("key %q, %v", key, err)
	}
	m, err := meta.Accessor(r)
	if err != nil || m.GetResourceVersion() != "7" || m.GetUID() != "" || m.GetLabels() != nil {
		t.Fatalf("accessor: %v, version %q, uid %q, labels %v", err, m.GetResourceVersion(), m.GetUID(), m.GetLabels())
	}
	if n := testing.AllocsPerRun(100, func() {
		m, _ := meta.Accessor(r)
		_ = m.GetResourceVersion()
		_, _ = cache.MetaNamespaceKeyFunc(r)
	}); n > 1 { // the key string
		t.Errorf("%v allocations to key a record", n)
	}
}
