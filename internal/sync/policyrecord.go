package sync

import (
	"fmt"
	"hash/maphash"
	"math"
	"net/netip"
	"reflect"
	"sync/atomic"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// policyRecord is what the policy informer caches of a NetworkPolicy, as podRecord is for a pod:
// the outcome of its conversion, made once when the version arrives. The API object's spec
// (its LabelSelectors' maps above all) is ≈ 1–2 KB a policy, and the Watcher would keep the
// model.Policy it last emitted besides, to emit only changes. Like a pod's, the record keeps the
// policy only until the event handler hands it to the graph, which keeps it; the next version is
// compared by fingerprint, and whether the old record converted tells whether the policy is in
// force (for deletes and invalid versions).
type policyRecord struct {
	recordMeta
	err         error  // why the policy cannot be converted (it is not in force)
	fingerprint uint64 // of the policy, when err is nil (policyFingerprint)
	// pending is the policy (when err is nil) until the policy informer's event handler takes it;
	// atomic for the reasons podRecord.pending gives.
	pending atomic.Pointer[model.Policy]
	// ClusterNetworkPolicies only. nodes is the conversion of one with node peers, kept for
	// its life (pending is nil): the Watcher resolves it again when the nodes change. ignored
	// says what of the policy is not enforced as written (cnpConversion.ignored).
	nodes   *cnpConversion
	ignored []string
}

// recordPolicy converts np into its record. Its namespace is interned: policies share it with
// their namespace's pods.
func (w *Watcher) recordPolicy(np *networkingv1.NetworkPolicy) *policyRecord {
	p, err := ConvertNetworkPolicy(np)
	ns := w.names.intern(np.Namespace)
	r := &policyRecord{recordMeta: newRecordMeta(np.Namespace, np.Name, np.ResourceVersion), err: err}
	if err == nil {
		p.Key.Namespace, p.Namespace = ns, ns
		r.fingerprint = policyFingerprint(&p)
		r.pending.Store(&p)
	}
	return r
}

// DeepCopyObject copies the record; a pending policy is copied as a value that shares its rules,
// which nothing modifies after the conversion (the graph copies what it normalises).
func (r *policyRecord) DeepCopyObject() runtime.Object {
	c := &policyRecord{recordMeta: r.recordMeta, err: r.err, fingerprint: r.fingerprint, nodes: r.nodes, ignored: r.ignored}
	if p := r.pending.Load(); p != nil {
		cp := *p
		c.pending.Store(&cp)
	}
	return c
}

// policyFingerprint hashes every field of p as fingerprint does an endpoint's: each string with
// its length, each list with its count, each pointer with whether it is nil, addresses in their
// 4- or 16-byte form. It walks p by reflection rather than naming the fields, so that a field
// added to model.Policy, Rule or Peer later is compared too instead of its changes being lost
// (TestPolicyFingerprint checks that every type reachable from model.Policy can be hashed).
func policyFingerprint(p *model.Policy) uint64 {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	hashValue(&h, reflect.ValueOf(p).Elem())
	return h.Sum64()
}

var (
	addrType   = reflect.TypeFor[netip.Addr]()
	prefixType = reflect.TypeFor[netip.Prefix]()
)

func hashValue(h *maphash.Hash, v reflect.Value) {
	switch v.Type() { // their fields are not exported
	case addrType:
		hashAddr(h, v.Interface().(netip.Addr))
		return
	case prefixType:
		pfx := v.Interface().(netip.Prefix)
		hashAddr(h, pfx.Addr())
		hashUint(h, uint64(pfx.Bits()+1)) // -1 for an invalid prefix
		return
	}
	switch v.Kind() {
	case reflect.String:
		hashString(h, v.String())
	case reflect.Bool:
		var b uint64
		if v.Bool() {
			b = 1
		}
		hashUint(h, b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		hashUint(h, uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		hashUint(h, v.Uint())
	case reflect.Float32, reflect.Float64:
		hashUint(h, math.Float64bits(v.Float()))
	case reflect.Pointer:
		if v.IsNil() {
			hashUint(h, 0)
			return
		}
		hashUint(h, 1)
		hashValue(h, v.Elem())
	case reflect.Slice, reflect.Array: // a nil and an empty list alike, as consumers take them
		hashUint(h, uint64(v.Len()))
		for i := range v.Len() {
			hashValue(h, v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			hashValue(h, v.Field(i))
		}
	case reflect.Interface:
		if v.IsNil() {
			hashUint(h, 0)
			return
		}
		hashUint(h, 1)
		hashString(h, v.Elem().Type().String())
		hashValue(h, v.Elem())
	default:
		// a map, channel or function: model.Policy has none (TestPolicyFingerprint fails on
		// one). Not a crash for it: fmt prints maps in key order.
		hashString(h, fmt.Sprintf("%T %v", v.Interface(), v.Interface()))
	}
}
