package kube

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	policyv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
)

// barrierNamespace holds Barrier's sentinels: itself, a pod on no node and a policy selecting
// nothing. The ClusterNetworkPolicy sentinel, cluster-scoped, bears the same name.
const barrierNamespace = "nftp-barrier"

// BarrierName is the name of Barrier's sentinels, the ClusterNetworkPolicy among them: a test
// that deletes every ClusterNetworkPolicy spares it.
const BarrierName = barrierNamespace

// Barrier writes one sentinel of each resource an agent watches and returns their new
// resourceVersions by resource ("namespaces", "pods", "networkpolicies", and
// "clusternetworkpolicies" while the API server serves them). Each is newer than
// every write made before the call, so an agent whose nftpolicy_source_resource_version has
// reached them has committed all those writes (agentproc.Process.WaitCaughtUp): without such a
// barrier, a table equal to the previous step's would pass on the previous state, and an agent
// that ignored the step would not be caught.
//
// The sentinels live in namespace nftp-barrier (the ClusterNetworkPolicy: named so, its subject
// a namespace label no namespace has) and change nothing an agent enforces; the first call on a
// Server makes them (or finds those of an earlier run; nothing deletes them). Every
// call patches their annotation to a value no call wrote before (a patch that changes nothing
// would keep the old resourceVersion).
func (s *Server) Barrier(ctx context.Context) (map[string]uint64, error) {
	c := s.Client
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"nftpolicy.test/barrier":"%d"}}}`, time.Now().UnixNano())
	writes := []struct {
		res   string
		write func() (metav1.Object, error)
	}{
		{"namespaces", func() (metav1.Object, error) {
			return c.CoreV1().Namespaces().Patch(ctx, barrierNamespace, types.MergePatchType, patch, metav1.PatchOptions{})
		}},
		{"pods", func() (metav1.Object, error) {
			return c.CoreV1().Pods(barrierNamespace).Patch(ctx, "barrier", types.MergePatchType, patch, metav1.PatchOptions{})
		}},
		{"networkpolicies", func() (metav1.Object, error) {
			return c.NetworkingV1().NetworkPolicies(barrierNamespace).Patch(ctx, "barrier", types.MergePatchType, patch, metav1.PatchOptions{})
		}},
	}
	served, err := s.servesClusterNetworkPolicies()
	if err != nil {
		return nil, fmt.Errorf("barrier: %w", err)
	}
	if served {
		cnps, err := s.ClusterNetworkPolicyV1alpha2Client() // served by every CRD installed
		if err != nil {
			return nil, fmt.Errorf("barrier: %w", err)
		}
		writes = append(writes, struct {
			res   string
			write func() (metav1.Object, error)
		}{"clusternetworkpolicies", func() (metav1.Object, error) {
			o, err := cnps.Patch(ctx, BarrierName, types.MergePatchType, patch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				_, err = cnps.Create(ctx, barrierClusterNetworkPolicy(), metav1.CreateOptions{})
				if err == nil || apierrors.IsAlreadyExists(err) {
					o, err = cnps.Patch(ctx, BarrierName, types.MergePatchType, patch, metav1.PatchOptions{})
				}
			}
			return o, err
		}})
	}
	out := map[string]uint64{}
	for _, w := range writes {
		o, err := w.write()
		if apierrors.IsNotFound(err) {
			if err = s.createSentinels(ctx); err == nil {
				o, err = w.write()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("barrier: writing the %s sentinel: %w", w.res, err)
		}
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("barrier: resourceVersion %q of the %s sentinel: %w", o.GetResourceVersion(), w.res, err)
		}
		out[w.res] = rv
	}
	return out, nil
}

// createSentinels creates Barrier's namespace, pod and policy, unless they exist.
func (s *Server) createSentinels(ctx context.Context) error {
	c := s.Client
	if err := s.CreateNamespace(ctx, barrierNamespace, nil); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: barrierNamespace, Name: "barrier"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: PauseImage}}}} // on no node
	if _, err := c.CoreV1().Pods(barrierNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: barrierNamespace, Name: "barrier"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"nftp-barrier": "none"}}}}
	if _, err := c.NetworkingV1().NetworkPolicies(barrierNamespace).Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// barrierClusterNetworkPolicy is the ClusterNetworkPolicy sentinel: a Baseline policy whose
// subject is the namespaces labelled nftp-barrier=none (there are none), without rules.
func barrierClusterNetworkPolicy() *policyv1alpha2.ClusterNetworkPolicy {
	return &policyv1alpha2.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: BarrierName},
		Spec: policyv1alpha2.ClusterNetworkPolicySpec{Tier: policyv1alpha2.BaselineTier, Priority: 1000,
			Subject: policyv1alpha2.ClusterNetworkPolicySubject{
				Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"nftp-barrier": "none"}}}},
	}
}

// servesClusterNetworkPolicies reports whether discovery lists ClusterNetworkPolicies v1alpha2
// (their CRD is installed and served; every CRD the Server installs serves v1alpha2).
func (s *Server) servesClusterNetworkPolicies() (bool, error) {
	gv := policyv1alpha2.GroupVersion.String()
	list, err := s.Client.Discovery().ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovery of %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == ClusterNetworkPolicies.Resource {
			return true, nil
		}
	}
	return false, nil
}
