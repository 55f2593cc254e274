package sync

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// podRecord is what the pod informer caches of a pod (transform): the outcome of its conversion,
// made once when the pod version arrives, and the name and version the cache keys it by: 48 B
// plus its id, where a slimmed corev1.Pod would be ≈ 1.7 KB and every event would convert both
// the old and the new version again. It does not keep the endpoint past its event: the graph
// keeps every endpoint emitted, and the Watcher then only needs to tell whether the next version
// converts to the same endpoint (fingerprint) and whether this one was an endpoint (for
// deletes), so the endpoint's labels, addresses and ports are held once, by the graph.
type podRecord struct {
	recordMeta
	// fingerprint is the endpoint's (fingerprint, never 0); 0 when the pod is no endpoint
	fingerprint uint64
	// pending is the endpoint's update, a model.EndpointSet (when isEndpoint), until the pod
	// informer's one event handler takes it (podChanged swaps it out) to hand it to the graph.
	// It holds the update already boxed, so that handing it over copies no endpoint: the
	// endpoint is allocated once a pod version, not once as a value and again in the update
	// (BENCHMARKS.md gives what that saves in a cold start). Atomic: the cache holds the
	// record before the handler runs, and a reader of the cache may look at it. Taking it
	// mutates a cached object, which client-go's cache mutation detector (a debugging aid,
	// KUBE_CACHE_MUTATION_DETECTOR=true) would report.
	pending atomic.Pointer[model.Update]
	// problem is why the pod cannot be converted (it is skipped): nil for almost every pod, so a
	// pointer (8 bytes in every record, where an error is 16; see err)
	problem *error
}

// isEndpoint reports whether the pod converts to an endpoint.
func (r *podRecord) isEndpoint() bool { return r.fingerprint != 0 }

// err is why the pod cannot be converted, nil when it can.
func (r *podRecord) err() error {
	if r.problem == nil {
		return nil
	}
	return *r.problem
}

// recordPod converts p into its record. The strings that repeat across pods are interned; the
// endpoint's name is the record's (part of its id): the graph keeps it for as long as the pod
// lives. p's strings may be views of a buffer (decodePodFields): none is kept.
func (w *Watcher) recordPod(p *corev1.Pod) *podRecord {
	ep, ok, err := ConvertPod(p)
	r := &podRecord{recordMeta: newRecordMeta(p.Namespace, p.Name, p.ResourceVersion)}
	if err != nil {
		problem := err // a variable of its own: &err would move err to the heap for every pod
		r.problem = &problem
	}
	if ok {
		ep.Key = model.EndpointKey{Namespace: w.names.intern(p.Namespace), Name: r.name()}
		ep.Node = w.names.intern(ep.Node)
		ep.ServiceAccount = w.names.intern(ep.ServiceAccount)
		for i := range ep.NamedPorts {
			ep.NamedPorts[i].Name = w.names.intern(ep.NamedPorts[i].Name)
		}
		r.fingerprint = fingerprint(&ep)
		var up model.Update = model.EndpointSet{Endpoint: ep}
		r.pending.Store(&up)
	}
	return r
}

// DeepCopyObject copies the record field by field (its atomic is not copied by value); a pending
// endpoint is copied too, with new address and port slices (labels are immutable), so either
// record can hand its own to the graph.
func (r *podRecord) DeepCopyObject() runtime.Object {
	c := &podRecord{recordMeta: r.recordMeta, fingerprint: r.fingerprint, problem: r.problem}
	if ep := r.pendingEndpoint(); ep != nil {
		ep.Addrs = slices.Clone(ep.Addrs)
		ep.NamedPorts = slices.Clone(ep.NamedPorts)
		var up model.Update = model.EndpointSet{Endpoint: *ep}
		c.pending.Store(&up)
	}
	return c
}

// pendingEndpoint returns a copy of the pending endpoint (nil when none is pending); its slices
// are the record's.
func (r *podRecord) pendingEndpoint() *model.Endpoint {
	up := r.pending.Load()
	if up == nil {
		return nil
	}
	ep := (*up).(model.EndpointSet).Endpoint
	return &ep
}

