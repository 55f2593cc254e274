package sync

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Client is the API server as the Watcher reads it: the lists and watches of every namespace,
// pod and NetworkPolicy. NewClient makes one from a rest.Config.
//
// It is a REST client of a scheme holding only those types (and metav1's options, statuses and
// watch events), not client-go's clientset: the clientset's packages register all of
// Kubernetes' API groups (55) when the process starts, for types the agent never reads. A
// program importing the clientset and informers holds 13.6 MiB of its binary resident after
// start-up and 1.2 MiB of heap; the same with the REST client, core/v1 and networking/v1, 6.9
// and 0.4 MiB. The agent's binary went from 43.2 to 27.6 MB.
type Client interface {
	// listerWatcher is the source of a resource's informer: resource is "namespaces", "pods"
	// or "networkpolicies", of every namespace; record makes the record of each listed pod
	// (Watcher.recordPod).
	listerWatcher(resource string, record func(*corev1.Pod) *podRecord) cache.ListerWatcher
}

// scheme holds the types the Watcher and LoadDir decode, with metav1's for each group version.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	return s
}

// NewClient returns the agent's client of the API server rc describes: protobuf on the wire, as
// Kubernetes' own node agents use for the core and networking types (smaller responses and a
// cheaper decode than JSON for the initial list of every pod), JSON accepted for the rest.
func NewClient(rc *rest.Config) (Client, error) {
	s := newScheme()
	c := rest.CopyConfig(rc)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	r, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("sync: the API client: %w", err)
	}
	return &restClient{rest: r, params: runtime.NewParameterCodec(s)}, nil
}

// restClient lists and watches by path; every request names its own group and version.
type restClient struct {
	rest   *rest.RESTClient
	params runtime.ParameterCodec
}

// collection is the path of a resource's collection of every namespace and its list type.
func collection(resource string) (path string, newList func() runtime.Object) {
	switch resource {
	case "namespaces":
		return "/api/v1/namespaces", func() runtime.Object { return &corev1.NamespaceList{} }
	case "pods":
		return podsPath, func() runtime.Object { return &corev1.PodList{} }
	case "networkpolicies":
		return "/apis/networking.k8s.io/v1/networkpolicies", func() runtime.Object { return &networkingv1.NetworkPolicyList{} }
	}
	panic("sync: no collection " + resource) // the Watcher names only the three above
}

const podsPath = "/api/v1/pods"

func (c *restClient) listerWatcher(resource string, record func(*corev1.Pod) *podRecord) cache.ListerWatcher {
	path, newList := collection(resource)
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		out := newList()
		err := c.get(path, &o).Do(ctx).Into(out)
		return out, err
	}
	if resource == "pods" {
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.listPods(ctx, o, record)
		}
	}
	// the client keeps client-go's streaming list (WatchListClient) where the API server
	// supports it, as the clientset's informers do
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: list,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			var timeout time.Duration
			if o.TimeoutSeconds != nil {
				timeout = time.Duration(*o.TimeoutSeconds) * time.Second
			}
			o.Watch = true
			return c.get(path, &o).Timeout(timeout).Watch(ctx)
		},
	}, c)
}

// get is a GET of path with the list options o.
func (c *restClient) get(path string, o *metav1.ListOptions) *rest.Request {
	return c.rest.Get().AbsPath(path).VersionedParams(o, c.params)
}
