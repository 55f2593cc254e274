package sync

import "github.com/nftpolicy/nftpolicy/internal/model"

// CachedPod reports what the pod informer caches of obj (a Transform result): the endpoint, whether
// the pod is one, the conversion error and the key, or ok=false when obj is no pod record.
func CachedPod(obj any) (ep model.Endpoint, isEndpoint bool, convErr error, key string, ok bool) {
	r, ok := obj.(*podRecord)
	if !ok {
		return model.Endpoint{}, false, nil, "", false
	}
	m := r.GetObjectMeta()
	return r.endpoint, r.isEndpoint, r.err, m.GetNamespace() + "/" + m.GetName() + "@" + m.GetResourceVersion(), true
}
