package sync_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// realisticPod is a pod as the API server returns it for a typical Deployment replica:
// managedFields, owner references, annotations, two containers with env, resources, probes and
// mounts, volumes, tolerations, conditions and container statuses.
func realisticPod(i int) *corev1.Pod {
	ns := fmt.Sprintf("ns-%03d", i%500)
	name := fmt.Sprintf("app-%d-7c9d8f6b5-%05d", i%40, i)
	ts := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	container := func(cname string, port int32) corev1.Container {
		var env []corev1.EnvVar
		for e := 0; e < 10; e++ {
			env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", e), Value: fmt.Sprintf("value-%d-%d", e, i)})
		}
		return corev1.Container{Name: cname, Image: "registry.example.com/team/" + cname + ":v1.2.3",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}, {ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
			Env:   env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			VolumeMounts:             []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			LivenessProbe:            probe,
			ReadinessProbe:           probe,
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}
	}
	managed := strings.Repeat(`{"f:metadata":{"f:labels":{"f:app":{},"f:pod-template-hash":{}}},"f:spec":{"f:containers":{}}}`, 20)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("0b7e4c1a-%04x-4c6e-9a57-%012x", i%0xffff, i)),
			ResourceVersion: fmt.Sprint(100000 + i), GenerateName: name[:len(name)-5], CreationTimestamp: ts,
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%40), "pod-template-hash": "7c9d8f6b5", "team": "payments",
				"version": "v1", "app.kubernetes.io/name": fmt.Sprintf("app-%d", i%40), "app.kubernetes.io/part-of": "shop"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
				"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name[:len(name)-6],
				UID: "5d1f2a8e-0000-4c6e-9a57-000000000000", Controller: new(true), BlockOwnerDeletion: new(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &ts,
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(managed)},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &ts, Subresource: "status",
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(managed)},
			},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("node-%03d", i%100), ServiceAccountName: "default", DNSPolicy: corev1.DNSClusterFirst,
			RestartPolicy: corev1.RestartPolicyAlways, SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: new(int64(30)),
			Containers: []corev1.Container{container("server", 8080), container("sidecar", 15000)},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: new(int64(3607))}}}}}}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "192.168.0.10", HostIPs: []corev1.HostIP{{IP: "192.168.0.10"}},
			PodIP: fmt.Sprintf("10.%d.%d.%d", 1+i>>16, (i>>8)&255, i&255), StartTime: &ts,
			PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.%d.%d.%d", 1+i>>16, (i>>8)&255, i&255)}, {IP: fmt.Sprintf("fd00::%x", i)}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: ts},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: ts}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "server", Ready: true, Image: "registry.example.com/team/server:v1.2.3", ImageID: "registry.example.com/team/server@sha256:" + strings.Repeat("ab", 32),
					ContainerID: "containerd://" + strings.Repeat("cd", 32), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}}},
				{Name: "sidecar", Ready: true, Image: "registry.example.com/team/sidecar:v1.2.3", ImageID: "registry.example.com/team/sidecar@sha256:" + strings.Repeat("ef", 32),
					ContainerID: "containerd://" + strings.Repeat("01", 32), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts}}}},
		},
	}
}

func realisticPolicy(i int) *networkingv1.NetworkPolicy {
	ns := fmt.Sprintf("ns-%03d", i%500)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("policy-%d", i), Namespace: ns, ResourceVersion: fmt.Sprint(200000 + i),
			UID:         types.UID(fmt.Sprintf("7a1b2c3d-%04x-4c6e-9a57-%012x", i%0xffff, i)),
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 800)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "networking.k8s.io/v1",
				FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(strings.Repeat(`{"f:spec":{"f:ingress":{}}}`, 20))}}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *labels("app", fmt.Sprintf("app-%d", i%40)),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: labels("app", fmt.Sprintf("app-%d", (i+1)%40))},
					{NamespaceSelector: labels("team", "payments"), PodSelector: labels("role", "frontend")},
					{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: portName("http")}, {Protocol: &tcp, Port: portNum(8443)}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: labels("kubernetes.io/metadata.name", "kube-system"), PodSelector: labels("k8s-app", "kube-dns")}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: portNum(53)}, {Protocol: &tcp, Port: portNum(53)}},
			}},
		},
	}
}

