package sync

import "github.com/nftpolicy/nftpolicy/internal/model"

// CachedPodRecord is what the pod informer caches of a pod, as tests see it.
type CachedPodRecord struct {
	Endpoint   model.Endpoint
	IsEndpoint bool
	Err        error  // the conversion error
	Key        string // namespace/name@resourceVersion
}

// CachedPod reports what the pod informer caches of obj (a Transform result), or ok=false when
// obj is no pod record.
func CachedPod(obj any) (rec CachedPodRecord, ok bool) {
	r, ok := obj.(*podRecord)
	if !ok {
		return CachedPodRecord{}, false
	}
	m := r.GetObjectMeta()
	return CachedPodRecord{Endpoint: r.endpoint, IsEndpoint: r.isEndpoint, Err: r.err,
		Key: m.GetNamespace() + "/" + m.GetName() + "@" + m.GetResourceVersion()}, true
}
