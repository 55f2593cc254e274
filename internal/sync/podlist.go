package sync

import (
	"bytes"
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The pod informer's list, decoded pod by pod. client-go's typed list decodes a PodList: one
// array of full Pod values grown item by item, all alive until the informer has transformed
// them. At 100,000 pods that was ≈ 2 s of copying and most of the agent's peak memory
// (BenchmarkColdStartAPI). Here the protobuf response is walked item by item, each pod decoded
// by its generated code and turned into what the cache keeps of it (Transform's podRecord) at
// once, into a list of pointers. It matters
// when the API server answers the initial list in one response — the watch cache ignores
// `limit` at resourceVersion 0, and client-go's streaming list (WatchListClient), which would
// replace it, needs an etcd with progress notifications.

// podListWatch is the pod informer's source; it keeps client-go's streaming list (WatchListClient)
// where the client supports it, as the factory's informers do.
func podListWatch(client kubernetes.Interface) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return listPods(ctx, client, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, client)
}

// protobufMagic starts every protobuf-encoded Kubernetes object (runtime.Unknown follows).
var protobufMagic = []byte("k8s\x00")

// listPods lists the pods of all namespaces; a client without a REST client (a fake) or an
// answer that is not protobuf takes the typed path.
func listPods(ctx context.Context, client kubernetes.Interface, o metav1.ListOptions) (runtime.Object, error) {
	rc, ok := client.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	}
	raw, err := rc.Get().Resource("pods").VersionedParams(&o, scheme.ParameterCodec).
		SetHeader("Accept", runtime.ContentTypeProtobuf).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(raw, protobufMagic) {
		return client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
	}
	return decodePodList(raw[len(protobufMagic):])
}

// decodePodList decodes a protobuf runtime.Unknown holding a v1.PodList into a list of pod
// records (Transform).
func decodePodList(b []byte) (*metainternalversion.List, error) {
	var u runtime.Unknown
	if err := u.Unmarshal(b); err != nil {
		return nil, fmt.Errorf("decoding the pod list envelope: %w", err)
	}
	if u.Kind != "" && u.Kind != "PodList" {
		return nil, fmt.Errorf("decoding the pod list: got a %s", u.Kind)
	}
	list := &metainternalversion.List{}
	for b := u.Raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("decoding the pod list: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2) {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil, fmt.Errorf("decoding the pod list: %w", protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("decoding the pod list: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num == 1 { // metadata
			if err := list.ListMeta.Unmarshal(v); err != nil {
				return nil, fmt.Errorf("decoding the pod list's metadata: %w", err)
			}
			continue
		}
		p := &corev1.Pod{} // items
		if err := p.Unmarshal(v); err != nil {
			return nil, fmt.Errorf("decoding pod %d of the list: %w", len(list.Items), err)
		}
		list.Items = append(list.Items, recordPod(p))
	}
	return list, nil
}
