package kube_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// deployDir holds the manifests users apply (kubectl apply -k deploy/).
const deployDir = "../../../deploy"

// manifestDocs reads every YAML document of deploy/*.yaml except kustomization.yaml.
func manifestDocs(t *testing.T) (files []string, docs []manifest) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(deployDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		files = append(files, filepath.Base(p))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(u.Object) == 0 {
				continue // an empty document (a lone "---" or comments)
			}
			docs = append(docs, manifest{file: filepath.Base(p), obj: &u})
		}
	}
	if len(docs) == 0 {
		t.Fatalf("no manifests found in %s", deployDir)
	}
	return files, docs
}

// manifest is one YAML document and the file it came from.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

// TestDeployManifestsServerDryRun is the equivalent of `kubectl apply --dry-run=server -f deploy/`
// on a fresh cluster: each object is created with dryRun=All and strict field validation (kubectl's
// default), so the real API server's decoding, defaulting, validation and admission (e.g. that
// priorityClassName exists) judge it; nothing is stored.
func TestDeployManifestsServerDryRun(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	dryCreate := func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, err
		}
		ri := dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := u.GetNamespace()
			if ns == "" {
				ns = "default"
			}
			return ri.Namespace(ns).Create(ctx, u, metav1.CreateOptions{
				DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict", FieldManager: "kubectl"})
		}
		return ri.Create(ctx, u, metav1.CreateOptions{
			DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict", FieldManager: "kubectl"})
	}

	files, docs := manifestDocs(t)
	for _, d := range docs {
		u := d.obj
		t.Run(d.file+"/"+u.GetKind()+"/"+u.GetName(), func(t *testing.T) {
			got, err := dryCreate(u.DeepCopy())
			if err != nil {
				t.Fatalf("server-side dry run rejected it: %v", err)
			}
			if got.GetKind() != u.GetKind() || got.GetName() != u.GetName() || got.GetUID() == "" {
				t.Errorf("dry run returned %s %q uid %q, want %s %q with a uid",
					got.GetKind(), got.GetName(), got.GetUID(), u.GetKind(), u.GetName())
			}
		})
	}

	// A DaemonSet is accepted whatever its pod template's priorityClassName says; the pods the
	// controller makes would be rejected later. So the template is also dry-run as a pod on a
	// node, which runs the Priority admission plugin and pod validation.
	for _, d := range docs {
		u := d.obj
		if u.GetKind() != "DaemonSet" {
			continue
		}
		t.Run("pod-from/"+u.GetName(), func(t *testing.T) {
			pod := podFromTemplate(t, u, "node-1")
			if _, err := dryCreate(pod); err != nil {
				t.Fatalf("a pod of this DaemonSet would be rejected: %v", err)
			}
			_ = unstructured.SetNestedField(pod.Object, "no-such-class", "spec", "priorityClassName")
			if _, err := dryCreate(pod); !apierrors.IsForbidden(err) {
				t.Errorf("pod with an unknown priorityClassName: err = %v, want Forbidden (the check can fail)", err)
			}
		})
	}

	// kustomization.yaml (kubectl apply -k deploy/) must list exactly the manifests checked above.
	t.Run("kustomization-lists-every-manifest", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(deployDir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var k struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(data, &k); err != nil {
			t.Fatal(err)
		}
		slices.Sort(k.Resources)
		if !slices.Equal(k.Resources, files) {
			t.Errorf("kustomization resources = %v, want the manifests %v", k.Resources, files)
		}
	})

	// The check can fail: broken copies of the DaemonSet are rejected by the same path.
	i := slices.IndexFunc(docs, func(d manifest) bool { return d.obj.GetKind() == "DaemonSet" })
	if i < 0 {
		t.Fatal("deploy/ has no DaemonSet")
	}
	broken := []struct {
		name   string
		mutate func(u *unstructured.Unstructured)
		is     func(error) bool
	}{
		{"unknown-field", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, true, "spec", "hostNetwrk")
		}, apierrors.IsBadRequest},
		{"selector-not-matching-template", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedStringMap(u.Object, map[string]string{"app": "other"}, "spec", "selector", "matchLabels")
		}, apierrors.IsInvalid},
		{"namespace-missing", func(u *unstructured.Unstructured) {
			u.SetNamespace("no-such-namespace")
		}, apierrors.IsNotFound},
	}
	for _, b := range broken {
		t.Run("broken/"+b.name, func(t *testing.T) {
			u := docs[i].obj.DeepCopy()
			b.mutate(u)
			_, err := dryCreate(u)
			if !b.is(err) {
				t.Errorf("err = %v (reason %q), want rejection", err, apierrors.ReasonForError(err))
			}
		})
	}
}

