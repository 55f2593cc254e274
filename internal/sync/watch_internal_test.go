package sync

import (
	"reflect"
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