// recordMeta is what the informers' caches key a record by: with GetObjectKind and DeepCopyObject
// (each record's own) a record is a runtime.Object, which is what their stores hold, and it is
// its own metav1.Object (objectmeta.go). Its namespace, name and resourceVersion are one string,
// id, "namespace/name" (the cache key) followed by the version: one allocation a record instead
// of four (the three strings and the cache's key).
type recordMeta struct {
	noMeta
	id            string
	nsLen, keyLen uint32 // the namespace is id[:nsLen], the key id[:keyLen]
}

func newRecordMeta(namespace, name, resourceVersion string) recordMeta {
	if namespace == "" {
		// cloned: when one of the two is empty, + returns the other itself, which may be a view
		// of the list decoder's buffer (decodePodFields)
		return recordMeta{id: strings.Clone(name + resourceVersion), keyLen: uint32(len(name))}
	}
	return recordMeta{id: namespace + "/" + name + resourceVersion,
		nsLen: uint32(len(namespace)), keyLen: uint32(len(namespace) + 1 + len(name))}
}

// key is the cache key: namespace/name, or the name of a record without namespace.
func (m recordMeta) key() string { return m.id[:m.keyLen] }

// ns is the record's namespace.
func (m recordMeta) ns() string { return m.id[:m.nsLen] }

// name is the record's name.
func (m recordMeta) name() string {
	if m.nsLen == 0 {
		return m.key()
	}
	return m.id[m.nsLen+1 : m.keyLen]
}

// version is the record's resourceVersion.
func (m recordMeta) version() string { return m.id[m.keyLen:] }

// GetObjectKind makes a record a runtime.Object.
func (recordMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// fingerprintSeed seeds every fingerprint. It is made once per process and never changed, so all
// records of the process compare; being random and unknown outside it, it keeps anyone who can
// set a pod's labels from crafting a change whose fingerprint equals the old one, which FNV-1a's
// fixed, public function would allow.
var fingerprintSeed = maphash.MakeSeed()

// fingerprint hashes every field of ep, each string with its length and each list with its
// count, so that no two different endpoints have the same input (e.g. labels {"a":"bc"} and
// {"ab":"c"}, or an address's IPv4 and IPv4-mapped IPv6 forms). Its lowest bit is set, so that
// it is never 0 (a record's "no endpoint"): two different endpoints get the same fingerprint with
// probability ≈ 2⁻⁶³, and a pod changed 10¹² times in the agent's life would have its change
// missed once with probability ≈ 10⁻⁷.
func fingerprint(ep *model.Endpoint) uint64 {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	hashString(&h, ep.Key.Namespace)
	hashString(&h, ep.Key.Name)
	hashString(&h, ep.Node)
	hashUint(&h, uint64(ep.Labels.Len()))
	for k, v := range ep.Labels.All() {
		hashString(&h, k)
		hashString(&h, v)
	}
	hashString(&h, ep.ServiceAccount)
	hashUint(&h, uint64(len(ep.Addrs)))
	for _, a := range ep.Addrs {
		hashAddr(&h, a)
	}
	hashUint(&h, uint64(len(ep.NamedPorts)))
	for _, p := range ep.NamedPorts {
		hashString(&h, p.Name)
		_ = h.WriteByte(byte(p.Protocol))
		hashUint(&h, uint64(p.Port))
	}
	running := byte(0)
	if ep.Running {
		running = 1
	}
	_ = h.WriteByte(running)
	hashUint(&h, uint64(ep.Created.Unix()))
	hashUint(&h, uint64(ep.Created.Nanosecond()))
	return h.Sum64() | 1
}

func hashAddr(h *maphash.Hash, a netip.Addr) {
	b := a.As16()
	_, _ = h.Write(b[:])
	_ = h.WriteByte(byte(a.BitLen() / 8)) // 0 (invalid), 4 or 16: tells 1.2.3.4 from ::ffff:1.2.3.4
	hashString(h, a.Zone())
}

func hashString(h *maphash.Hash, s string) {
	hashUint(h, uint64(len(s)))
	_, _ = h.WriteString(s)
}

func hashUint(h *maphash.Hash, n uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	_, _ = h.Write(b[:])
}
