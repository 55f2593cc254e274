package sync

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
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
	w.podChanged(nil, w.recordPod(pod("a", "10.0.0.1")))
	np := w.recordPolicy(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"}})
	w.policyChanged(KindNetworkPolicy)(nil, np)
	w.setNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}})
	w.pending = nil

	// (TestPolicyChanges has the policies' other tombstones)
	w.deletePod(cache.DeletedFinalStateUnknown{Key: "x/a", Obj: w.recordPod(pod("a", "10.0.0.1"))})
	w.deletePod(cache.DeletedFinalStateUnknown{Key: "x/noip", Obj: w.recordPod(pod("noip", ""))}) // never an endpoint: nothing
	w.deletePolicy(KindNetworkPolicy)(cache.DeletedFinalStateUnknown{Key: "x/p", Obj: np})
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

// TestUnchangedEmitsNothing: a resync or relist re-delivers objects (pods and policies as the
// informer caches them, podRecord and policyRecord); nothing is emitted for them, and a pod that
// stops being an endpoint is withdrawn once.
func TestUnchangedEmitsNothing(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", ResourceVersion: "1"}, Spec: corev1.PodSpec{NodeName: "n"},
		Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p"}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	w := New(Config{})
	w.podChanged(nil, w.recordPod(p))
	w.policyChanged(KindNetworkPolicy)(nil, w.recordPolicy(np))
	w.setNamespace(ns)
	if len(w.pending) != 3 {
		t.Fatalf("initial: %+v", w.pending)
	}
	w.pending = nil
	w.podChanged(w.recordPod(p), w.recordPod(p.DeepCopy()))
	w.policyChanged(KindNetworkPolicy)(w.recordPolicy(np), w.recordPolicy(np.DeepCopy()))
	w.setNamespace(ns.DeepCopy())
	if len(w.pending) != 0 {
		t.Errorf("re-delivered unchanged objects emitted %+v", w.pending)
	}
	done := p.DeepCopy()
	done.Status.Phase = corev1.PodFailed
	w.podChanged(w.recordPod(p), w.recordPod(done))
	w.podChanged(w.recordPod(done), w.recordPod(done.DeepCopy()))
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
	first := w.recordPod(p)
	want := *first.pendingEndpoint()
	w.podChanged(nil, first)
	if got := []model.Update{model.EndpointSet{Endpoint: want}}; !reflect.DeepEqual(w.pending, got) {
		t.Fatalf("got %+v, want %+v", w.pending, got)
	}
	unchanged := p.DeepCopy()
	unchanged.ResourceVersion = "2"
	second := w.recordPod(unchanged)
	w.pending = nil
	w.podChanged(first, second)
	if first.pending.Load() != nil || second.pending.Load() != nil || len(w.pending) != 0 {
		t.Errorf("after the events, endpoints still cached: %v %v; emitted %+v", first.pending.Load(), second.pending.Load(), w.pending)
	}

	relabeled := p.DeepCopy()
	relabeled.ResourceVersion = "3"
	relabeled.Labels = map[string]string{"app": "web"}
	third := w.recordPod(relabeled)
	w.podChanged(second, third)
	w.pending = nil
	logs.Reset()
	w.podChanged(second, third) // delivered again: its endpoint is gone
	if len(w.pending) != 0 || !strings.Contains(logs.String(), "level=ERROR") || w.endpoints != 1 {
		t.Errorf("a record delivered twice emitted %+v, logged %q, counts %d endpoints", w.pending, logs.String(), w.endpoints)
	}
}

