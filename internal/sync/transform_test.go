package sync_test

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestTransformKeepsMeaning: the cached (transformed) objects convert exactly like the full
// ones — pods and policies are cached as their conversion — the transform is idempotent
// (client-go may apply it to an object twice), and what it drops is really gone.
func TestTransformKeepsMeaning(t *testing.T) {
	w := sync.New(sync.Config{})
	sidecar := realisticPod(7)
	sidecar.Spec.InitContainers = []corev1.Container{
		{Name: "init", Ports: []corev1.ContainerPort{{Name: "setup", ContainerPort: 1}}},
		{Name: "proxy", RestartPolicy: new(corev1.ContainerRestartPolicyAlways), Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 15000}}},
	}
	hostNet := realisticPod(8)
	hostNet.Spec.HostNetwork = true
	done := realisticPod(9)
	done.Status.Phase = corev1.PodSucceeded
	for _, p := range []*corev1.Pod{realisticPod(1), sidecar, hostNet, done} {
		full, fullOK, fullErr := sync.ConvertPod(p)
		once, err := w.Transform(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		twice, _ := w.Transform(once)
		if !reflect.DeepEqual(once, twice) {
			t.Errorf("%s: transform is not idempotent", p.Name)
		}
		rec, isRecord := sync.CachedPod(once)
		if !isRecord {
			t.Fatalf("%s: a pod is cached as %T", p.Name, once)
		}
		if rec.IsEndpoint != fullOK || (rec.Err == nil) != (fullErr == nil) {
			t.Errorf("%s: cached as endpoint=%v err=%v, the full pod converts to %v %v", p.Name, rec.IsEndpoint, rec.Err, fullOK, fullErr)
		}
		// until the event handler takes it, the record holds the full pod's endpoint, and its
		// fingerprint for later versions to compare with
		switch {
		case !fullOK && rec.Pending != nil:
			t.Errorf("%s: no endpoint, but %+v is cached", p.Name, *rec.Pending)
		case fullOK && (rec.Pending == nil || !reflect.DeepEqual(*rec.Pending, full)):
			t.Errorf("%s: cached endpoint %+v, the full pod converts to %+v", p.Name, rec.Pending, full)
		case fullOK && rec.Fingerprint != sync.Fingerprint(full):
			t.Errorf("%s: cached fingerprint %x, the full pod's endpoint has %x", p.Name, rec.Fingerprint, sync.Fingerprint(full))
		}
		if want := p.Namespace + "/" + p.Name + "@" + p.ResourceVersion; rec.Key != want {
			t.Errorf("%s: cached under %q, want %q", p.Name, rec.Key, want)
		}
		c, _ := sync.CachedPod(once.(runtime.Object).DeepCopyObject())
		if !reflect.DeepEqual(c, rec) {
			t.Errorf("%s: the deep copy of a cached pod differs: %+v, want %+v", p.Name, c, rec)
		}
		if fullOK && &c.Pending.Addrs[0] == &rec.Pending.Addrs[0] {
			t.Errorf("%s: the deep copy of a cached pod shares its endpoint", p.Name)
		}
	}
	bad := realisticPolicy(4)
	bad.Spec.Ingress[0].From[2].IPBlock.CIDR = "192.168.0.0/33"
	for _, np := range []*networkingv1.NetworkPolicy{realisticPolicy(3), bad} {
		full, fullErr := sync.ConvertNetworkPolicy(np)
		once, err := w.Transform(np.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		if twice, _ := w.Transform(once); twice != once {
			t.Errorf("%s: transform is not idempotent", np.Name)
		}
		rec, isRecord := sync.CachedPolicy(once)
		if !isRecord {
			t.Fatalf("%s: a policy is cached as %T", np.Name, once)
		}
		switch {
		case (rec.Err == nil) != (fullErr == nil):
			t.Errorf("%s: cached with err=%v, the full policy converts with %v", np.Name, rec.Err, fullErr)
		case fullErr != nil && rec.Pending != nil:
			t.Errorf("%s: invalid, but %+v is cached", np.Name, *rec.Pending)
		case fullErr == nil && (rec.Pending == nil || !reflect.DeepEqual(*rec.Pending, full)):
			t.Errorf("%s: cached policy %+v, the full policy converts to %+v", np.Name, rec.Pending, full)
		case fullErr == nil && rec.Fingerprint != sync.PolicyFingerprint(full):
			t.Errorf("%s: cached fingerprint %x, the full policy's is %x", np.Name, rec.Fingerprint, sync.PolicyFingerprint(full))
		}
		if want := np.Namespace + "/" + np.Name + "@" + np.ResourceVersion; rec.Key != want {
			t.Errorf("%s: cached under %q, want %q", np.Name, rec.Key, want)
		}
		c, _ := sync.CachedPolicy(once.(runtime.Object).DeepCopyObject())
		if !reflect.DeepEqual(c, rec) {
			t.Errorf("%s: the deep copy of a cached policy differs: %+v, want %+v", np.Name, c, rec)
		}
	}
	other := &corev1.ConfigMap{}
	if o, _ := w.Transform(other); o != other {
		t.Error("other objects must pass through unchanged")
	}
}

// TestTransformInterns: the strings that repeat across pods (namespace, node, service account,
// port names) are one copy in every record and endpoint, however many copies the decoder made;
// the pod's name, its own, is the record's copy (the decoder's may be a view of its buffer).
func TestTransformInterns(t *testing.T) {
	w := sync.New(sync.Config{})
	// decoded gives the pod's strings allocations of their own, as the protobuf decoder does
	decoded := func(i int) *corev1.Pod {
		p := realisticPod(i)
		p.Namespace = strings.Clone(p.Namespace)
		p.Spec.NodeName = strings.Clone(p.Spec.NodeName)
		p.Spec.ServiceAccountName = strings.Clone(p.Spec.ServiceAccountName)
		for c := range p.Spec.Containers {
			for j := range p.Spec.Containers[c].Ports {
				p.Spec.Containers[c].Ports[j].Name = strings.Clone(p.Spec.Containers[c].Ports[j].Name)
			}
		}
		return p
	}
	endpoint := func(p *corev1.Pod) model.Endpoint {
		t.Helper()
		obj, err := w.Transform(p)
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := sync.CachedPod(obj)
		if rec.Pending == nil {
			t.Fatalf("%s: no endpoint cached", p.Name)
		}
		// the endpoint's name is the record's own: a view of its string, not another copy
		id, name := unsafe.StringData(rec.ID), unsafe.StringData(rec.Pending.Key.Name)
		if off := uintptr(unsafe.Pointer(name)) - uintptr(unsafe.Pointer(id)); off > uintptr(len(rec.ID)-len(rec.Pending.Key.Name)) {
			t.Errorf("%s: the endpoint's name %q is not a view of the record's %q", p.Name, rec.Pending.Key.Name, rec.ID)
		}
		return *rec.Pending
	}
	pa := decoded(1)
	a, b := endpoint(pa), endpoint(decoded(501)) // same namespace and node
	for _, c := range []struct {
		field  string
		sa, sb string
		shared bool
	}{
		{"namespace", a.Key.Namespace, b.Key.Namespace, true},
		{"node", a.Node, b.Node, true},
		{"service account", a.ServiceAccount, b.ServiceAccount, true},
		{"port name", a.NamedPorts[0].Name, b.NamedPorts[0].Name, true},
		{"port names of one pod", a.NamedPorts[0].Name, a.NamedPorts[1].Name, true},
		{"name, not as decoded", a.Key.Name, pa.Name, false},
		{"namespace, not as decoded", a.Key.Namespace, pa.Namespace, false},
	} {
		if c.sa == "" || c.sb == "" {
			t.Fatalf("%s: empty (%q, %q)", c.field, c.sa, c.sb)
		}
		if same := unsafe.StringData(c.sa) == unsafe.StringData(c.sb); same != c.shared {
			t.Errorf("%s: %q and %q share their bytes: %v, want %v", c.field, c.sa, c.sb, same, c.shared)
		}
	}
	np := realisticPolicy(1)
	np.Namespace = strings.Clone(np.Namespace)
	obj, _ := w.Transform(np)
	if rec, _ := sync.CachedPolicy(obj); rec.Pending == nil ||
		unsafe.StringData(rec.Pending.Namespace) != unsafe.StringData(a.Key.Namespace) ||
		unsafe.StringData(rec.Pending.Key.Namespace) != unsafe.StringData(a.Key.Namespace) {
		t.Errorf("a policy's namespace is not the one of its namespace's pods: %+v", rec)
	}
}
