package sync

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
	base := rest.CopyConfig(rc)
	base.ContentType = runtime.ContentTypeProtobuf
	base.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	base.NegotiatedSerializer = serializer.NewCodecFactory(newScheme()).WithoutConversion()
	if base.UserAgent == "" {
		base.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	hc, err := rest.HTTPClientFor(base)
	if err != nil {
		return nil, fmt.Errorf("sync: the API client: %w", err)
	}
	clientFor := func(apiPath string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := *base
		c.APIPath, c.GroupVersion = apiPath, &gv
		r, err := rest.RESTClientForConfigAndClient(&c, hc)
		if err != nil {
			return nil, fmt.Errorf("sync: the API client of %s: %w", gv, err)
		}
		return r, nil
	}
	var c restClient
	if c.core, err = clientFor("/api", corev1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	if c.networking, err = clientFor("/apis", networkingv1.SchemeGroupVersion); err != nil {
		return nil, err
	}
	return &c, nil
}

// restClient lists and watches through one REST client per group, sharing their connections.
type restClient struct {
	core, networking *rest.RESTClient
}

func (c *restClient) listerWatcher(resource string, record func(*corev1.Pod) *podRecord) cache.ListerWatcher {
	client := c.core
	if resource == "networkpolicies" {
		client = c.networking
	}
	lw := cache.NewListWatchFromClient(client, resource, metav1.NamespaceAll, fields.Everything())
	if resource == "pods" { // listed by podlist.go, watched as client-go does
		lw = &cache.ListWatch{WatchFuncWithContext: lw.WatchFuncWithContext,
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.listPods(ctx, o, record)
			}}
	}
	// the client keeps client-go's streaming list (WatchListClient) where the API server
	// supports it, as the clientset's informers do
	return cache.ToListWatcherWithWatchListSemantics(lw, c)
}
