package sync

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// podRecord is what the pod informer caches of a pod (Transform): its conversion, made once when
// the pod version arrives, and the name and version the cache keys it by. A slimmed corev1.Pod
// was ≈ 1.7 KB (174 MB of the agent's heap at 100,000 pods), and every event converted both
// the old and the new version again.
type podRecord struct {
	namespace, name, resourceVersion string
	endpoint                         model.Endpoint // when isEndpoint
	isEndpoint                       bool
	err                              error // why the pod cannot be converted (it is skipped)
}

func recordPod(p *corev1.Pod) *podRecord {
	ep, ok, err := ConvertPod(p)
	return &podRecord{namespace: p.Namespace, name: p.Name, resourceVersion: p.ResourceVersion,
		endpoint: ep, isEndpoint: ok, err: err}
}

// GetObjectKind makes a podRecord a runtime.Object (the informer's store holds those).
func (r *podRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record; its endpoint's addresses and ports are new slices (labels
// are immutable).
func (r *podRecord) DeepCopyObject() runtime.Object {
	c := *r
	c.endpoint.Addrs = slices.Clone(r.endpoint.Addrs)
	c.endpoint.NamedPorts = slices.Clone(r.endpoint.NamedPorts)
	return &c
}

// GetObjectMeta gives the cache's key function (meta.Accessor) the namespace, name and version.
func (r *podRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: r.namespace, Name: r.name, ResourceVersion: r.resourceVersion}
}
