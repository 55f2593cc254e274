package e2e

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

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// The barrier: before a step's tables are probed, every agent must have committed the step's
// writes. Otherwise a table equal to the previous step's would pass on the previous state, and
// an agent that ignored the step would not be caught. One object of each watched resource is
// written after the step's changes (sentinels in their own namespace, selecting nothing);
// their resourceVersions are at least those of every write before them, and each agent
// publishes, after committing, the newest resourceVersion per resource its table reflects
// (nftpolicy_source_resource_version): once that reaches the sentinels', the step is in the
// kernel.

const barrierNamespace = "nftp-barrier"

// barrier writes the sentinels and returns their resourceVersions by resource. n counts the
// harness's barriers from 1: the first creates the sentinels (or finds those of an earlier
// harness; nothing deletes them), and every call patches their annotation to n and the time, a
// value no barrier wrote before (n alone would repeat an earlier harness's on the same API
// server, and a patch that changes nothing keeps the old resourceVersion), so each sentinel gets
// a new resourceVersion, newer than the step's writes.
func barrier(ctx context.Context, s *kube.Server, n int) (map[string]uint64, error) {
	c := s.Client
	if n == 1 {
		if err := createSentinels(ctx, s); err != nil {
			return nil, err
		}
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"nftpolicy.test/barrier":"%d@%d"}}}`, n, time.Now().UnixNano()))
	var objs = map[string]func() (metav1.Object, error){
		"namespaces": func() (metav1.Object, error) {
			return c.CoreV1().Namespaces().Patch(ctx, barrierNamespace, types.MergePatchType, patch, metav1.PatchOptions{})
		},
		"pods": func() (metav1.Object, error) {
			return c.CoreV1().Pods(barrierNamespace).Patch(ctx, "barrier", types.MergePatchType, patch, metav1.PatchOptions{})
		},
		"networkpolicies": func() (metav1.Object, error) {
			return c.NetworkingV1().NetworkPolicies(barrierNamespace).Patch(ctx, "barrier", types.MergePatchType, patch, metav1.PatchOptions{})
		},
	}
	out := map[string]uint64{}
	for res, write := range objs {
		o, err := write()
		if err != nil {
			return nil, fmt.Errorf("barrier: writing the %s sentinel: %w", res, err)
		}
		rv, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("barrier: resourceVersion %q of the %s sentinel: %w", o.GetResourceVersion(), res, err)
		}
		out[res] = rv
	}
	return out, nil
}

// createSentinels creates the barrier's namespace, pod and policy, unless they exist.
func createSentinels(ctx context.Context, s *kube.Server) error {
	c := s.Client
	if err := s.CreateNamespace(ctx, barrierNamespace, nil); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: barrierNamespace, Name: "barrier"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: kube.PauseImage}}}} // on no node
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
