package kube

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	npav1alpha2 "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/typed/apis/v1alpha2"
	npav1beta1 "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/typed/apis/v1beta1"
)

// The CRDs are copied unchanged from the module's config/crd/{standard,experimental}; deploy/crds
// holds the same files (a test checks).
//
//go:embed crds/policy.networking.k8s.io_clusternetworkpolicies.yaml
var clusterNetworkPolicyCRD []byte

// the experimental channel's: the standard one plus the nodes and domainNames peers
//
//go:embed crds/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml
var clusterNetworkPolicyExperimentalCRD []byte

// the standard channel's of the last release that serves v1alpha2 only
//
//go:embed crds/v0.2.0/policy.networking.k8s.io_clusternetworkpolicies.yaml
var clusterNetworkPolicyV1alpha2OnlyCRD []byte

// ClusterNetworkPolicyVersion is the sigs.k8s.io/network-policy-api release whose CRD is embedded.
const ClusterNetworkPolicyVersion = "v0.3.0"

// ClusterNetworkPolicyCRD returns (a copy of) the CustomResourceDefinition YAML of
// ClusterNetworkPolicy (standard channel) from sigs.k8s.io/network-policy-api
// ClusterNetworkPolicyVersion (the version go.mod requires, when it requires the module): it
// serves policy.networking.k8s.io v1beta1 (the storage version) and v1alpha2, of one schema.
func ClusterNetworkPolicyCRD() []byte { return bytes.Clone(clusterNetworkPolicyCRD) }

// ClusterNetworkPolicyExperimentalCRD returns (a copy of) the experimental channel's CRD of the
// same version: the standard one, plus the egress peers nodes and domainNames, which the
// conformance suite's node-peer tests need.
func ClusterNetworkPolicyExperimentalCRD() []byte {
	return bytes.Clone(clusterNetworkPolicyExperimentalCRD)
}

// ClusterNetworkPolicies is the resource InstallClusterNetworkPolicyCRD makes available, at its
// storage version.
var ClusterNetworkPolicies = schema.GroupVersionResource{
	Group: "policy.networking.k8s.io", Version: "v1beta1", Resource: "clusternetworkpolicies",
}

var crdResource = schema.GroupVersionResource{
	Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
}

// InstallClusterNetworkPolicyCRD installs the ClusterNetworkPolicy CRD (see InstallCRD) and
// returns once the API server serves the resource, so informers and RESTMappers started
// afterwards find it.
func (s *Server) InstallClusterNetworkPolicyCRD(ctx context.Context) error {
	return s.InstallCRD(ctx, clusterNetworkPolicyCRD)
}

// InstallClusterNetworkPolicyExperimentalCRD installs the experimental channel's CRD instead
// (no-op when the same channel's CRD is present, an error when another is), as
// InstallClusterNetworkPolicyCRD does.
func (s *Server) InstallClusterNetworkPolicyExperimentalCRD(ctx context.Context) error {
	return s.InstallCRD(ctx, clusterNetworkPolicyExperimentalCRD)
}

// InstallClusterNetworkPolicyV1alpha2OnlyCRD installs the standard channel's CRD of
// sigs.k8s.io/network-policy-api v0.2.0 instead (no-op when that one is present, an error when
// another is), which serves v1alpha2 only: a cluster whose CRD predates v1beta1.
func (s *Server) InstallClusterNetworkPolicyV1alpha2OnlyCRD(ctx context.Context) error {
	return s.InstallCRD(ctx, clusterNetworkPolicyV1alpha2OnlyCRD)
}

// InstallCRD creates the CustomResourceDefinition in manifest (YAML or JSON) unless one of that
// name exists, waits until it is Established, then until discovery lists its resources. An
// existing one must carry the manifest's annotations (its channel and version), or InstallCRD
// fails.
func (s *Server) InstallCRD(ctx context.Context, manifest []byte) error {
	var crd unstructured.Unstructured
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096).Decode(&crd.Object); err != nil {
		return fmt.Errorf("install CRD: decode: %w", err)
	}
	if crd.GetKind() != "CustomResourceDefinition" {
		return fmt.Errorf("install CRD: manifest is a %q, not a CustomResourceDefinition", crd.GetKind())
	}
	name := crd.GetName()
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", name, err)
	}
	crds := dyn.Resource(crdResource)
	_, err = crds.Create(ctx, &crd, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		if err := sameAnnotations(ctx, crds, &crd); err != nil {
			return fmt.Errorf("install CRD %s: %w", name, err)
		}
	case err != nil:
		return fmt.Errorf("install CRD %s: %w", name, err)
	}
	return s.waitCRDServed(ctx, crds, &crd)
}