// TestInformerCacheMemory measures the heap that the watcher's informer caches (and its record
// of what it emitted) hold for 10,000 pods, 500 namespaces and 2,000 policies of realistic
// size, and checks it against a budget of 50 MiB. The objects come from a fake clientset built
// before the first measurement (its own copies are in the baseline); the informers' caches
// hold the transformed copies they list. The fake's lists go through protobuf (protobufLists),
// so that, as from the API server, every listed object has strings of its own rather than
// sharing the fake's.
func TestInformerCacheMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 12,500 objects; not in -short")
	}
	const pods, namespaces, policies = 10000, 500, 2000
	objs := make([]k8sruntime.Object, 0, pods+namespaces+policies)
	for i := 0; i < namespaces; i++ {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ns-%03d", i),
			Labels: map[string]string{"team": "payments", "kubernetes.io/metadata.name": fmt.Sprintf("ns-%03d", i)}}})
	}
	for i := 0; i < pods; i++ {
		objs = append(objs, realisticPod(i))
	}
	for i := 0; i < policies; i++ {
		objs = append(objs, realisticPolicy(i))
	}
	cs := fake.NewSimpleClientset(objs...)
	protobufLists(cs)
	objs = nil
	before := heapInUse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := sync.New(sync.Config{Client: sync.ClientsetClient(cs), NodeName: "node-000"})
	out := make(chan []model.Update, 16)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, out) }()
	// what the graph would keep of the updates: their endpoints and policies
	var endpoints []model.Endpoint
	var policySet []model.Policy
	var nss int
	for synced := false; !synced; {
		select {
		case batch := <-out:
			for _, u := range batch {
				switch u := u.(type) {
				case model.EndpointSet:
					endpoints = append(endpoints, u.Endpoint)
				case model.NamespaceSet:
					nss++
				case model.PolicySet:
					policySet = append(policySet, u.Policy)
				case model.SyncStatusUpdate:
					synced = u.Status == model.InSync
				}
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("no in-sync")
		}
	}
	if len(endpoints) != pods || nss != namespaces || len(policySet) != policies {
		t.Fatalf("initial state: %d endpoints, %d namespaces, %d policies; want %d, %d, %d",
			len(endpoints), nss, len(policySet), pods, namespaces, policies)
	}
	endpoints, policySet = slices.Clip(endpoints), slices.Clip(policySet)
	withEmitted := heapInUse()
	runtime.KeepAlive(endpoints)
	runtime.KeepAlive(policySet)
	endpoints, policySet = nil, nil
	after := heapInUse()
	if f := os.Getenv("SYNC_HEAP_PROFILE"); f != "" {
		fh, _ := os.Create(f)
		_ = pprof.WriteHeapProfile(fh)
		fh.Close()
	}
	runtime.KeepAlive(cs)
	added := float64(after-before) / (1 << 20)
	t.Logf("informer caches and watcher state for %d pods, %d namespaces, %d policies: %.1f MiB of heap (%.0f B per pod-equivalent)",
		pods, namespaces, policies, added, float64(after-before)/float64(pods+namespaces+policies))
	t.Logf("with the emitted endpoints and policies kept, as the graph keeps them: %.1f MiB", float64(withEmitted-before)/(1<<20))
	if added > 50 {
		t.Errorf("heap grew by %.1f MiB, budget 50 MiB", added)
	}
	cancel()
	<-done
}

// protobufLists makes the fake answer lists as the API server does: encoded and decoded again
// (protobuf, as NewClient asks for), rather than deep copies of its objects, which share
// their strings with them.
func protobufLists(cs *fake.Clientset) {
	type protoList interface {
		k8sruntime.Object
		Marshal() ([]byte, error)
		Unmarshal([]byte) error
	}
	tracker := k8stesting.ObjectReaction(cs.Tracker())
	cs.PrependReactor("list", "*", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		handled, obj, err := tracker(a)
		if err != nil || !handled {
			return handled, obj, err
		}
		list, ok := obj.(protoList)
		if !ok {
			return true, nil, fmt.Errorf("list of %T: no protobuf", obj)
		}
		b, err := list.Marshal()
		if err != nil {
			return true, nil, fmt.Errorf("encoding a %T: %w", obj, err)
		}
		decoded := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(protoList)
		if err := decoded.Unmarshal(b); err != nil {
			return true, nil, fmt.Errorf("decoding a %T: %w", obj, err)
		}
		return true, decoded, nil
	})
}

func heapInUse() uint64 {
	var ms runtime.MemStats
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