// podFromTemplate builds the pod a DaemonSet controller would create on node.
func podFromTemplate(t *testing.T, ds *unstructured.Unstructured, node string) *unstructured.Unstructured {
	t.Helper()
	tmpl, ok, err := unstructured.NestedMap(ds.Object, "spec", "template")
	if err != nil || !ok {
		t.Fatalf("DaemonSet %s has no spec.template (%v)", ds.GetName(), err)
	}
	pod := &unstructured.Unstructured{Object: tmpl}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	pod.SetNamespace(ds.GetNamespace())
	pod.SetName(ds.GetName() + "-" + node)
	if err := unstructured.SetNestedField(pod.Object, node, "spec", "nodeName"); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestDeployRBAC applies deploy/'s RBAC for real and checks, as the DaemonSet's own
// ServiceAccount, that it can list and watch every kind the agent watches, read nothing else and
// write nothing, and that the agent's watcher reaches in-sync with it.
func TestDeployRBAC(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))

	_, docs := manifestDocs(t)
	var sa, saNS string
	for _, d := range docs {
		u := d.obj
		if u.GetKind() == "DaemonSet" {
			sa, _, _ = unstructured.NestedString(u.Object, "spec", "template", "spec", "serviceAccountName")
			saNS = u.GetNamespace()
			continue
		}
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if _, err := ri.Create(ctx, u.DeepCopy(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: create %s %s: %v", d.file, u.GetKind(), u.GetName(), err)
		}
		// Leave the shared server as found: the dry-run test expects these not to exist.
		t.Cleanup(func() { _ = ri.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
	if sa == "" {
		t.Fatal("the DaemonSet names no serviceAccountName")
	}
	token, err := s.ServiceAccountToken(ctx, saNS, sa)
	if err != nil {
		t.Fatalf("the DaemonSet's ServiceAccount is not defined by deploy/: %v", err)
	}
	agent, err := kubernetes.NewForConfig(s.ConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	can := func(verb, group, resource string) (bool, error) {
		r, err := agent.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: verb, Group: group, Resource: resource}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return r.Status.Allowed, nil
	}
	// The authorizer learns new bindings through its informers: wait for the first grant.
	for ok := false; !ok; {
		if ok, err = can("list", "", "pods"); err != nil {
			t.Fatal(err)
		}
		if !ok {
			select {
			case <-ctx.Done():
				t.Fatalf("the agent's ServiceAccount %s/%s never got list pods", saNS, sa)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}

	// What the agent watches (internal/sync): list and watch, cluster-wide.
	type access struct{ verb, group, resource string }
	var want []access
	for _, r := range []struct{ group, resource string }{
		{"", "pods"}, {"", "namespaces"}, {"networking.k8s.io", "networkpolicies"},
		{"policy.networking.k8s.io", "clusternetworkpolicies"}, {"", "nodes"}, {"", "serviceaccounts"},
		{"projectcalico.org", "tiers"}, {"projectcalico.org", "globalnetworkpolicies"}, {"projectcalico.org", "networkpolicies"},
		{"projectcalico.org", "globalnetworksets"}, {"projectcalico.org", "networksets"},
	} {
		for _, verb := range []string{"list", "watch"} {
			want = append(want, access{verb, r.group, r.resource})
		}
	}
	// It writes nothing and reads nothing else, no single objects.
	deny := []access{
		{"create", "", "pods"}, {"update", "", "pods"}, {"patch", "", "pods/status"}, {"delete", "", "pods"},
		{"update", "", "namespaces"}, {"patch", "", "nodes"}, {"create", "networking.k8s.io", "networkpolicies"},
		{"delete", "networking.k8s.io", "networkpolicies"}, {"list", "", "secrets"}, {"get", "", "configmaps"},
		{"create", "apps", "daemonsets"}, {"escalate", "rbac.authorization.k8s.io", "clusterroles"},
		{"get", "", "nodes"}, {"get", "", "pods"}, {"get", "policy.networking.k8s.io", "clusternetworkpolicies"},
		{"patch", "policy.networking.k8s.io", "clusternetworkpolicies/status"},
	}
	for _, a := range want {
		if ok, err := can(a.verb, a.group, a.resource); err != nil || !ok {
			t.Errorf("agent cannot %s %s.%s (err %v): the ClusterRole misses a kind the agent watches", a.verb, a.resource, a.group, err)
		}
	}
	for _, a := range deny {
		if ok, err := can(a.verb, a.group, a.resource); err != nil || ok {
			t.Errorf("agent can %s %s.%s (err %v): more than read-only", a.verb, a.resource, a.group, err)
		}
	}

	// End to end with the token: the agent's own watcher lists and watches every resource it
	// needs and reaches in-sync (with the ClusterNetworkPolicy CRD installed: without it, the
	// watcher would not need the permission).
	if err := s.InstallClusterNetworkPolicyCRD(ctx); err != nil {
		t.Fatal(err)
	}
	client, err := sync.NewClient(s.ConfigForToken(token))
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	out := make(chan []model.Update, 16)
	done := make(chan error, 1)
	go func() { done <- sync.New(sync.Config{Client: client, NodeName: "node-1"}).Run(wctx, out) }()
	for inSync := false; !inSync; {
		select {
		case batch := <-out:
			inSync = slices.Contains(batch, model.Update(model.SyncStatusUpdate{Status: model.InSync}))
		case <-ctx.Done():
			t.Fatal("the agent's watcher did not reach in-sync with the ServiceAccount's RBAC")
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("the agent's watcher: %v", err)
	}
	if _, err := agent.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agent-may-not"}},
		metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create namespace as the agent: err = %v, want Forbidden", err)
	}
}