// sameAnnotations fails when the installed CRD of want's name lacks one of want's annotations or
// holds another value (network-policy-api's CRDs name their channel and bundle version there): a
// test that needs the experimental channel fails loudly where an earlier test of the package
// installed the standard one, instead of running against the wrong schema.
func sameAnnotations(ctx context.Context, crds dynamic.NamespaceableResourceInterface, want *unstructured.Unstructured) error {
	have, err := crds.Get(ctx, want.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	for k, v := range want.GetAnnotations() {
		if got, ok := have.GetAnnotations()[k]; !ok || got != v {
			return fmt.Errorf("already installed with annotation %s=%q, not %q", k, got, v)
		}
	}
	return nil
}

// UpgradeClusterNetworkPolicyCRD replaces the ClusterNetworkPolicy CRD installed (the v0.2.0 one
// of InstallClusterNetworkPolicyV1alpha2OnlyCRD, say) by the standard channel's of
// ClusterNetworkPolicyVersion, as `kubectl apply` of a new release does: the objects stay. It
// returns once every version of the new CRD is served.
func (s *Server) UpgradeClusterNetworkPolicyCRD(ctx context.Context) error {
	var crd unstructured.Unstructured
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(clusterNetworkPolicyCRD), 4096).Decode(&crd.Object); err != nil {
		return fmt.Errorf("upgrade CRD: decode: %w", err)
	}
	name := crd.GetName()
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return fmt.Errorf("upgrade CRD %s: %w", name, err)
	}
	crds := dyn.Resource(crdResource)
	old, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("upgrade CRD %s: %w", name, err)
	}
	crd.SetResourceVersion(old.GetResourceVersion())
	if _, err := crds.Update(ctx, &crd, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("upgrade CRD %s: %w", name, err)
	}
	return s.waitCRDServed(ctx, crds, &crd)
}

// waitCRDServed waits until crd is Established and discovery lists its resource in every
// version it serves.
func (s *Server) waitCRDServed(ctx context.Context, crds dynamic.NamespaceableResourceInterface, crd *unstructured.Unstructured) error {
	name := crd.GetName()
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")

	err := poll(ctx, 50*time.Millisecond, nil, "CRD "+name+" to be served", func() (error, error) {
		ok, err := s.crdServed(ctx, crds, name, group, plural, versions)
		if err != nil || ok {
			return nil, err
		}
		return errors.New("not established or not in discovery yet"), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not served: %w", name, err)
	}
	return nil
}

// crdServed reports whether the CRD is Established and discovery lists plural in every served
// version.
func (s *Server) crdServed(ctx context.Context, crds dynamic.NamespaceableResourceInterface,
	name, group, plural string, versions []any) (bool, error) {
	got, err := crds.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	established := false
	for _, c := range conds {
		m, _ := c.(map[string]any)
		established = established || m["type"] == "Established" && m["status"] == "True"
	}
	if !established {
		return false, nil
	}
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); !served {
			continue
		}
		ver, _ := m["name"].(string)
		list, err := s.Client.Discovery().ServerResourcesForGroupVersion(group + "/" + ver)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		found := false
		for _, r := range list.APIResources {
			found = found || r.Name == plural
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// ClusterNetworkPolicyClient is the typed client of ClusterNetworkPolicies v1beta1 (the
// module's generated clientset: tests and benchmarks only; the agent reads them through its own
// REST client).
func (s *Server) ClusterNetworkPolicyClient() (npav1beta1.ClusterNetworkPolicyInterface, error) {
	c, err := npav1beta1.NewForConfig(s.Config)
	if err != nil {
		return nil, fmt.Errorf("the ClusterNetworkPolicy client: %w", err)
	}
	return c.ClusterNetworkPolicies(), nil
}

// ClusterNetworkPolicyV1alpha2Client is the typed client of ClusterNetworkPolicies v1alpha2,
// which every CRD the Server installs serves.
func (s *Server) ClusterNetworkPolicyV1alpha2Client() (npav1alpha2.ClusterNetworkPolicyInterface, error) {
	c, err := npav1alpha2.NewForConfig(s.Config)
	if err != nil {
		return nil, fmt.Errorf("the ClusterNetworkPolicy v1alpha2 client: %w", err)
	}
	return c.ClusterNetworkPolicies(), nil
}

// DeleteClusterNetworkPolicyCRD deletes the ClusterNetworkPolicy CRD (the API server deletes
// every ClusterNetworkPolicy with it) and returns once it is gone.
func (s *Server) DeleteClusterNetworkPolicyCRD(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return fmt.Errorf("delete the ClusterNetworkPolicy CRD: %w", err)
	}
	const name = "clusternetworkpolicies.policy.networking.k8s.io"
	crds := dyn.Resource(crdResource)
	if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete CRD %s: %w", name, err)
	}
	return poll(ctx, 50*time.Millisecond, nil, "CRD "+name+" to be gone", func() (error, error) {
		_, err := crds.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return errors.New("still there"), nil
	})
}
