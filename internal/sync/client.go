package sync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

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
	npav1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npav1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Client is the API server as the Watcher reads it: the lists and watches of every namespace,
// pod, NetworkPolicy and ClusterNetworkPolicy, and of Nodes. NewClient makes one from a
// rest.Config.
//
// It is a REST client of a scheme holding only those types (and metav1's options, statuses and
// watch events), not client-go's clientset: the clientset's packages register all of
// Kubernetes' API groups (55) when the process starts, for types the agent never reads: their
// code and registrations make the binary larger and keep more of it resident, and their
// schemes take heap, all for nothing.
type Client interface {
	// listerWatcher is the source of a resource's informer: resource is "namespaces", "pods",
	// "networkpolicies" or "nodes", of every namespace; record makes the record of each listed
	// pod (Watcher.recordPod).
	listerWatcher(resource string, record func(*corev1.Pod) *podRecord) cache.ListerWatcher
	// clusterPolicies is the source of the ClusterNetworkPolicies of an API version (cnpV1beta1
	// or cnpV1alpha2). A list of a version the API server does not serve (no CRD, or one
	// without that version) fails with a NotFound status.
	clusterPolicies(version string) cache.ListerWatcher
	// calico is the source of a resource of Calico's API, projectcalico.org/v3 ("tiers",
	// "globalnetworkpolicies", "networkpolicies", "globalnetworksets", "networksets"; every
	// namespace). A list fails with a NotFound status while the API server does not serve it.
	calico(resource string) cache.ListerWatcher
}

// scheme holds the types the Watcher and LoadDir decode, with metav1's for each group version.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(networkingv1.AddToScheme(s))
	utilruntime.Must(npav1alpha2.Install(s))
	utilruntime.Must(npav1beta1.Install(s))
	addCalicoTypes(s)
	return s
}

// NewClient returns the agent's client of the API server rc describes: protobuf on the wire, as
// Kubernetes' own node agents use for the core and networking types (smaller responses and a
// cheaper decode than JSON for the initial list of every pod), JSON accepted for the rest. Unless
// rc has a dialer of its own, connections are dialled by APIDialer.
func NewClient(rc *rest.Config) (Client, error) {
	base := rest.CopyConfig(rc)
	if base.Dial == nil {
		base.Dial = APIDialer().DialContext
	}
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
	// custom resources are served as JSON only
	jsonClientFor := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		json := *base
		json.ContentType, json.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
		json.APIPath, json.GroupVersion = "/apis", &gv
		r, err := rest.RESTClientForConfigAndClient(&json, hc)
		if err != nil {
			return nil, fmt.Errorf("sync: the API client of %s: %w", gv, err)
		}
		return r, nil
	}
	c.policy = map[string]*rest.RESTClient{}
	for _, gv := range []schema.GroupVersion{schema.GroupVersion(npav1beta1.GroupVersion), schema.GroupVersion(npav1alpha2.GroupVersion)} {
		if c.policy[gv.Version], err = jsonClientFor(gv); err != nil {
			return nil, err
		}
	}
	if c.calicoAPI, err = jsonClientFor(CalicoGroupVersion); err != nil {
		return nil, err
	}
	return &c, nil
}

// TCP settings of the connections to the API server (APIDialer).
const (
	apiDialTimeout       = 5 * time.Second
	apiKeepAliveIdle     = 5 * time.Second
	apiKeepAliveInterval = 2 * time.Second
	apiKeepAliveCount    = 3
	// apiUserTimeout: how long sent data may stay unacknowledged, the same bound as the probes'
	apiUserTimeout = apiKeepAliveIdle + apiKeepAliveCount*apiKeepAliveInterval
)

// APIDialer is how the agent connects to the API server: TCP keepalive probes after 5 s without
// traffic, every 2 s, and the connection closed when 3 go unanswered or sent data has waited 11 s
// for an acknowledgement (TCP_USER_TIMEOUT); a connect gives up after 5 s. Every watch shares
// one HTTP/2 connection, which an API server that went away without a word (its node down or
// cut off; a killed process's node answers with a reset at once) would otherwise leave open:
// client-go's dialer probes after 30 s, and its HTTP/2 health check pings after 30 s without a
// frame and gives up 15 s later. With these, a dead connection is closed within 11 s, and one
// whose far end came back without its state (a restarted node) is reset by the next probe,
// within 5 s of its return; the watches then reopen on a new connection (informer.go). A probe
// is a segment without data, answered by the peer's kernel.
func APIDialer() *net.Dialer {
	return &net.Dialer{
		Timeout: apiDialTimeout,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: apiKeepAliveIdle, Interval: apiKeepAliveInterval,
			Count: apiKeepAliveCount},
		Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(apiUserTimeout.Milliseconds()))
			})
			if err = errors.Join(err, serr); err != nil {
				return fmt.Errorf("sync: setting TCP_USER_TIMEOUT: %w", err)
			}
			return nil
		},
	}
}

// restClient lists and watches through one REST client per group version, sharing their
// connections.
type restClient struct {
	core, networking *rest.RESTClient
	policy           map[string]*rest.RESTClient // by version; read-only after NewClient
	calicoAPI        *rest.RESTClient            // projectcalico.org/v3
}

func (c *restClient) listerWatcher(resource string, record func(*corev1.Pod) *podRecord) cache.ListerWatcher {
	client := c.core
	if resource == "networkpolicies" {
		client = c.networking
	}
	lw := cache.NewListWatchFromClient(client, resource, metav1.NamespaceAll, fields.Everything())
	if resource == "nodes" { // plain lists: a small resource
		return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{})
	}
	if resource == "pods" {
		// listed by podlist.go, watched as client-go does. A plain list: a streaming list's
		// events are decoded whole by client-go's generated decoder, where podlist.go reads
		// only the fields a record uses; at 100,000 pods streaming doubled the agent's CPU
		// until its first commit and the API server's, and made the cold start 1.1 s slower
		// (BENCHMARKS.md)
		lw = &cache.ListWatch{WatchFuncWithContext: lw.WatchFuncWithContext,
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.listPods(ctx, o, record)
			}}
		return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{})
	}
	// the client keeps client-go's streaming list (WatchListClient) where the API server
	// supports it, as the clientset's informers do
	return cache.ToListWatcherWithWatchListSemantics(lw, c)
}

func (c *restClient) clusterPolicies(version string) cache.ListerWatcher {
	lw := cache.NewListWatchFromClient(c.policy[version], "clusternetworkpolicies", metav1.NamespaceAll, fields.Everything())
	// plain lists: a small resource, and a list is how the Watcher finds which version the API
	// server serves
	return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{})
}

func (c *restClient) calico(resource string) cache.ListerWatcher {
	lw := cache.NewListWatchFromClient(c.calicoAPI, resource, metav1.NamespaceAll, fields.Everything())
	// plain lists: small resources, and a list is how the Watcher finds whether they are served
	return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{})
}

// noWatchList is a client that does not stream lists (client-go's WatchListClient).
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
