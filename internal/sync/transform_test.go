package sync_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestTransformKeepsMeaning: the cached (transformed) objects convert exactly like the full
// ones — a pod is cached as its conversion — the transform is idempotent (client-go may apply it
// to an object twice), and what it drops is really gone.
func TestTransformKeepsMeaning(t *testing.T) {
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
		once, err := sync.Transform(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		twice, _ := sync.Transform(once)
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
		if fullOK && c.Pending == rec.Pending {
			t.Errorf("%s: the deep copy of a cached pod shares its endpoint", p.Name)
		}
	}
	np := realisticPolicy(3)
	full, err := sync.ConvertNetworkPolicy(np)
	if err != nil {
		t.Fatal(err)
	}
	slim, _ := sync.Transform(np.DeepCopy())
	got, err := sync.ConvertNetworkPolicy(slim.(*networkingv1.NetworkPolicy))
	if err != nil || !reflect.DeepEqual(got, full) {
		t.Errorf("slim policy converts to %+v (%v), full to %+v", got, err, full)
	}
	if m := slim.(*networkingv1.NetworkPolicy).ObjectMeta; len(m.ManagedFields) != 0 || len(m.Annotations) != 0 {
		t.Errorf("policy metadata not slimmed: %+v", m)
	}
	other := &corev1.ConfigMap{}
	if o, _ := sync.Transform(other); o != other {
		t.Error("other objects must pass through unchanged")
	}
}
