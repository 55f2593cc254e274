package sync_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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

var srv *kube.Server

// slowLists delays the answers to lists of pods and network policies: plain LISTs and streaming
// lists (watches with sendInitialEvents=true, client-go's WatchListClient).
type slowLists struct{ rt http.RoundTripper }

func (s slowLists) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && (q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") &&
		(strings.HasSuffix(r.URL.Path, "/pods") || strings.HasSuffix(r.URL.Path, "/networkpolicies")) {
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
		}
	}
	return s.rt.RoundTrip(r)
}

func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }

func mergePatch(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWatcherAgainstAPIServer drives a real kube-apiserver through creates, relabels, updates,
// status changes, deletes and an API server restart, and checks after each step that the update
// stream reaches the model state the cluster describes.
func TestWatcherAgainstAPIServer(t *testing.T) {
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nsA, nsB := testenv.UniqueName("a"), testenv.UniqueName("b")
	view := func(st state) state { return st.only(nsA, nsB) }
	must := fatalOn(t)
	webPorts := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}

	// What the watcher must find in its initial lists.
	must(s.CreateNamespace(ctx, nsA, map[string]string{"team": "red"}))
	must(s.CreateNamespace(ctx, nsB, nil))
	p1, err := s.CreatePod(ctx, nsA, "web", "node-1", map[string]string{"app": "web"}, webPorts, addrs("10.1.0.1", "fd00::1:1"))
	must(err)
	p2, err := s.CreatePod(ctx, nsB, "client", "node-2", map[string]string{"app": "client"}, nil, addrs("10.2.0.1"))
	must(err)
	host := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "host"},
		Spec: corev1.PodSpec{NodeName: "node-1", HostNetwork: true, Containers: []corev1.Container{{Name: "c", Image: kube.PauseImage}}}}
	_, err = s.Client.CoreV1().Pods(nsB).Create(ctx, host, metav1.CreateOptions{})
	must(err)
	_, err = s.SetPodStatus(ctx, nsB, "host", corev1.PodRunning, addrs("192.0.2.1"))
	must(err)
	np1 := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsA, Name: "web-in"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *labels("app", "web"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: labels("app", "client")}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: portName("http")}, {Protocol: &udp, Port: portNum(53)}},
			}},
		}}
	_, err = s.Client.NetworkingV1().NetworkPolicies(nsA).Create(ctx, np1, metav1.CreateOptions{})
	must(err)

	// The expected state is built from the converters applied to the objects as this test
	// wrote them; the API server's defaulting (protocol TCP, policyTypes) must not change the
	// meaning.
	want := newState()
	want.InSync = true
	setNS := func(name string, lbl map[string]string) {
		want.Namespaces[name] = sync.ConvertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}})
	}
	setNS(nsA, map[string]string{"team": "red"})
	setNS(nsB, nil)
	web := model.Endpoint{Key: model.EndpointKey{Namespace: nsA, Name: "web"}, Node: "node-1",
		Labels: model.LabelsOf(map[string]string{"app": "web"}), ServiceAccount: p1.Spec.ServiceAccountName, Addrs: addrs("10.1.0.1", "fd00::1:1"),
		Running: true, Created: p1.CreationTimestamp.UTC(),
		NamedPorts: []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}, {Name: "dns", Protocol: model.ProtocolUDP, Port: 53}}}
	client := model.Endpoint{Key: model.EndpointKey{Namespace: nsB, Name: "client"}, Node: "node-2",
		Labels: model.LabelsOf(map[string]string{"app": "client"}), ServiceAccount: p2.Spec.ServiceAccountName, Addrs: addrs("10.2.0.1"),
		Running: true, Created: p2.CreationTimestamp.UTC()}
	want.Endpoints[web.Key] = web
	want.Endpoints[client.Key] = client
	want.Policies[mustPolicy(t, np1).Key] = mustPolicy(t, np1)

	// Lists of pods and policies answer late (namespaces promptly), so an in-sync that does
	// not wait for every informer's initial list would come before them and be caught below.
	cfg := rest.CopyConfig(s.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return slowLists{rt} })
	cs, err := sync.NewClient(cfg)
	must(err)
	c := startCollector(t, sync.New(sync.Config{Client: cs, NodeName: "node-1"}))
	atSync := c.waitSync(t)
	if got := view(atSync); !equalState(got, want) {
		t.Fatalf("in-sync came before the initial lists were delivered:\n got %v\nwant %v", got, want)
	}
	c.mu.Lock()
	first := c.firstBatch
	c.mu.Unlock()
	if len(first) == 0 || first[0] != (model.SyncStatusUpdate{Status: model.ResyncInProgress}) {
		t.Errorf("first batch starts with %v, want resyncing", first)
	}

	var late *corev1.Pod
	steps := []struct {
		name   string
		change func()
		expect func()
	}{
		{"relabel a pod",
			func() {
				_, err := s.Client.CoreV1().Pods(nsA).Patch(ctx, "web", types.MergePatchType,
					mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web", "tier": "front"}}}), metav1.PatchOptions{})
				must(err)
			},
			func() {
				web.Labels = model.LabelsOf(map[string]string{"app": "web", "tier": "front"})
				want.Endpoints[web.Key] = web
			}},
		{"relabel a namespace",
			func() {
				_, err := s.Client.CoreV1().Namespaces().Patch(ctx, nsB, types.MergePatchType,
					mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "blue"}}}), metav1.PatchOptions{})
				must(err)
			},
			func() { setNS(nsB, map[string]string{"team": "blue"}) }},
		{"update a policy: egress and an ipBlock",
			func() {
				cur, err := s.Client.NetworkingV1().NetworkPolicies(nsA).Get(ctx, "web-in", metav1.GetOptions{})
				must(err)
				cur.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/48", Except: []string{"fd00::1:0/112"}}}}}}
				cur.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
				_, err = s.Client.NetworkingV1().NetworkPolicies(nsA).Update(ctx, cur, metav1.UpdateOptions{})
				must(err)
			},
			func() {
				// np1 has no policyTypes: the converter's defaulting (egress rules present) must
				// give what the API server holds explicitly.
				np1.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "fd00::/48", Except: []string{"fd00::1:0/112"}}}}}}
				want.Policies[mustPolicy(t, np1).Key] = mustPolicy(t, np1)
			}},
		{"a new pod without an IP is not an endpoint; its IP makes it one",
			func() {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "late", Labels: map[string]string{"app": "late"}},
					Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: kube.PauseImage}}}}
				_, err := s.Client.CoreV1().Pods(nsB).Create(ctx, p, metav1.CreateOptions{})
				must(err)
				_, err = s.SetPodStatus(ctx, nsB, "late", corev1.PodPending, nil)
				must(err)
				late, err = s.SetPodStatus(ctx, nsB, "late", corev1.PodPending, addrs("10.1.0.7"))
				must(err)
			},
			func() {
				want.Endpoints[model.EndpointKey{Namespace: nsB, Name: "late"}] = model.Endpoint{
					Key: model.EndpointKey{Namespace: nsB, Name: "late"}, Node: "node-1",
					Labels: model.LabelsOf(map[string]string{"app": "late"}), Addrs: addrs("10.1.0.7"),
					Created: late.CreationTimestamp.UTC()}
			}},
		{"the pod runs: its endpoint says so",
			func() {
				_, err := s.SetPodStatus(ctx, nsB, "late", corev1.PodRunning, addrs("10.1.0.7"))
				must(err)
			},
			func() {
				e := want.Endpoints[model.EndpointKey{Namespace: nsB, Name: "late"}]
				e.Running = true
				want.Endpoints[e.Key] = e
			}},
		{"a pod that succeeds stops being an endpoint",
			func() {
				_, err := s.SetPodStatus(ctx, nsB, "client", corev1.PodSucceeded, addrs("10.2.0.1"))
				must(err)
			},
			func() { delete(want.Endpoints, client.Key) }},
		{"a second policy in the other namespace",
			func() {
				np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "deny-all"},
					Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}}
				_, err := s.Client.NetworkingV1().NetworkPolicies(nsB).Create(ctx, np, metav1.CreateOptions{})
				must(err)
			},
			func() {
				np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: nsB, Name: "deny-all"},
					Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}}
				want.Policies[mustPolicy(t, np).Key] = mustPolicy(t, np)
			}},
		{"delete a pod and a policy",
			func() {
				must(s.Client.CoreV1().Pods(nsB).Delete(ctx, "late", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
				must(s.Client.NetworkingV1().NetworkPolicies(nsA).Delete(ctx, "web-in", metav1.DeleteOptions{}))
			},
			func() {
				delete(want.Endpoints, model.EndpointKey{Namespace: nsB, Name: "late"})
				delete(want.Policies, mustPolicy(t, np1).Key)
			}},
	}
	for _, st := range steps {
		st.change()
		st.expect()
		c.waitFor(t, st.name, view, want)
	}

	// A SourceVersion vouches for what was delivered before it: once the watcher reports a
	// pod's new resourceVersion, the pod's change is already in the stream (the agent publishes
	// these after committing, and the e2e harness waits for them).
	for i, tier := range []string{"back", "front", "back"} {
		p, err := s.Client.CoreV1().Pods(nsA).Patch(ctx, "web", types.MergePatchType,
			mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": tier}}}), metav1.PatchOptions{})
		must(err)
		st := c.waitVersion(t, "pods", p.ResourceVersion)
		if got, _ := st.Endpoints[web.Key].Labels.Get("tier"); got != tier {
			t.Fatalf("relabel %d: SourceVersion %s of pods arrived with tier=%q delivered, want %q", i, p.ResourceVersion, got, tier)
		}
	}
	web.Labels = model.LabelsOf(map[string]string{"app": "web", "tier": "back"})
	want.Endpoints[web.Key] = web

	// API server outage: nothing is withdrawn meanwhile, and afterwards the watcher follows
	// changes again without re-sending what did not change.
	mark := c.mark()
	if err := s.RestartAPIServer(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	after, err := s.CreatePod(ctx, nsA, "after", "node-1", map[string]string{"app": "after"}, nil, addrs("10.1.0.9"))
	must(err)
	_, err = s.Client.CoreV1().Pods(nsA).Patch(ctx, "web", types.MergePatchType,
		mergePatch(t, map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "back"}}}), metav1.PatchOptions{})
	must(err)
	want.Endpoints[model.EndpointKey{Namespace: nsA, Name: "after"}] = model.Endpoint{
		Key: model.EndpointKey{Namespace: nsA, Name: "after"}, Node: "node-1",
		Labels: model.LabelsOf(map[string]string{"app": "after"}), Addrs: addrs("10.1.0.9"),
		Running: true, Created: after.CreationTimestamp.UTC()}
	web.Labels = model.LabelsOf(map[string]string{"app": "web", "tier": "back"})
	want.Endpoints[web.Key] = web
	c.waitFor(t, "changes after an API server restart", view, want)
	updatesAfterRestart := c.since(mark)

	// Deletes still flow after the restart.
	must(s.Client.CoreV1().Pods(nsA).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	delete(want.Endpoints, web.Key)
	c.waitFor(t, "delete after an API server restart", view, want)

	for _, u := range updatesAfterRestart {
		switch u := u.(type) {
		case model.EndpointDeleted, model.NamespaceDeleted, model.PolicyDeleted:
			t.Errorf("the outage withdrew %s", describe(u))
		case model.EndpointSet:
			if u.Endpoint.Key.Namespace == nsA || u.Endpoint.Key.Namespace == nsB {
				if n := u.Endpoint.Key.Name; n != "after" && n != "web" {
					t.Errorf("unchanged endpoint re-sent after the restart: %s", describe(u))
				}
			}
		case model.PolicySet:
			t.Errorf("unchanged policy re-sent after the restart: %s", describe(u))
		case model.SyncStatusUpdate:
			t.Errorf("sync status re-sent after the restart: %v", u.Status)
		}
	}
}

// fatalOn returns a function that ends the test t on a non-nil error.
func fatalOn(t *testing.T) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
