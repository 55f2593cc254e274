package sync_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// outage is how long the API server stays away in TestWatchRecoversAfterAPIServerOutage: the
// outage operators tried on a live cluster.
const outage = 20 * time.Second

// TestWatchRecoversAfterAPIServerOutage kills the API server, keeps it away for 20 s, and makes a
// change as soon as it is back: the change must be in the update stream within 5 s of the API
// server's return (a generous bound on a figure the test logs). Meanwhile
// the Watcher reports its watches closed (WatchDown, nftpolicy_watch_open), and afterwards open
// again, with each resource's restart counted.
func TestWatchRecoversAfterAPIServerOutage(t *testing.T) {
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	must := fatalOn(t)
	ns := testenv.UniqueName("outage")
	view := func(st state) state { return st.only(ns) }
	must(s.CreateNamespace(ctx, ns, nil))
	pod, err := s.CreatePod(ctx, ns, "web", "node-1", map[string]string{"app": "web"}, nil, addrs("10.3.0.1"))
	must(err)
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	_, err = s.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, deny, metav1.CreateOptions{})
	must(err)

	// as the agent connects: no client timeout (a kubeconfig's), the product's client
	cfg := rest.CopyConfig(s.Config)
	cfg.Timeout = 0
	client, err := sync.NewClient(cfg)
	must(err)
	metrics := sync.NewMetrics(prometheus.NewRegistry())
	w := sync.New(sync.Config{Client: client, NodeName: "node-1", Metrics: metrics})
	c := startCollector(t, w)
	c.waitSync(t)
	want := newState()
	want.InSync = true
	want.Namespaces[ns] = sync.ConvertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	web := model.Endpoint{Key: model.EndpointKey{Namespace: ns, Name: "web"}, Node: "node-1",
		Labels: model.LabelsOf(map[string]string{"app": "web"}), ServiceAccount: pod.Spec.ServiceAccountName,
		Addrs: addrs("10.3.0.1"), Running: true, Created: pod.CreationTimestamp.UTC()}
	want.Endpoints[web.Key] = web
	want.Policies[mustPolicy(t, deny).Key] = mustPolicy(t, deny)
	c.waitFor(t, "initial state", view, want)
	resources := []string{"namespaces", "pods", "networkpolicies"}
	waitOpen(t, w, "before the outage")

	steps := []struct {
		name   string
		change func()
		expect func()
	}{
		{"a policy deleted",
			func() { must(s.Client.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "deny", metav1.DeleteOptions{})) },
			func() { delete(want.Policies, mustPolicy(t, deny).Key) }},
		{"a pod relabelled",
			func() {
				_, err := s.Client.CoreV1().Pods(ns).Patch(ctx, "web", types.MergePatchType,
					[]byte(`{"metadata":{"labels":{"app":"web","tier":"front"}}}`), metav1.PatchOptions{})
				must(err)
			},
			func() {
				web.Labels = model.LabelsOf(map[string]string{"app": "web", "tier": "front"})
				want.Endpoints[web.Key] = web
			}},
	}
	for _, st := range steps {
		// a watch counts as real (and its successor as a restart) once it has lasted a second
		time.Sleep(1500 * time.Millisecond)
		restarts := map[string]float64{}
		for _, r := range resources {
			restarts[r] = testutil.ToFloat64(metrics.WatchRestarts.WithLabelValues(r))
		}
		back := s.BeginOutage(ctx, outage)
		// halfway through, every watch is closed, and says so
		time.Sleep(outage / 2)
		if res, down := w.WatchDown(); down < outage/4 {
			t.Errorf("%s: %v into the outage, WatchDown = %s %v, want at least %v", st.name, outage/2, res, down, outage/4)
		}
		for _, r := range resources {
			if got := testutil.ToFloat64(metrics.WatchOpen.WithLabelValues(r)); got != 0 {
				t.Errorf("%s: nftpolicy_watch_open{%s} = %v during the outage, want 0", st.name, r, got)
			}
		}

		must(<-back)
		returned := time.Now()
		st.change()
		st.expect()
		c.waitFor(t, st.name+" after the outage", view, want)
		took := time.Since(returned)
		t.Logf("%s: in the update stream %.2f s after the API server's return (outage %v)", st.name, took.Seconds(), outage)
		if took > 5*time.Second {
			t.Errorf("%s: reached the update stream %.2f s after the API server's return, want ≤ 5 s", st.name, took.Seconds())
		}
		waitOpen(t, w, st.name)
		time.Sleep(1500 * time.Millisecond) // the new watches prove real
		for _, r := range resources {
			if got := testutil.ToFloat64(metrics.WatchRestarts.WithLabelValues(r)); got <= restarts[r] {
				t.Errorf("%s: nftpolicy_watch_restarts_total{%s} = %v, want more than %v", st.name, r, got, restarts[r])
			}
			if got := testutil.ToFloat64(metrics.WatchOpen.WithLabelValues(r)); got != 1 {
				t.Errorf("%s: nftpolicy_watch_open{%s} = %v after the outage, want 1", st.name, r, got)
			}
		}
	}
	if got := testutil.ToFloat64(metrics.LastEvent.WithLabelValues("pods")); time.Since(time.Unix(int64(got), 0)) > time.Minute {
		t.Errorf("nftpolicy_watch_last_event_timestamp_seconds{pods} = %v, want within the last minute", got)
	}
}

// waitOpen waits until every watch of w is open; the timeout only bounds a failing test.
func waitOpen(t *testing.T, w *sync.Watcher, when string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, down := w.WatchDown()
		if down == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the watch of %s has been closed for %v", when, res, down)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
