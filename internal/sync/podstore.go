package sync

import (
	"errors"
	"fmt"
	"strings"
	gosync "sync"

	"k8s.io/client-go/tools/cache"
)

// podStore is the pod informer's itemStore. Of a pod it keeps only what the Watcher reads of the
// record cached with its previous version (podChanged, deletePod): its id (key and version) and
// its outcome (the endpoint's fingerprint, or whether it is no endpoint or invalid), held in the
// map's entry itself, under a key that is a view of the id. A record, 48 bytes of its own plus
// an entry of client-go's store (a key and an interface), costs ≈ 40 bytes more a pod, and one
// more object for the collector to mark. Get and GetByKey answer a record made anew from the
// entry (its pending endpoint and its problem are not kept: the handlers read those of the new
// record only), so the store tells the record it holds by its id and outcome (sameRecord), not
// by its pointer.
type podStore struct {
	mu      gosync.Mutex
	entries map[string]podEntry
}

// podEntry is what podStore keeps of a record.
type podEntry struct {
	id      string // the record's id: its key ("namespace/name") and then its version
	outcome uint64 // outcomeOf the record
}

// invalidPod is the outcome of a record of a pod that cannot be converted: even, so no endpoint's
// fingerprint (whose lowest bit is set), and not 0, a pod that is no endpoint.
const invalidPod = 2

// errHeldInvalid is the problem of a record podStore answers for an invalid pod: the store keeps
// that the pod was invalid, not why.
var errHeldInvalid = errors.New("invalid pod (the pod store keeps no reason)")

// outcomeOf is r's endpoint fingerprint when r is an endpoint, else invalidPod when r cannot be
// converted, else 0.
func outcomeOf(r *podRecord) uint64 {
	if r.fingerprint == 0 && r.problem != nil {
		return invalidPod
	}
	return r.fingerprint
}

func newPodStore() *podStore { return &podStore{entries: map[string]podEntry{}} }

var _ recordStore = (*podStore)(nil)

// podStoreKey is obj's key: a record's own (a view of its id), else client-go's.
func podStoreKey(obj any) (string, error) {
	if r, ok := obj.(*podRecord); ok {
		return r.key(), nil
	}
	return cache.MetaNamespaceKeyFunc(obj)
}

// record is the record e stands for, under key.
func (e podEntry) record(key string) *podRecord {
	// a pod's key is "namespace/name", and a namespace holds no "/"
	ns := max(strings.IndexByte(key, '/'), 0)
	r := &podRecord{recordMeta: recordMeta{id: e.id, nsLen: uint32(ns), keyLen: uint32(len(key))}}
	if e.outcome == invalidPod {
		problem := errHeldInvalid // the record's own: no one can write through it to the sentinel
		r.problem = &problem
	} else {
		r.fingerprint = e.outcome
	}
	return r
}

func (s *podStore) Get(obj any) (any, bool, error) {
	key, err := podStoreKey(obj)
	if err != nil {
		return nil, false, err
	}
	return s.GetByKey(key)
}

func (s *podStore) GetByKey(key string) (any, bool, error) {
	s.mu.Lock()
	e, ok := s.entries[key]
	s.mu.Unlock()
	if !ok {
		return nil, false, nil
	}
	return e.record(key), true, nil
}

// Add holds obj, a *podRecord, replacing what is held under its key.
func (s *podStore) Add(obj any) error {
	r, ok := obj.(*podRecord)
	if !ok {
		return fmt.Errorf("pod store: %T is no pod record", obj)
	}
	s.mu.Lock()
	s.entries[r.key()] = podEntry{id: r.id, outcome: outcomeOf(r)}
	s.mu.Unlock()
	return nil
}

func (s *podStore) Delete(obj any) error {
	key, err := podStoreKey(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.entries, key)
	s.mu.Unlock()
	return nil
}

func (s *podStore) ListKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.entries))
	for k := range s.entries {
		keys = append(keys, k)
	}
	return keys
}

// sameRecord reports whether obj is the record held (as Get answered it): the same id and
// outcome. An API server gives one version of a pod one resourceVersion, converted to one
// record: the record delivered early, or the same version listed again. handlerStore.upsert does
// not deliver it again. (A fake clientset may change a pod without changing its version: the
// outcome tells those apart.)
func (*podStore) sameRecord(held, obj any) bool {
	h, ok := held.(*podRecord)
	r, isRecord := obj.(*podRecord)
	return ok && isRecord && h.id == r.id && outcomeOf(h) == outcomeOf(r)
}
