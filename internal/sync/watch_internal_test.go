package sync

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestDeleteTombstones: when the watch missed a delete, the informer hands over a tombstone
// (DeletedFinalStateUnknown); its key names the object and its last known state decides.
func TestDeleteTombstones(t *testing.T) {
	pod := func(name, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: name}, Spec: corev1.PodSpec{NodeName: "n"},
			Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: ip}}}}
	}
	w := New(Config{})
	w.podChanged(nil, recordPod(pod("a", "10.0.0.1")))
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"}}
	w.setPolicy(np)
	w.setNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	w.pending = nil

	w.deletePod(cache.DeletedFinalStateUnknown{Key: "x/a", Obj: recordPod(pod("a", "10.0.0.1"))})
	w.deletePod(cache.DeletedFinalStateUnknown{Key: "x/noip", Obj: recordPod(pod("noip", ""))}) // never an endpoint: nothing
	w.deletePolicy(cache.DeletedFinalStateUnknown{Key: "x/p", Obj: np})
	w.deletePolicy(cache.DeletedFinalStateUnknown{Key: "x/unknown"}) // never emitted: nothing
	w.deleteNamespace(cache.DeletedFinalStateUnknown{Key: "x"})
	want := []model.Update{
		model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: "a"}},
		model.PolicyDeleted{Key: model.PolicyKey{Kind: KindNetworkPolicy, Namespace: "x", Name: "p"}},
		model.NamespaceDeleted{Name: "x"},
	}
	if !reflect.DeepEqual(w.pending, want) {
		t.Errorf("got %+v\nwant %+v", w.pending, want)
	}
}

// TestUnchangedEmitsNothing: a resync or relist re-delivers objects (pods as the informer
// caches them, podRecord); nothing is emitted for them, and a pod that stops being an endpoint
// is withdrawn once.
func TestUnchangedEmitsNothing(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", ResourceVersion: "1"}, Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	w := New(Config{})
	w.podChanged(nil, recordPod(p))
	w.setPolicy(np)
	w.setNamespace(ns)
	if len(w.pending) != 3 {
		t.Fatalf("initial: %+v", w.pending)
	}
	w.pending = nil
	w.podChanged(recordPod(p), recordPod(p.DeepCopy()))
	w.setPolicy(np.DeepCopy())
	w.setNamespace(ns.DeepCopy())
	if len(w.pending) != 0 {
		t.Errorf("re-delivered unchanged objects emitted %+v", w.pending)
	}
	done := p.DeepCopy()
	done.Status.Phase = corev1.PodFailed
	w.podChanged(recordPod(p), recordPod(done))
	w.podChanged(recordPod(done), recordPod(done.DeepCopy()))
	if want := []model.Update{model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: "a"}}}; !reflect.DeepEqual(w.pending, want) {
		t.Errorf("got %+v, want %+v", w.pending, want)
	}
}

// TestPodEndpointLeavesCache: the event handler takes a record's endpoint out of the cache,
// whether it emits it or (unchanged) not; a record delivered again after that is an error that
// is logged and emits nothing.
func TestPodEndpointLeavesCache(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", ResourceVersion: "1"}, Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}
	var logs bytes.Buffer
	w := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	first := recordPod(p)
	want := *first.pending.Load()
	w.podChanged(nil, first)
	if got := []model.Update{model.EndpointSet{Endpoint: want}}; !reflect.DeepEqual(w.pending, got) {
		t.Fatalf("got %+v, want %+v", w.pending, got)
	}
	unchanged := p.DeepCopy()
	unchanged.ResourceVersion = "2"
	second := recordPod(unchanged)
	w.pending = nil
	w.podChanged(first, second)
	if first.pending.Load() != nil || second.pending.Load() != nil || len(w.pending) != 0 {
		t.Errorf("after the events, endpoints still cached: %v %v; emitted %+v", first.pending.Load(), second.pending.Load(), w.pending)
	}

	relabeled := p.DeepCopy()
	relabeled.ResourceVersion = "3"
	relabeled.Labels = map[string]string{"app": "web"}
	third := recordPod(relabeled)
	w.podChanged(second, third)
	w.pending = nil
	logs.Reset()
	w.podChanged(second, third) // delivered again: its endpoint is gone
	if len(w.pending) != 0 || !strings.Contains(logs.String(), "level=ERROR") || w.endpoints != 1 {
		t.Errorf("a record delivered twice emitted %+v, logged %q, counts %d endpoints", w.pending, logs.String(), w.endpoints)
	}
}
