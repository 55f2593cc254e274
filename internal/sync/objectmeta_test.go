package sync

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestRecordIsObjectMeta: the caches key a record as they key its API object, and read its
// version, without allocating; what a record lacks reads as empty.
func TestRecordIsObjectMeta(t *testing.T) {
	w := New(Config{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", ResourceVersion: "7",
		UID: "u", Labels: map[string]string{"a": "b"}}}
	r := w.recordPod(pod)
	key, err := cache.MetaNamespaceKeyFunc(r)
	if want, _ := cache.MetaNamespaceKeyFunc(pod); err != nil || key != want || key != "ns/p" {
		t.Fatalf("key %q, %v; the pod's is %q", key, err, want)
	}
	if ns, name, _, ok := keyOf(r); !ok || ns != "ns" || name != "p" {
		t.Fatalf("the Watcher reads namespace %q, name %q (%v)", ns, name, ok)
	}
	for _, tt := range []struct{ namespace, name, version string }{{"ns", "p", "7"}, {"", "cluster-wide", "12"}, {"a", "b", ""}} {
		m := newRecordMeta(tt.namespace, tt.name, tt.version)
		if m.ns() != tt.namespace || m.name() != tt.name || m.version() != tt.version {
			t.Errorf("%+v: reads back namespace %q, name %q, version %q", tt, m.ns(), m.name(), m.version())
		}
	}
	m, err := meta.Accessor(r)
	if err != nil || m.GetResourceVersion() != "7" || m.GetUID() != "" || m.GetLabels() != nil {
		t.Fatalf("accessor: %v, version %q, uid %q, labels %v", err, m.GetResourceVersion(), m.GetUID(), m.GetLabels())
	}
	if n := testing.AllocsPerRun(100, func() {
		m, _ := meta.Accessor(r)
		_ = m.GetResourceVersion()
		_, _ = cache.MetaNamespaceKeyFunc(r)
	}); n > 0 {
		t.Errorf("%v allocations to key a record", n)
	}
}
