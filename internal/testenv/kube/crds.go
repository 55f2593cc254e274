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
)

//go:embed crds/policy.networking.k8s.io_clusternetworkpolicies.yaml
var clusterNetworkPolicyCRD []byte

// the experimental channel's: the standard one plus the nodes and domainNames peers
//
//go:embed crds/experimental/policy.networking.k8s.io_clusternetworkpolicies.yaml
var clusterNetworkPolicyExperimentalCRD []byte

// ClusterNetworkPolicyVersion is the sigs.k8s.io/network-policy-api release whose CRD is embedded.
const ClusterNetworkPolicyVersion = "v0.2.0"

// ClusterNetworkPolicyCRD returns (a copy of) the CustomResourceDefinition YAML of
// ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2, standard channel) from
// sigs.k8s.io/network-policy-api ClusterNetworkPolicyVersion (the version go.mod requires, when
// it requires the module).
func ClusterNetworkPolicyCRD() []byte { return bytes.Clone(clusterNetworkPolicyCRD) }

// ClusterNetworkPolicyExperimentalCRD returns (a copy of) the experimental channel's CRD of the
// same version: the standard one, plus the egress peers nodes and domainNames, which the
// conformance suite's node-peer tests need.
func ClusterNetworkPolicyExperimentalCRD() []byte {
	return bytes.Clone(clusterNetworkPolicyExperimentalCRD)
}

// ClusterNetworkPolicies is the resource InstallClusterNetworkPolicyCRD makes available.
var ClusterNetworkPolicies = schema.GroupVersionResource{
	Group: "policy.networking.k8s.io", Version: "v1alpha2", Resource: "clusternetworkpolicies",
}

var crdResource = schema.GroupVersionResource{
	Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
}

// InstallClusterNetworkPolicyCRD installs the ClusterNetworkPolicy CRD (no-op when present) and
// returns once the API server serves the resource, so informers and RESTMappers started
// afterwards find it.
func (s *Server) InstallClusterNetworkPolicyCRD(ctx context.Context) error {
	return s.InstallCRD(ctx, clusterNetworkPolicyCRD)
}

// InstallClusterNetworkPolicyExperimentalCRD installs the experimental channel's CRD instead
// (no-op when a ClusterNetworkPolicy CRD is present), as InstallClusterNetworkPolicyCRD does.
func (s *Server) InstallClusterNetworkPolicyExperimentalCRD(ctx context.Context) error {
	return s.InstallCRD(ctx, clusterNetworkPolicyExperimentalCRD)
}

// InstallCRD creates the CustomResourceDefinition in manifest (YAML or JSON) unless one of that
// name exists, waits until it is Established, then until discovery lists its resources.
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
	if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("install CRD %s: %w", name, err)
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")

	err = poll(ctx, 50*time.Millisecond, nil, "CRD "+name+" to be served", func() (error, error) {
		ok, err := s.crdServed(ctx, crds, name, group, plural, versions)
		if err != nil || ok {
			return nil, err
		}
		return errors.New("not established or not in discovery yet"), nil
	})
	if err != nil {
		return fmt.Errorf("install CRD %s: %w", name, err)
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

// ClusterNetworkPolicyClient is the typed client of ClusterNetworkPolicies (the module's
// generated clientset: tests and benchmarks only; the agent reads them through its own REST
// client).
func (s *Server) ClusterNetworkPolicyClient() (npav1alpha2.ClusterNetworkPolicyInterface, error) {
	c, err := npav1alpha2.NewForConfig(s.Config)
	if err != nil {
		return nil, fmt.Errorf("the ClusterNetworkPolicy client: %w", err)
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
