package sync

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A record is its own metav1.Object: client-go's stores key each object through meta.Accessor,
// and the reflector and the Watcher read its version the same way, several times per pod event.
// Through GetObjectMeta each of those calls would allocate an ObjectMeta (≈ 250 bytes), several
// per pod of an initial list. recordMeta answers the name and version; the other fields a
// record does not have read as empty, and setting them does nothing (no one writes a cached
// object).
//
// The name a record answers is its cache key, "namespace/name", and its namespace is empty:
// client-go's key function (MetaNamespaceKeyFunc) then returns the name as it is, where for a
// namespace it would build "namespace/name" anew on every call — the key each cache entry keeps
// would be a string of its own (25–40 bytes a pod), besides the garbage of the calls. The key
// is the one MetaNamespaceKeyFunc gives the API object, so tombstones and the keys of watch
// events agree. The Watcher reads a record's own namespace and name (ns, name), never these.

var _ metav1.Object = recordMeta{}

func (m recordMeta) GetNamespace() string       { return "" }
func (m recordMeta) GetName() string            { return m.key() }
func (m recordMeta) GetResourceVersion() string { return m.version() }

// noMeta gives recordMeta the rest of metav1.Object.
type noMeta struct{}

func (noMeta) SetNamespace(string)                           {}
func (noMeta) SetName(string)                                {}
func (noMeta) GetGenerateName() string                       { return "" }
func (noMeta) SetGenerateName(string)                        {}
func (noMeta) GetUID() types.UID                             { return "" }
func (noMeta) SetUID(types.UID)                              {}
func (noMeta) SetResourceVersion(string)                     {}
func (noMeta) GetGeneration() int64                          { return 0 }
func (noMeta) SetGeneration(int64)                           {}
func (noMeta) GetSelfLink() string                           { return "" }
func (noMeta) SetSelfLink(string)                            {}
func (noMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (noMeta) SetCreationTimestamp(metav1.Time)              {}
func (noMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (noMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (noMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (noMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (noMeta) GetLabels() map[string]string                  { return nil }
func (noMeta) SetLabels(map[string]string)                   {}
func (noMeta) GetAnnotations() map[string]string             { return nil }
func (noMeta) SetAnnotations(map[string]string)              {}
func (noMeta) GetFinalizers() []string                       { return nil }
func (noMeta) SetFinalizers([]string)                        {}
func (noMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (noMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (noMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (noMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
