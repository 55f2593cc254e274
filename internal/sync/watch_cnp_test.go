package sync_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	api "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// TestWatcherClusterNetworkPolicies drives a real kube-apiserver of its own, first without the
// ClusterNetworkPolicy CRD: the Watcher comes in sync without it and shows no watch outage;
// the CRD installed, policies are picked up without a restart; updates, an invalid policy, a
// domainNames peer, a policy turning invalid (withdrawn) and valid again, node peers following
// the nodes' labels and addresses (and not their heartbeats), the CRD's removal (every policy
// withdrawn) and its return.
func TestWatcherClusterNetworkPolicies(t *testing.T) {
	s := kube.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	must := fatalOn(t)
	_, err := s.CreateNode(ctx, "n1", map[string]string{"role": "infra"}, addrs("172.31.0.1", "fd00:172:31::1"), nil)
	must(err)
	_, err = s.CreateNode(ctx, "n2", map[string]string{"role": "worker"}, addrs("172.31.0.2"), nil)
	must(err)

	reg := prometheus.NewRegistry()
	m := sync.NewMetrics(reg)
	cs, err := sync.NewClient(s.Config)
	must(err)
	w := sync.New(sync.Config{Client: cs, NodeName: "n1", Metrics: m, AbsentRecheck: 200 * time.Millisecond})
	c := startCollector(t, w)
	c.waitSync(t)
	cnps := func(st state) state {
		out := newState()
		for k, p := range st.Policies {
			if k.Kind == sync.KindClusterNetworkPolicy {
				out.Policies[k] = p
			}
		}
		return out
	}
	want := newState()
	time.Sleep(300 * time.Millisecond) // a few looks for the resource
	if res, down := w.WatchDown(); down != 0 {
		t.Errorf("without the CRD, WatchDown = %s for %v: a resource not served is no outage", res, down)
	}

	for _, v := range []string{"v1beta1", "v1alpha2"} {
		if got := testutil.ToFloat64(m.ClusterPolicyVersion.WithLabelValues(v)); got != 0 {
			t.Errorf("without the CRD, nftpolicy_cnp_api_version{version=%s} = %v, want 0", v, got)
		}
	}

	must(s.InstallClusterNetworkPolicyExperimentalCRD(ctx))
	client, err := s.ClusterNetworkPolicyClient()
	must(err)
	create := func(p *api.ClusterNetworkPolicy) {
		t.Helper()
		_, err := client.Create(ctx, p, metav1.CreateOptions{})
		must(err)
	}
	expect := func(step string, p *api.ClusterNetworkPolicy, nodes ...*corev1.Node) {
		t.Helper()
		mp, _, err := sync.ConvertClusterNetworkPolicy(p, nodes)
		must(err)
		want.Policies[mp.Key] = mp
		c.waitFor(t, step, cnps, want)
	}
	update := func(name string, f func(*api.ClusterNetworkPolicy)) *api.ClusterNetworkPolicy {
		t.Helper()
		p, err := client.Get(ctx, name, metav1.GetOptions{})
		must(err)
		f(p)
		p, err = client.Update(ctx, p, metav1.UpdateOptions{})
		must(err)
		return p
	}

	a := tierCNP(api.AdminTier, "a", 10, []api.ClusterNetworkPolicyIngressRule{ingressRule(accept, "y", tcpPort(80)), ingressRule(deny, "y")}, nil)
	create(a)
	expect("a policy created after the CRD was installed", a)
	if b, a := testutil.ToFloat64(m.ClusterPolicyVersion.WithLabelValues("v1beta1")), testutil.ToFloat64(m.ClusterPolicyVersion.WithLabelValues("v1alpha2")); b != 1 || a != 0 {
		t.Errorf("nftpolicy_cnp_api_version{version=v1beta1} = %v, {version=v1alpha2} = %v; want 1, 0", b, a)
	}

	a = update("a", func(p *api.ClusterNetworkPolicy) {
		p.Spec.Ingress[0], p.Spec.Ingress[1] = p.Spec.Ingress[1], p.Spec.Ingress[0]
		p.Spec.Priority = 20
	})
	expect("rules swapped, priority changed", a)

	// not rejected by the CRD's schema (an operator is any string there), but by the converter
	bad := tierCNP(api.BaselineTier, "bad", 1, []api.ClusterNetworkPolicyIngressRule{from(deny, "",
		nil, api.ClusterNetworkPolicyIngressPeer{Namespaces: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}})}, nil)
	create(bad)
	dn := tierCNP(api.AdminTier, "dn", 30, nil, []api.ClusterNetworkPolicyEgressRule{
		to(accept, "docs", protos(tcpPort(443)), api.ClusterNetworkPolicyEgressPeer{DomainNames: []api.DomainName{"kubernetes.io"}}),
		to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"0.0.0.0/0"}}),
	})
	create(dn)
	expect("a domainNames peer is enforced", dn)
	if got := testutil.ToFloat64(m.InvalidObjects.WithLabelValues(sync.KindClusterNetworkPolicy)); got != 1 {
		t.Errorf("nftpolicy_invalid_objects_total{kind=ClusterNetworkPolicy} = %v, want 1 (the bad policy)", got)
	}
	if got := testutil.ToFloat64(m.PartlyEnforced.WithLabelValues(sync.KindClusterNetworkPolicy)); got != 0 {
		t.Errorf("nftpolicy_partly_enforced_objects_total{kind=ClusterNetworkPolicy} = %v, want 0 (dn's domainNames are enforced)", got)
	}

	// A policy whose new version is invalid is withdrawn, not left in force with its old rules;
	// the others stay. Valid again, it is back.
	near := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
	valid := a.Spec.Ingress[0].From[0].Namespaces
	update("a", func(p *api.ClusterNetworkPolicy) { p.Spec.Ingress[0].From[0].Namespaces = near })
	delete(want.Policies, model.PolicyKey{Kind: sync.KindClusterNetworkPolicy, Name: "a"})
	c.waitFor(t, "a policy turned invalid is withdrawn", cnps, want)
	if got := testutil.ToFloat64(m.InvalidObjects.WithLabelValues(sync.KindClusterNetworkPolicy)); got != 2 {
		t.Errorf("nftpolicy_invalid_objects_total{kind=ClusterNetworkPolicy} = %v, want 2 (bad, a's invalid version)", got)
	}
	a = update("a", func(p *api.ClusterNetworkPolicy) { p.Spec.Ingress[0].From[0].Namespaces = valid })
	expect("the policy valid again", a)

	// Node peers: the nodes are watched from now on, not before.
	if got := testutil.ToFloat64(m.Lists.WithLabelValues("nodes")); got != 0 {
		t.Errorf("nodes listed %v times before any policy had a node peer, want 0", got)
	}
	np := tierCNP(api.AdminTier, "nodes", 40, nil, []api.ClusterNetworkPolicyEgressRule{
		to(accept, "", protos(tcpPort(10250)), api.ClusterNetworkPolicyEgressPeer{Nodes: labels("role", "infra")}),
		to(deny, "", nil, api.ClusterNetworkPolicyEgressPeer{Nodes: &metav1.LabelSelector{}}),
	})
	create(np)
	nodes := func() []*corev1.Node {
		list, err := s.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		must(err)
		var out []*corev1.Node
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	}
	expect("node peers resolved into the nodes' addresses", np, nodes()...)
	if got := testutil.ToFloat64(m.Lists.WithLabelValues("nodes")); got != 1 {
		t.Errorf("nodes listed %v times once a policy had a node peer, want 1", got)
	}
	patchNode := func(patch map[string]any, sub ...string) {
		t.Helper()
		b, err := json.Marshal(patch)
		must(err)
		_, err = s.Client.CoreV1().Nodes().Patch(ctx, "n2", types.MergePatchType, b, metav1.PatchOptions{}, sub...)
		must(err)
	}
	patchNode(map[string]any{"metadata": map[string]any{"labels": map[string]any{"role": "infra"}}})
	expect("a node relabelled into a node peer's selector", np, nodes()...)
	patchNode(map[string]any{"status": map[string]any{"addresses": []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "172.31.0.2"}, {Type: corev1.NodeInternalIP, Address: "fd00:172:31::2"}}}}, "status")
	expect("a node's new address", np, nodes()...)
	mark := c.mark()
	patchNode(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		LastHeartbeatTime: metav1.NewTime(time.Now().Add(time.Minute)), Reason: "KubeletReady"}}}}, "status")
	z := tierCNP(api.BaselineTier, "z", 1, []api.ClusterNetworkPolicyIngressRule{ingressRule(deny, "z")}, nil)
	create(z) // a change after the heartbeat, to know the heartbeat has been seen
	expect("a later policy", z)
	for _, u := range c.since(mark) {
		if ps, ok := u.(model.PolicySet); ok && ps.Policy.Key.Name == "nodes" {
			t.Errorf("a node's heartbeat emitted the policy again: %+v", ps.Policy)
		}
	}
	must(s.Client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}))
	expect("a node deleted", np, nodes()...)

	// The CRD removed: every ClusterNetworkPolicy is withdrawn; installed again, picked up.
	must(s.DeleteClusterNetworkPolicyCRD(ctx))
	c.waitFor(t, "the CRD deleted", cnps, newState())
	must(s.InstallClusterNetworkPolicyCRD(ctx))
	a.ResourceVersion = ""
	create(a)
	clear(want.Policies)
	expect("the CRD installed again", a)
	if res, down := w.WatchDown(); down != 0 {
		t.Errorf("WatchDown = %s for %v", res, down)
	}
}

