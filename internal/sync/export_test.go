package sync

import "github.com/nftpolicy/nftpolicy/internal/model"

// CachedPodRecord is what the pod informer caches of a pod, as tests see it.
type CachedPodRecord struct {
	// Pending is the endpoint until the event handler has taken it (nil after, or when the pod
	// is no endpoint); reading it here does not take it.
	Pending     *model.Endpoint
	Fingerprint uint64 // of the endpoint, when IsEndpoint
	IsEndpoint  bool
	Err         error  // the conversion error
	Key         string // namespace/name@resourceVersion
}

// CachedPod reports what the pod informer caches of obj (a Transform result), or ok=false when
// obj is no pod record.
func CachedPod(obj any) (rec CachedPodRecord, ok bool) {
	r, ok := obj.(*podRecord)
	if !ok {
		return CachedPodRecord{}, false
	}
	m := r.GetObjectMeta()
	return CachedPodRecord{Pending: r.pending.Load(), Fingerprint: r.fingerprint, IsEndpoint: r.isEndpoint, Err: r.err,
		Key: m.GetNamespace() + "/" + m.GetName() + "@" + m.GetResourceVersion()}, true
}

// Fingerprint is the fingerprint a pod record keeps of ep.
func Fingerprint(ep model.Endpoint) uint64 { return fingerprint(&ep) }
