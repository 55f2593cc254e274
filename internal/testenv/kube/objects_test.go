package kube_test

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

func TestCreateNode(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	n, err := s.CreateNode(ctx, "node-a", map[string]string{"zone": "z1"},
		[]netip.Addr{netip.MustParseAddr("192.168.50.1"), netip.MustParseAddr("fd00:50::1")},
		[]netip.Prefix{netip.MustParsePrefix("10.244.7.0/24"), netip.MustParsePrefix("fd00:10:244:7::/64")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["zone"] != "z1" || got.Labels["kubernetes.io/hostname"] != "node-a" {
		t.Errorf("labels = %v", got.Labels)
	}
	if want := []string{"10.244.7.0/24", "fd00:10:244:7::/64"}; !slices.Equal(got.Spec.PodCIDRs, want) {
		t.Errorf("podCIDRs = %v, want %v", got.Spec.PodCIDRs, want)
	}
	want := []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "192.168.50.1"},
		{Type: corev1.NodeInternalIP, Address: "fd00:50::1"},
		{Type: corev1.NodeHostName, Address: "node-a"},
	}
	if !slices.Equal(got.Status.Addresses, want) {
		t.Errorf("addresses = %v, want %v", got.Status.Addresses, want)
	}
}

// TestDeployCRDs: deploy/crds ships the CRDs the tests install, byte for byte.
func TestDeployCRDs(t *testing.T) {
	for dir, embedded := range map[string][]byte{
		"standard":     kube.ClusterNetworkPolicyCRD(),
		"experimental": kube.ClusterNetworkPolicyExperimentalCRD(),
	} {
		got, err := os.ReadFile(filepath.Join(deployDir, "crds", dir, "policy.networking.k8s.io_clusternetworkpolicies.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, embedded) {
			t.Errorf("deploy/crds/%s differs from the CRD the tests install: copy config/crd/%s of sigs.k8s.io/network-policy-api %s to both",
				dir, dir, kube.ClusterNetworkPolicyVersion)
		}
	}
}

func TestClusterNetworkPolicyCRD(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)

	// The embedded copy is of kube.ClusterNetworkPolicyVersion, and follows the module version
	// go.mod requires when it requires the module.
	var crd unstructured.Unstructured
	if err := yaml.Unmarshal(kube.ClusterNetworkPolicyCRD(), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if got := crd.GetAnnotations()["policy.networking.k8s.io/bundle-version"]; got != kube.ClusterNetworkPolicyVersion {
		t.Errorf("embedded CRD bundle-version %q, want %q", got, kube.ClusterNetworkPolicyVersion)
	}
	var exp unstructured.Unstructured
	if err := yaml.Unmarshal(kube.ClusterNetworkPolicyExperimentalCRD(), &exp.Object); err != nil {
		t.Fatal(err)
	}
	if a := exp.GetAnnotations(); a["policy.networking.k8s.io/bundle-version"] != kube.ClusterNetworkPolicyVersion ||
		a["policy.networking.k8s.io/channel"] != "experimental" || exp.GetName() != crd.GetName() {
		t.Errorf("embedded experimental CRD %s: annotations %v", exp.GetName(), a)
	}
	gomod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^\s*sigs\.k8s\.io/network-policy-api (v\S+)`).FindSubmatch(gomod); m != nil && string(m[1]) != kube.ClusterNetworkPolicyVersion {
		t.Errorf("go.mod requires sigs.k8s.io/network-policy-api %s, the embedded CRD is of %s: copy config/crd/standard of that version", m[1], kube.ClusterNetworkPolicyVersion)
	}

	for range 2 { // idempotent
		if err := s.InstallClusterNetworkPolicyCRD(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	cnp := func(name, tier string, priority int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policy.networking.k8s.io/v1beta1",
			"kind":       "ClusterNetworkPolicy",
			"metadata":   map[string]any{"name": name},
			"spec": map[string]any{
				"tier":     tier,
				"priority": priority,
				"subject":  map[string]any{"namespaces": map[string]any{}},
				"ingress": []any{map[string]any{
					"action": "Deny",
					"from":   []any{map[string]any{"namespaces": map[string]any{"matchLabels": map[string]any{"team": "b"}}}},
				}},
			},
		}}
	}
	tests := []struct {
		name     string
		obj      *unstructured.Unstructured
		accepted bool
	}{
		{"admin", cnp("deny-b", "Admin", 10), true},
		{"baseline", cnp("base", "Baseline", 0), true},
		{"unknown-tier", cnp("bad-tier", "Developer", 10), false},
		{"priority-above-1000", cnp("bad-priority", "Admin", 1001), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dyn.Resource(kube.ClusterNetworkPolicies).Create(ctx, tc.obj, metav1.CreateOptions{})
			if tc.accepted && err != nil {
				t.Fatal(err)
			}
			if !tc.accepted && !apierrors.IsInvalid(err) {
				t.Fatalf("err = %v, want Invalid (CRD schema validation)", err)
			}
		})
	}
	list, err := dyn.Resource(kube.ClusterNetworkPolicies).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range list.Items {
		if it.GetName() != kube.BarrierName {
			names = append(names, it.GetName())
		}
	}
	slices.Sort(names)
	if want := []string{"base", "deny-b"}; !slices.Equal(names, want) {
		t.Errorf("stored ClusterNetworkPolicies = %v, want %v", names, want)
	}
}

// TestBarrier: each sentinel's resourceVersion, the ClusterNetworkPolicy's included once its CRD
// is served, is newer than a write made before the call, and a second call gives newer ones
// again.
func TestBarrier(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	if err := s.InstallClusterNetworkPolicyCRD(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateNamespace(ctx, "barrier-test", nil); err != nil {
		t.Fatal(err)
	}
	ns, err := s.Client.CoreV1().Namespaces().Get(ctx, "barrier-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := strconv.ParseUint(ns.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Barrier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.Barrier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resources := []string{"namespaces", "pods", "networkpolicies", "clusternetworkpolicies"}
	for _, res := range resources {
		if first[res] <= before || second[res] <= first[res] {
			t.Errorf("%s: sentinel versions %d then %d after a write at %d; want each newer", res, first[res], second[res], before)
		}
	}
	if len(first) != len(resources) {
		t.Errorf("versions of %d resources, want %d: %v", len(first), len(resources), first)
	}
}

// TestCreatePodInPhase: a pod made in a phase is stored in it, with its addresses; one made in
// none is stored as the API server makes it (Pending, no address).
func TestCreatePodInPhase(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := ctxFor(t)
	if err := s.CreateNamespace(ctx, "phases", nil); err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr("10.244.1.9")
	for _, tc := range []struct {
		phase, want corev1.PodPhase
		ips         []netip.Addr
		wantIP      string
	}{
		{corev1.PodSucceeded, corev1.PodSucceeded, []netip.Addr{ip}, ip.String()},
		{corev1.PodPending, corev1.PodPending, []netip.Addr{ip}, ip.String()},
		{"", corev1.PodPending, []netip.Addr{ip}, ""},
	} {
		name := "in-" + strings.ToLower(string(tc.phase)) + "-phase"
		if _, err := s.CreatePodInPhase(ctx, "phases", name, "node-1", nil, nil, tc.phase, tc.ips); err != nil {
			t.Fatal(err)
		}
		p, err := s.Client.CoreV1().Pods("phases").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase != tc.want || p.Status.PodIP != tc.wantIP || p.Spec.NodeName != "node-1" {
			t.Errorf("%s: phase %q, podIP %q, node %q; want %q, %q, node-1", name, p.Status.Phase, p.Status.PodIP, p.Spec.NodeName, tc.want, tc.wantIP)
		}
	}
}