// TestWatcherClusterNetworkPolicyVersions drives a real kube-apiserver of its own whose CRD is
// first network-policy-api v0.2.0's, serving v1alpha2 only: the Watcher reads v1alpha2 and
// converts its objects as v1beta1 ones. The CRD upgraded to v0.3.0's (v1beta1 the storage
// version, v1alpha2 still served), the Watcher moves to v1beta1 within AbsentRecheck without
// emitting anything for the policies it already held and without a relist. A Watcher started
// then reads v1beta1 from the start, and an object created as v1alpha2 is read through v1beta1
// and converts as the same object read as v1beta1.
//
// The first Watcher is not asked for objects created after the upgrade: a watch the API server
// opens while it replaces a CRD's storage can stay on the old storage, which drops the new
// objects, until the API server ends it (its request timeout, 60 s), when the reflector resumes
// from its resourceVersion. A Watcher that looks every 200 ms switches in that window; one that
// looks every 30 s rarely does, and catches up within that minute.
func TestWatcherClusterNetworkPolicyVersions(t *testing.T) {
	s := kube.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	must := fatalOn(t)
	must(s.InstallClusterNetworkPolicyV1alpha2OnlyCRD(ctx))
	alpha, err := s.ClusterNetworkPolicyV1alpha2Client()
	must(err)
	beta, err := s.ClusterNetworkPolicyClient()
	must(err)
	if _, err := beta.List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("v0.2.0's CRD: listing v1beta1 = %v, want NotFound", err)
	}
	createAlpha := func(p *api.ClusterNetworkPolicy) *api.ClusterNetworkPolicy {
		t.Helper()
		a, err := alpha.Create(ctx, asV1alpha2(t, p), metav1.CreateOptions{})
		must(err)
		b, err := sync.ClusterNetworkPolicyV1beta1(a)
		must(err)
		return b
	}
	old := createAlpha(tierCNP(api.AdminTier, "old", 10, []api.ClusterNetworkPolicyIngressRule{
		ingressRule(accept, "y", tcpPort(80), udpRange(53, 54)), ingressRule(deny, "y")}, nil))

	cnps := func(st state) state {
		out := newState()
		for k, p := range st.Policies {
			if k.Kind == sync.KindClusterNetworkPolicy {
				out.Policies[k] = p
			}
		}
		return out
	}
	type watcher struct {
		m *sync.Metrics
		w *sync.Watcher
		c *collector
	}
	start := func() watcher {
		t.Helper()
		m := sync.NewMetrics(prometheus.NewRegistry())
		cs, err := sync.NewClient(s.Config)
		must(err)
		w := sync.New(sync.Config{Client: cs, NodeName: "n1", Metrics: m, AbsentRecheck: 200 * time.Millisecond})
		c := startCollector(t, w)
		c.waitSync(t)
		return watcher{m, w, c}
	}
	want := newState()
	expect := func(w watcher, step string, p *api.ClusterNetworkPolicy) {
		t.Helper()
		mp, _, err := sync.ConvertClusterNetworkPolicy(p, nil)
		must(err)
		want.Policies[mp.Key] = mp
		w.c.waitFor(t, step, cnps, want)
	}
	version := func(w watcher, step, v string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, a := testutil.ToFloat64(w.m.ClusterPolicyVersion.WithLabelValues("v1beta1")), testutil.ToFloat64(w.m.ClusterPolicyVersion.WithLabelValues("v1alpha2"))
			if (v == "v1beta1" && b == 1 && a == 0) || (v == "v1alpha2" && b == 0 && a == 1) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: nftpolicy_cnp_api_version{version=v1beta1} = %v, {version=v1alpha2} = %v; want %s", step, b, a, v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	w1 := start()
	expect(w1, "v0.2.0's CRD: a policy read through v1alpha2", old)
	version(w1, "v0.2.0's CRD", "v1alpha2")

	mark := w1.c.mark()
	must(s.UpgradeClusterNetworkPolicyCRD(ctx))
	version(w1, "the CRD upgraded to v0.3.0's", "v1beta1")
	if got := testutil.ToFloat64(w1.m.Relists.WithLabelValues("clusternetworkpolicies")); got != 0 {
		t.Errorf("nftpolicy_watch_relists_total{resource=clusternetworkpolicies} = %v, want 0: a version change is no relist", got)
	}

	w2 := start()
	version(w2, "started with v0.3.0's CRD", "v1beta1")
	w2.c.waitFor(t, "started with v0.3.0's CRD: the policy created as v1alpha2", cnps, want)
	both := createAlpha(tierCNP(api.BaselineTier, "both", 3, nil, []api.ClusterNetworkPolicyEgressRule{
		to(deny, "", protos(udpRange(53, 54)), api.ClusterNetworkPolicyEgressPeer{Networks: []api.CIDR{"10.0.0.0/8"}})}))
	expect(w2, "both versions served: a policy created as v1alpha2, read through v1beta1", both)
	got, err := beta.Get(ctx, "both", metav1.GetOptions{})
	must(err)
	if mb, _, err := sync.ConvertClusterNetworkPolicy(got, nil); err != nil || !reflect.DeepEqual(mb, want.Policies[mb.Key]) {
		t.Errorf("read as v1beta1, both converts to %+v (%v), want %+v", mb, err, want.Policies[mb.Key])
	}
	for _, u := range w1.c.since(mark) {
		if ps, ok := u.(model.PolicySet); ok && ps.Policy.Key.Name == "old" {
			t.Errorf("moving to v1beta1 emitted a policy held already: %+v", ps.Policy)
		}
	}
	for _, w := range []watcher{w1, w2} {
		if res, down := w.w.WatchDown(); down != 0 {
			t.Errorf("WatchDown = %s for %v", res, down)
		}
	}
}

func TestNodeSlimming(t *testing.T) {
	w := sync.New(sync.Config{})
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"big": strings.Repeat("x", 1000)},
		ResourceVersion: "7"},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n"}},
			Images: []corev1.ContainerImage{{Names: []string{"big/image"}, SizeBytes: 1 << 30}}}}
	got, err := w.Transform(n)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"}, ResourceVersion: "7"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}}}
	if b1, b2 := mustJSON(t, got), mustJSON(t, want); b1 != b2 {
		t.Errorf("cached node %s, want %s", b1, b2)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
