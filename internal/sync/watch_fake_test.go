package sync_test

import (
	"context"
	gosync "sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// fakeCluster is a fake clientset that reports when the informers' watches are open, so a
// test changes objects only once the change cannot fall between list and watch. The fake does
// no validation, so it can hold objects the real API server would refuse.
func fakeCluster(t *testing.T, objs ...runtime.Object) (*fake.Clientset, func()) {
	cs := fake.NewClientset(objs...)
	var mu gosync.Mutex
	watches := map[string]bool{}
	opened := make(chan struct{}, 16)
	cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		mu.Lock()
		watches[a.GetResource().Resource] = true
		mu.Unlock()
		opened <- struct{}{}
		return false, nil, nil
	})
	waitWatches := func() {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			mu.Lock()
			n := len(watches)
			mu.Unlock()
			if n >= 3 {
				return
			}
			select {
			case <-opened:
			case <-deadline:
				t.Fatalf("informers opened watches on %v only", watches)
			}
		}
	}
	return cs, waitWatches
}

func fakePod(ns, name, ip string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, ResourceVersion: "1"},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: ip}}}}
}

func fakePolicy(ns, name, cidr string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}}}}}}
}

func mustPolicy(t *testing.T, np *networkingv1.NetworkPolicy) model.Policy {
	t.Helper()
	p, err := sync.ConvertNetworkPolicy(np)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustEndpoint(t *testing.T, p *corev1.Pod) model.Endpoint {
	t.Helper()
	e, ok, err := sync.ConvertPod(p)
	if err != nil || !ok {
		t.Fatalf("pod %s/%s: endpoint %v, err %v", p.Namespace, p.Name, ok, err)
	}
	return e
}

// TestWatcherBadObjects: a bad object is skipped and counted, never hurts the others, and is
// picked up once fixed; a policy that turns bad is withdrawn.
func TestWatcherBadObjects(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	good := fakePolicy("x", "good", "10.0.0.0/8")
	bad := fakePolicy("x", "bad", "10.0.0.0/33")
	okPod := fakePod("x", "ok", "10.1.0.1", map[string]string{"app": "a"})
	badPod := fakePod("x", "bad", "10.1.0.300", nil)
	cs, waitWatches := fakeCluster(t, ns, good, bad, okPod, badPod)
	reg := prometheus.NewRegistry()
	metrics := sync.NewMetrics(reg)
	c := startCollector(t, sync.New(sync.Config{Client: sync.ClientsetClient(cs), NodeName: "node-1", Metrics: metrics}))
	invalid := func(kind string) float64 { return testutil.ToFloat64(metrics.InvalidObjects.WithLabelValues(kind)) }

	want := newState()
	want.InSync = true
	want.Namespaces["x"] = sync.ConvertNamespace(ns)
	want.Policies[mustPolicy(t, good).Key] = mustPolicy(t, good)
	want.Endpoints[mustEndpoint(t, okPod).Key] = mustEndpoint(t, okPod)
	if got := c.waitSync(t); !equalState(got, want) {
		t.Fatalf("state at in-sync:\n got %v\nwant %v", got, want)
	}
	if invalid("NetworkPolicy") != 1 || invalid("Pod") != 1 {
		t.Errorf("invalid_objects_total: NetworkPolicy %v, Pod %v; want 1 and 1", invalid("NetworkPolicy"), invalid("Pod"))
	}
	waitWatches()
	ctx := context.Background()
	all := func(s state) state { return s }

	// Fixing the bad policy picks it up.
	fixed := fakePolicy("x", "bad", "10.0.0.0/16")
	fixed.ResourceVersion = "2"
	if _, err := cs.NetworkingV1().NetworkPolicies("x").Update(ctx, fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want.Policies[mustPolicy(t, fixed).Key] = mustPolicy(t, fixed)
	c.waitFor(t, "bad policy fixed", all, want)

	// The good policy turning bad is withdrawn; the other stays.
	broken := fakePolicy("x", "good", "not-a-cidr")
	broken.ResourceVersion = "2"
	if _, err := cs.NetworkingV1().NetworkPolicies("x").Update(ctx, broken, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(want.Policies, mustPolicy(t, good).Key)
	c.waitFor(t, "good policy broken", all, want)
	if invalid("NetworkPolicy") != 2 {
		t.Errorf("invalid_objects_total{NetworkPolicy} = %v, want 2", invalid("NetworkPolicy"))
	}

	// The bad pod gets a valid IP; the ok pod loses its IP (no longer an endpoint).
	fixedPod := fakePod("x", "bad", "10.1.0.3", nil)
	fixedPod.ResourceVersion = "2"
	if _, err := cs.CoreV1().Pods("x").Update(ctx, fixedPod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	noIP := okPod.DeepCopy()
	noIP.Status.PodIPs = nil
	if _, err := cs.CoreV1().Pods("x").Update(ctx, noIP, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want.Endpoints = map[model.EndpointKey]model.Endpoint{mustEndpoint(t, fixedPod).Key: mustEndpoint(t, fixedPod)}
	c.waitFor(t, "pod fixed, other pod without IP", all, want)

	// Deleting a broken policy emits nothing more (it is not in force); deleting the
	// namespace and the pod emit their deletes.
	mark := c.mark()
	for _, del := range []func() error{
		func() error {
			return cs.NetworkingV1().NetworkPolicies("x").Delete(ctx, "good", metav1.DeleteOptions{})
		},
		func() error { return cs.NetworkingV1().NetworkPolicies("x").Delete(ctx, "bad", metav1.DeleteOptions{}) },
		func() error { return cs.CoreV1().Pods("x").Delete(ctx, "bad", metav1.DeleteOptions{}) },
		func() error { return cs.CoreV1().Namespaces().Delete(ctx, "x", metav1.DeleteOptions{}) },
	} {
		if err := del(); err != nil {
			t.Fatal(err)
		}
	}
	empty := newState()
	empty.InSync = true
	c.waitFor(t, "everything deleted", all, empty)
	var got []string
	for _, u := range c.since(mark) {
		got = append(got, describe(u))
	}
	wantLog := map[string]bool{"pol- NetworkPolicy/x/bad": true, "ep- x/bad": true, "ns- x": true}
	if len(got) != len(wantLog) {
		t.Errorf("updates after the deletes: %q, want exactly %v", got, wantLog)
	}
	for _, g := range got {
		if !wantLog[g] {
			t.Errorf("unexpected update %q", g)
		}
	}
}

// equalState compares states, treating nil and empty maps alike.
func equalState(a, b state) bool {
	return a.String() == b.String()
}

// TestWatcherSharedAddress: a pod's IP goes to its successor before the pod finishes. Both are
// endpoints while they hold it (the graph decides the owner from Running and Created); the
// successor starting running is an update of its endpoint, and the old pod turning Succeeded
// withdraws its endpoint only. Pods without an IP, and on a node that does not exist, follow
// ConvertPod: no endpoint, and an endpoint of that node.
func TestWatcherSharedAddress(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	old := fakePod("x", "old", "10.1.0.1", map[string]string{"app": "a"})
	old.CreationTimestamp = metav1.Unix(1700000000, 0)
	next := fakePod("x", "next", "10.1.0.1", map[string]string{"app": "a"})
	next.CreationTimestamp = metav1.Unix(1700003600, 0)
	next.Status.Phase = corev1.PodPending
	noIP := fakePod("x", "no-ip", "", nil)
	noIP.Status.PodIPs = nil
	lost := fakePod("x", "lost", "10.9.0.1", nil)
	lost.Spec.NodeName = "no-such-node"
	cs, waitWatches := fakeCluster(t, ns, old, next, noIP, lost)
	c := startCollector(t, sync.New(sync.Config{Client: sync.ClientsetClient(cs), NodeName: "node-1"}))
	want := newState()
	want.InSync = true
	want.Namespaces["x"] = sync.ConvertNamespace(ns)
	for _, p := range []*corev1.Pod{old, next, lost} {
		want.Endpoints[mustEndpoint(t, p).Key] = mustEndpoint(t, p)
	}
	if got := c.waitSync(t); !equalState(got, want) {
		t.Fatalf("state at in-sync:\n got %v\nwant %v", got, want)
	}
	if e := want.Endpoints[model.EndpointKey{Namespace: "x", Name: "next"}]; e.Running || !e.Created.Equal(next.CreationTimestamp.Time) {
		t.Fatalf("the pending successor converts to running=%v created=%v", e.Running, e.Created)
	}
	waitWatches()
	ctx := context.Background()
	all := func(s state) state { return s }

	running := next.DeepCopy()
	running.Status.Phase, running.ResourceVersion = corev1.PodRunning, "2"
	if _, err := cs.CoreV1().Pods("x").Update(ctx, running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want.Endpoints[mustEndpoint(t, running).Key] = mustEndpoint(t, running)
	c.waitFor(t, "the successor runs", all, want)

	done := old.DeepCopy()
	done.Status.Phase, done.ResourceVersion = corev1.PodSucceeded, "2"
	if _, err := cs.CoreV1().Pods("x").Update(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(want.Endpoints, model.EndpointKey{Namespace: "x", Name: "old"})
	c.waitFor(t, "the old pod succeeded", all, want)
}
