package sync

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// ClientsetClient is a Client that lists and watches through a client-go clientset: the fakes
// of the unit tests. Lists are typed (the Watcher's transform makes the records).
func ClientsetClient(cs kubernetes.Interface) Client { return clientsetClient{cs} }

type clientsetClient struct{ cs kubernetes.Interface }

func (c clientsetClient) listerWatcher(resource string, _ func(*corev1.Pod) *podRecord) cache.ListerWatcher {
	var lw *cache.ListWatch
	switch resource {
	case "namespaces":
		i := c.cs.CoreV1().Namespaces()
		lw = typedListWatch(i.List, i.Watch)
	case "pods":
		i := c.cs.CoreV1().Pods(metav1.NamespaceAll)
		lw = typedListWatch(i.List, i.Watch)
	case "networkpolicies":
		i := c.cs.NetworkingV1().NetworkPolicies(metav1.NamespaceAll)
		lw = typedListWatch(i.List, i.Watch)
	case "nodes":
		i := c.cs.CoreV1().Nodes()
		lw = typedListWatch(i.List, i.Watch)
	case "serviceaccounts":
		i := c.cs.CoreV1().ServiceAccounts(metav1.NamespaceAll)
		lw = typedListWatch(i.List, i.Watch)
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c.cs)
}

// clusterPolicies: not served, as without the CRD.
func (c clientsetClient) clusterPolicies(string) cache.ListerWatcher {
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: "policy.networking.k8s.io", Resource: "clusternetworkpolicies"}, "")
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, notFound },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, notFound },
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c.cs)
}

// calico: not served, as without Calico's API.
func (c clientsetClient) calico(resource string) cache.ListerWatcher {
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: CalicoGroupVersion.Group, Resource: resource}, "")
	lw := &cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, notFound },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, notFound },
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, c.cs)
}

// typedListWatch is a typed client's List and Watch as a ListWatch.
func typedListWatch[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error),
	watch func(context.Context, metav1.ListOptions) (watch.Interface, error)) *cache.ListWatch {
	return &cache.ListWatch{WatchFuncWithContext: watch,
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return list(ctx, o) }}
}

// Transform is the informers' transform, for tests.
func (w *Watcher) Transform(obj any) (any, error) { return w.transform(obj) }

// CachedPodRecord is what the pod informer caches of a pod, as tests see it.
type CachedPodRecord struct {
	// Pending is the endpoint until the event handler has taken it (nil after, or when the pod
	// is no endpoint); reading it here does not take it.
	Pending     *model.Endpoint
	Fingerprint uint64 // of the endpoint, when IsEndpoint
	IsEndpoint  bool
	Err         error  // the conversion error
	Key         string // namespace/name@resourceVersion
	ID          string // the record's own string: namespace/name, then the resourceVersion
}

// CachedPod reports what the pod informer caches of obj (a Transform result), or ok=false when
// obj is no pod record.
func CachedPod(obj any) (rec CachedPodRecord, ok bool) {
	r, ok := obj.(*podRecord)
	if !ok {
		return CachedPodRecord{}, false
	}
	return CachedPodRecord{Pending: r.pendingEndpoint(), Fingerprint: r.fingerprint, IsEndpoint: r.isEndpoint(), Err: r.err(),
		Key: cacheKey(r), ID: r.id}, true
}

// CachedPolicyRecord is what the policy informer caches of a NetworkPolicy, as tests see it.
type CachedPolicyRecord struct {
	Pending     *model.Policy // until the event handler has taken it; nil when invalid
	Fingerprint uint64        // of the policy, when Err is nil
	Err         error         // the conversion error
	Key         string        // namespace/name@resourceVersion
}

// CachedPolicy reports what the policy informer caches of obj (a Transform result), or ok=false
// when obj is no policy record.
func CachedPolicy(obj any) (rec CachedPolicyRecord, ok bool) {
	r, ok := obj.(*policyRecord)
	if !ok {
		return CachedPolicyRecord{}, false
	}
	return CachedPolicyRecord{Pending: r.pending.Load(), Fingerprint: r.fingerprint, Err: r.err,
		Key: cacheKey(r)}, true
}

// cacheKey is a record's key and version as the caches see them: key@resourceVersion.
func cacheKey(obj runtime.Object) string {
	key, _ := cache.MetaNamespaceKeyFunc(obj)
	m, _ := meta.Accessor(obj)
	return key + "@" + m.GetResourceVersion()
}

// Fingerprint is the fingerprint a pod record keeps of ep.
func Fingerprint(ep model.Endpoint) uint64 { return fingerprint(&ep) }

// PolicyFingerprint is the fingerprint a policy record keeps of p.
func PolicyFingerprint(p model.Policy) uint64 { return policyFingerprint(&p) }

// YAMLSubsetReads reports whether LoadDir reads doc through its YAML subset rather than yaml.v2.
func YAMLSubsetReads(doc string) bool {
	var y yamlSubset
	_, ok := y.translate([]byte(doc))
	return ok
}