// TestPolicyChanges: what a policy's events emit, told by the record cached with its previous
// version: nothing for a version that converts to the same policy, PolicySet for a change or a
// fix, one PolicyDeleted when the policy turns invalid or goes while in force (a tombstone
// too), nothing when a policy that is not in force goes; each invalid version is counted once.
func TestPolicyChanges(t *testing.T) {
	version := func(rv, cidr string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "p", ResourceVersion: rv},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}}}}}
	}
	v1, v2 := version("1", "10.0.0.0/8"), version("2", "10.0.0.0/16")
	same := version("2", "10.0.0.0/8") // another version converting to v1's policy
	same.Annotations = map[string]string{"note": "relabelled"}
	bad1, bad2, bad3 := version("1", "10.0.0.0/33"), version("2", "not-a-cidr"), version("3", "10.0.0.0/33")
	set := func(np *networkingv1.NetworkPolicy) model.Update {
		p, err := ConvertNetworkPolicy(np)
		if err != nil {
			t.Fatal(err)
		}
		return model.PolicySet{Policy: p}
	}
	deleted := model.PolicyDeleted{Key: model.PolicyKey{Kind: KindNetworkPolicy, Namespace: "x", Name: "p"}}

	// An event: a new version (old: the previous record), or one of these on the last record.
	const (
		resync    = "resync" // delivered again as its own old version
		del       = "delete"
		tombstone = "tombstone"      // deleted, the watch having missed it
		lostTomb  = "lost tombstone" // a tombstone without the last record
	)
	type event struct {
		np *networkingv1.NetworkPolicy
		op string
	}
	for _, c := range []struct {
		name    string
		events  []event
		want    []model.Update
		invalid float64
	}{
		{"created", []event{{np: v1}}, []model.Update{set(v1)}, 0},
		{"updated to an equal conversion", []event{{np: v1}, {np: same}}, []model.Update{set(v1)}, 0},
		{"delivered again", []event{{np: v1}, {op: resync}}, []model.Update{set(v1)}, 0},
		{"updated", []event{{np: v1}, {np: v2}}, []model.Update{set(v1), set(v2)}, 0},
		{"updated to invalid versions", []event{{np: v1}, {np: bad2}, {op: resync}, {np: bad3}},
			[]model.Update{set(v1), deleted}, 2},
		{"invalid, then fixed", []event{{np: bad1}, {np: v2}}, []model.Update{set(v2)}, 1},
		{"deleted", []event{{np: v1}, {op: del}}, []model.Update{set(v1), deleted}, 0},
		{"deleted while invalid", []event{{np: v1}, {np: bad2}, {op: del}}, []model.Update{set(v1), deleted}, 1},
		{"never valid, deleted", []event{{np: bad1}, {op: del}}, nil, 1},
		{"tombstone", []event{{np: v1}, {op: tombstone}}, []model.Update{set(v1), deleted}, 0},
		{"tombstone of an invalid version", []event{{np: v1}, {np: bad2}, {op: tombstone}}, []model.Update{set(v1), deleted}, 1},
		// without its last record, the Watcher cannot tell; the graph ignores an unknown key
		{"tombstone without its record", []event{{np: v1}, {op: lostTomb}}, []model.Update{set(v1), deleted}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			metrics := NewMetrics(nil)
			w := New(Config{Metrics: metrics})
			var last *policyRecord
			for _, e := range c.events {
				switch e.op {
				case "":
					r := w.recordPolicy(e.np)
					if last == nil {
						w.policyChanged(KindNetworkPolicy)(nil, r) // an add: no old version
					} else {
						w.policyChanged(KindNetworkPolicy)(last, r)
					}
					last = r
				case resync:
					w.policyChanged(KindNetworkPolicy)(last, last)
				case del:
					w.deletePolicy(KindNetworkPolicy)(last)
				case tombstone:
					w.deletePolicy(KindNetworkPolicy)(cache.DeletedFinalStateUnknown{Key: "x/p", Obj: last})
				case lostTomb:
					w.deletePolicy(KindNetworkPolicy)(cache.DeletedFinalStateUnknown{Key: "x/p"})
				}
			}
			if !reflect.DeepEqual(w.pending, c.want) {
				t.Errorf("emitted %+v\nwant %+v", w.pending, c.want)
			}
			if got := testutil.ToFloat64(metrics.InvalidObjects.WithLabelValues(KindNetworkPolicy)); got != c.invalid {
				t.Errorf("invalid_objects_total = %v, want %v", got, c.invalid)
			}
		})
	}
}
