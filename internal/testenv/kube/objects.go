package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// CreateNamespace creates a namespace with the given labels.
func (s *Server) CreateNamespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// PauseImage is the image of the container CreatePod puts in a pod; nothing ever pulls it.
const PauseImage = "registry.k8s.io/pause:3.10"

// CreatePod creates a pod bound to node (spec.nodeName; no Node object is needed) with one
// container carrying ports, then sets its status as a kubelet would: a merge patch of the
// status subresource with phase Running, condition Ready, podIP = ips[0] and podIPs = ips (at
// most one address per family, the API server checks). It returns the pod as stored.
func (s *Server) CreatePod(ctx context.Context, ns, name, node string, labels map[string]string,
	ports []corev1.ContainerPort, ips []netip.Addr) (*corev1.Pod, error) {
	return s.CreatePodInPhase(ctx, ns, name, node, labels, ports, corev1.PodRunning, ips)
}

// CreatePodInPhase is CreatePod with another phase (Pending, Succeeded, Failed; SetPodStatus),
// or with none: phase "" leaves the status the API server gave the pod (Pending, no address),
// as before a kubelet reports. The pod is in no other phase in between.
func (s *Server) CreatePodInPhase(ctx context.Context, ns, name, node string, labels map[string]string,
	ports []corev1.ContainerPort, phase corev1.PodPhase, ips []netip.Addr) (*corev1.Pod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "c", Image: PauseImage, Ports: ports}},
		},
	}
	created, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", ns, name, err)
	}
	if phase == "" {
		return created, nil
	}
	return s.SetPodStatus(ctx, ns, name, phase, ips)
}

// SetPodStatus merge-patches a pod's status subresource: phase, condition Ready (true when
// phase is Running), podIP = ips[0] and podIPs = ips. It returns the pod as stored.
func (s *Server) SetPodStatus(ctx context.Context, ns, name string, phase corev1.PodPhase, ips []netip.Addr) (*corev1.Pod, error) {
	ready := corev1.ConditionFalse
	if phase == corev1.PodRunning {
		ready = corev1.ConditionTrue
	}
	st := corev1.PodStatus{Phase: phase,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.Now()}}}
	for _, a := range ips {
		st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: a.String()})
	}
	if len(ips) > 0 {
		st.PodIP = ips[0].String()
	}
	return s.PatchPodStatus(ctx, ns, name, st)
}

// CreateNode registers a Node object as a kubelet would: labels (plus kubernetes.io/hostname),
// spec.podCIDRs, and status.addresses with each of internalIPs as an InternalIP plus the
// Hostname, and condition Ready. It returns the node as stored.
func (s *Server) CreateNode(ctx context.Context, name string, labels map[string]string,
	internalIPs []netip.Addr, podCIDRs []netip.Prefix) (*corev1.Node, error) {
	l := map[string]string{"kubernetes.io/hostname": name}
	for k, v := range labels {
		l[k] = v
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	for _, p := range podCIDRs {
		node.Spec.PodCIDRs = append(node.Spec.PodCIDRs, p.String())
	}
	if len(podCIDRs) > 0 {
		node.Spec.PodCIDR = node.Spec.PodCIDRs[0]
	}
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create node %s: %w", name, err)
	}
	var addrs []corev1.NodeAddress
	for _, a := range internalIPs {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a.String()})
	}
	addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"addresses":  addrs,
		"conditions": []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("node %s status patch: %w", name, err)
	}
	n, err := s.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of node %s: %w", name, err)
	}
	return n, nil
}

// ServiceAccountToken returns a token for the ServiceAccount ns/name (which must exist), made
// by the TokenRequest API and valid for an hour: requests with it carry the account's RBAC.
func (s *Server) ServiceAccountToken(ctx context.Context, ns, name string) (string, error) {
	exp := int64(3600)
	tr, err := s.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// ConfigForToken returns a copy of s.Config that authenticates with token instead of the
// admin token.
func (s *Server) ConfigForToken(token string) *rest.Config {
	c := rest.CopyConfig(s.Config)
	c.BearerToken = token
	return c
}

// PatchPodStatus merge-patches a pod's status subresource with the non-empty fields of st (e.g.
// hostIP/hostIPs, phase Succeeded, new podIPs), as a kubelet reports changes. Lists in st
// replace the stored lists. It returns the pod as stored.
func (s *Server) PatchPodStatus(ctx context.Context, ns, name string, st corev1.PodStatus) (*corev1.Pod, error) {
	patch, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return nil, fmt.Errorf("pod %s/%s status patch: %w", ns, name, err)
	}
	p, err := s.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of pod %s/%s: %w", ns, name, err)
	}
	return p, nil
}
