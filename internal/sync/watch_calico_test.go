package sync_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// calicoCRDs are deploy/crds/calico's manifests.
func calicoCRDs(t *testing.T) [][]byte {
	t.Helper()
	paths, err := filepath.Glob("../../deploy/crds/calico/*.yaml")
	if err != nil || len(paths) != 6 {
		t.Fatalf("deploy/crds/calico: %v %v, want six CRDs", paths, err)
	}
	var out [][]byte
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// TestWatcherCalico drives a real kube-apiserver of its own, first without Calico's CRDs: the
// Watcher comes in sync without them and shows no watch outage, and follows ServiceAccounts'
// labels; once deploy/crds/calico is installed (after the Watcher started), tiers, policies of
// both kinds and network sets created, updated and deleted arrive as model updates, an invalid
// policy is counted and withdrawn, a policy whose tier does not exist is counted and enforced
// once the tier is created, and a CRD deleted withdraws its objects.
func TestWatcherCalico(t *testing.T) {
	s := kube.StartForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	must := fatalOn(t)
	must(s.CreateNamespace(ctx, "cx", nil))
	kc, err := kubernetes.NewForConfig(s.Config)
	must(err)
	dyn, err := dynamic.NewForConfig(s.Config)
	must(err)

	reg := prometheus.NewRegistry()
	m := sync.NewMetrics(reg)
	cs, err := sync.NewClient(s.Config)
	must(err)
	w := sync.New(sync.Config{Client: cs, NodeName: "n1", Metrics: m, AbsentRecheck: 200 * time.Millisecond})
	c := startCollector(t, w)
	c.waitSync(t)
	time.Sleep(300 * time.Millisecond) // a few looks for the resources
	if res, down := w.WatchDown(); down != 0 {
		t.Errorf("without Calico's CRDs, WatchDown = %s for %v: a resource not served is no outage", res, down)
	}
	calico := func(st state) state {
		out := newState()
		out.Tiers, out.NetworkSets = st.Tiers, st.NetworkSets
		for k, e := range st.Endpoints {
			if e.Host != nil {
				out.Endpoints[k] = e
			}
		}
		for k, p := range st.Policies {
			if k.Kind == sync.KindGlobalNetworkPolicy || k.Kind == sync.KindCalicoNetworkPolicy {
				out.Policies[k] = p
			}
		}
		if sa, ok := st.ServiceAccounts[[2]string{"cx", "api"}]; ok {
			out.ServiceAccounts[[2]string{"cx", "api"}] = sa
		}
		return out
	}
	want := newState()

	// ServiceAccounts: their labels, followed.
	sa, err := kc.CoreV1().ServiceAccounts("cx").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "api",
		Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{})
	must(err)
	want.ServiceAccounts[[2]string{"cx", "api"}] = model.ServiceAccount{Namespace: "cx", Name: "api", Labels: map[string]string{"team": "a"}}
	c.waitFor(t, "a service account", calico, want)
	sa.Labels["team"] = "b"
	_, err = kc.CoreV1().ServiceAccounts("cx").Update(ctx, sa, metav1.UpdateOptions{})
	must(err)
	want.ServiceAccounts[[2]string{"cx", "api"}] = model.ServiceAccount{Namespace: "cx", Name: "api", Labels: map[string]string{"team": "b"}}
	c.waitFor(t, "a service account relabelled", calico, want)

	for _, crd := range calicoCRDs(t) {
		must(s.InstallCRD(ctx, crd))
	}
	resource := func(plural string, namespaced bool) dynamic.ResourceInterface {
		r := dyn.Resource(schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: plural})
		if namespaced {
			return r.Namespace("cx")
		}
		return r
	}
	apply := func(plural string, namespaced bool, doc string) {
		t.Helper()
		var u unstructured.Unstructured
		must(yaml.Unmarshal([]byte(doc), &u.Object))
		ri := resource(plural, namespaced)
		if old, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{}); err == nil {
			u.SetResourceVersion(old.GetResourceVersion())
			_, err = ri.Update(ctx, &u, metav1.UpdateOptions{})
			must(err)
			return
		}
		_, err := ri.Create(ctx, &u, metav1.CreateOptions{})
		must(err)
	}
	del := func(plural string, namespaced bool, name string) {
		t.Helper()
		must(resource(plural, namespaced).Delete(ctx, name, metav1.DeleteOptions{}))
	}
	convert := func(doc string, out any) {
		t.Helper()
		must(yaml.Unmarshal([]byte(doc), out))
	}
	expectPolicy := func(step, doc string) {
		t.Helper()
		var p model.Policy
		if kindOf(doc) == "GlobalNetworkPolicy" {
			var g sync.GlobalNetworkPolicy
			convert(doc, &g)
			p, _, err = sync.ConvertGlobalNetworkPolicy(&g)
		} else {
			var n sync.CalicoNetworkPolicy
			convert(doc, &n)
			p, _, err = sync.ConvertCalicoNetworkPolicy(&n)
		}
		must(err)
		want.Policies[p.Key] = p
		c.waitFor(t, step, calico, want)
	}

	// Calico's own samples (testdata/calico) apply unchanged: every field they use is in the
	// CRDs' schemas (strict field validation, kubectl's default; a dry run stores nothing).
	plurals := map[string]string{"Tier": "tiers", "GlobalNetworkPolicy": "globalnetworkpolicies", "NetworkPolicy": "networkpolicies",
		"GlobalNetworkSet": "globalnetworksets", "NetworkSet": "networksets"}
	for _, f := range []string{"10-tiers.yaml", "20-policies.yaml", "30-netsets.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "calico", f))
		must(err)
		for _, doc := range strings.Split(string(data), "\n---\n") {
			var u unstructured.Unstructured
			must(yaml.Unmarshal([]byte(doc), &u.Object))
			if u.GroupVersionKind().Group != "projectcalico.org" {
				continue
			}
			r := dyn.Resource(schema.GroupVersionResource{Group: "projectcalico.org", Version: "v3", Resource: plurals[u.GetKind()]})
			var ri dynamic.ResourceInterface = r
			if u.GetNamespace() != "" {
				u.SetNamespace("cx")
				ri = r.Namespace("cx")
			}
			if _, err := ri.Create(ctx, &u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
				t.Errorf("%s: %s %s does not apply: %v", f, u.GetKind(), u.GetName(), err)
			}
		}
	}

	tier := "apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata: {name: security}\nspec: {order: 100}\n"
	apply("tiers", false, tier)
	want.Tiers["security"] = model.Tier{Name: "security", Order: 100, DefaultAction: model.ActionDeny}
	c.waitFor(t, "a tier created after the CRDs were installed", calico, want)

	gnp := "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: block}\n" +
		"spec: {tier: security, order: 10, selector: has(app), ingress: [{action: Deny, protocol: TCP, source: {nets: [10.9.0.0/16]}, destination: {ports: [22]}}, {action: Pass}]}\n"
	apply("globalnetworkpolicies", false, gnp)
	expectPolicy("a GlobalNetworkPolicy", gnp)
	np := "apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\nmetadata: {name: web, namespace: cx}\n" +
		"spec: {selector: \"app == 'web'\", ingress: [{action: Allow, source: {serviceAccounts: {names: [api]}}, destination: {ports: [http]}}]}\n"
	apply("networkpolicies", true, np)
	expectPolicy("a Calico NetworkPolicy", np)
	gns := "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkSet\nmetadata: {name: ext, labels: {role: ext}}\nspec: {nets: [198.51.100.0/24]}\n"
	apply("globalnetworksets", false, gns)
	ns := "apiVersion: projectcalico.org/v3\nkind: NetworkSet\nmetadata: {name: partners, namespace: cx}\nspec: {nets: [192.0.2.1]}\n"
	apply("networksets", true, ns)
	want.NetworkSets[model.NetworkSetKey{Name: "ext"}] = model.NetworkSet{Key: model.NetworkSetKey{Name: "ext"},
		Labels: model.LabelsOf(map[string]string{"role": "ext"}), Nets: []netip.Prefix{pfx("198.51.100.0/24")}}
	want.NetworkSets[model.NetworkSetKey{Namespace: "cx", Name: "partners"}] = model.NetworkSet{
		Key: model.NetworkSetKey{Namespace: "cx", Name: "partners"}, Nets: []netip.Prefix{pfx("192.0.2.1/32")}}
	c.waitFor(t, "network sets", calico, want)

	// Host endpoints: one per node's interface, the smaller name holding it; the other is
	// counted as invalid and enforced once the holder is gone.
	hep := func(name string) string {
		return "apiVersion: projectcalico.org/v3\nkind: HostEndpoint\nmetadata: {name: " + name + ", labels: {role: node}}\n" +
			"spec: {node: n1, interfaceName: eth0, expectedIPs: [192.0.2.10], profiles: [projectcalico-default-allow]}\n"
	}
	hepModel := func(name string) model.Endpoint {
		return model.Endpoint{Key: model.EndpointKey{Name: name}, Node: "n1", Labels: model.LabelsOf(map[string]string{"role": "node"}),
			Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Running: true,
			Host: &model.HostEndpoint{Interface: "eth0", DefaultAllow: true}}
	}
	apply("hostendpoints", false, hep("n1-b"))
	want.Endpoints[model.EndpointKey{Name: "n1-b"}] = hepModel("n1-b")
	c.waitFor(t, "a host endpoint", calico, want)
	apply("hostendpoints", false, hep("n1-a"))
	delete(want.Endpoints, model.EndpointKey{Name: "n1-b"})
	want.Endpoints[model.EndpointKey{Name: "n1-a"}] = hepModel("n1-a")
	c.waitFor(t, "a second host endpoint of one interface: the smaller name holds it", calico, want)
	if got := testutil.ToFloat64(m.InvalidObjects.WithLabelValues("HostEndpoint")); got < 1 {
		t.Errorf("nftpolicy_invalid_objects_total{kind=HostEndpoint} = %v, want ≥ 1", got)
	}
	del("hostendpoints", false, "n1-a")
	delete(want.Endpoints, model.EndpointKey{Name: "n1-a"})
	want.Endpoints[model.EndpointKey{Name: "n1-b"}] = hepModel("n1-b")
	c.waitFor(t, "the holder deleted: the other holds the interface", calico, want)

	// updates
	apply("tiers", false, "apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata: {name: security}\nspec: {order: 200, defaultAction: Pass}\n")
	want.Tiers["security"] = model.Tier{Name: "security", Order: 200, DefaultAction: model.ActionPass}
	c.waitFor(t, "a tier reordered", calico, want)
	gnp = "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: block}\n" +
		"spec: {tier: security, order: 5, selector: has(app), types: [Ingress], ingress: [{action: Log}, {action: Deny}]}\n"
	apply("globalnetworkpolicies", false, gnp)
	expectPolicy("a GlobalNetworkPolicy updated", gnp)
	apply("networksets", true, "apiVersion: projectcalico.org/v3\nkind: NetworkSet\nmetadata: {name: partners, namespace: cx, labels: {role: partner}}\nspec: {nets: [192.0.2.0/24]}\n")
	want.NetworkSets[model.NetworkSetKey{Namespace: "cx", Name: "partners"}] = model.NetworkSet{
		Key: model.NetworkSetKey{Namespace: "cx", Name: "partners"}, Labels: model.LabelsOf(map[string]string{"role": "partner"}),
		Nets: []netip.Prefix{pfx("192.0.2.0/24")}}
	c.waitFor(t, "a network set updated", calico, want)

	// An invalid version withdraws the policy and is counted; others stay.
	apply("networkpolicies", true, "apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\nmetadata: {name: web, namespace: cx}\n"+
		"spec: {selector: \"app ==\"}\n")
	delete(want.Policies, model.PolicyKey{Kind: sync.KindCalicoNetworkPolicy, Namespace: "cx", Name: "web"})
	c.waitFor(t, "a policy turned invalid is withdrawn", calico, want)
	if got := testutil.ToFloat64(m.InvalidObjects.WithLabelValues(sync.KindCalicoNetworkPolicy)); got != 1 {
		t.Errorf("nftpolicy_invalid_objects_total{kind=CalicoNetworkPolicy} = %v, want 1", got)
	}

	// A policy whose tier does not exist: emitted (the graph enforces it once the tier
	// exists), counted; then the tier arrives.
	lost := "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: lost}\nspec: {tier: later, ingress: [{action: Deny}]}\n"
	apply("globalnetworkpolicies", false, lost)
	expectPolicy("a policy of a tier that does not exist", lost)
	if got := testutil.ToFloat64(m.InvalidObjects.WithLabelValues(sync.KindGlobalNetworkPolicy)); got != 1 {
		t.Errorf("nftpolicy_invalid_objects_total{kind=GlobalNetworkPolicy} = %v, want 1 (its tier is missing)", got)
	}
	apply("tiers", false, "apiVersion: projectcalico.org/v3\nkind: Tier\nmetadata: {name: later}\nspec: {}\n")
	want.Tiers["later"] = model.Tier{Name: "later", Order: sync.OrderUnset, DefaultAction: model.ActionDeny}
	c.waitFor(t, "its tier created", calico, want)

	// A CRD deleted withdraws its objects; the others stay.
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	must(crds.Delete(ctx, "globalnetworksets.projectcalico.org", metav1.DeleteOptions{}))
	delete(want.NetworkSets, model.NetworkSetKey{Name: "ext"})
	c.waitFor(t, "the GlobalNetworkSet CRD deleted", calico, want)

	// deletes
	del("globalnetworkpolicies", false, "block")
	del("globalnetworkpolicies", false, "lost")
	del("tiers", false, "security")
	del("networksets", true, "partners")
	del("hostendpoints", false, "n1-b")
	must(kc.CoreV1().ServiceAccounts("cx").Delete(ctx, "api", metav1.DeleteOptions{}))
	want = newState()
	want.Tiers["later"] = model.Tier{Name: "later", Order: sync.OrderUnset, DefaultAction: model.ActionDeny}
	c.waitFor(t, "deletes", calico, want)
}

// kindOf is a manifest's kind.
func kindOf(doc string) string {
	var tm metav1.TypeMeta
	_ = yaml.Unmarshal([]byte(doc), &tm)
	return tm.Kind
}
