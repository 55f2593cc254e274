package sync

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"sort"
	"strings"
	gosync "sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	npav1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npav1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// sourced is an object with where it came from ("" when unknown), for error messages.
// A decoding error travels in err (obj nil), so errors keep the order of the files.
type sourced struct {
	obj    runtime.Object
	origin string
	err    error
}

// LoadDir reads every *.yaml, *.yml and *.json file under dir (recursively, in lexical order),
// each holding one or more documents (YAML "---" separated; a v1 List is unpacked), and converts
// the Namespaces, Pods (with their status), NetworkPolicies, ClusterNetworkPolicies, Nodes
// (the addresses that node peers select) and Calico's Tiers, GlobalNetworkPolicies,
// NetworkPolicies, GlobalNetworkSets, NetworkSets and HostEndpoints (projectcalico.org/v3) and the
// ServiceAccounts (whose labels Calico's service-account selectors read) in them like the API
// watcher does. Decoding is strict, as kubectl's: an unknown field, or a duplicate one (a
// YAML key or a JSON field given twice), makes the object bad.
// Objects without metadata.namespace (Pods, NetworkPolicies) are in "default". A namespace
// that objects are in but that no manifest defines exists with only its
// kubernetes.io/metadata.name label, as it would in a cluster; a pod's service account that no
// manifest defines exists with no label.
//
// Bad objects (undecodable, unsupported kind, duplicate, invalid for the converter) are skipped
// and reported in the errors, each naming its file, document and object; policies enforced in
// part are reported as a *PartlyEnforcedError; everything else is returned, in ConvertObjects'
// deterministic order, ending with SyncStatusUpdate{InSync}.
func LoadDir(dir string) ([]model.Update, []error) {
	var errs []error
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("reading manifests in %s: %w", dir, err))
	}
	sort.Strings(files)
	s := newScheme()
	// Each document is turned into JSON once (readFile); the serializer then decodes JSON, strictly.
	dec := kjson.NewSerializerWithOptions(typeMeta{}, s, s, kjson.SerializerOptions{Strict: true})
	ups, cerrs := convertFed(func(add func(sourced)) {
		for _, f := range files {
			readFile(f, dec, add)
		}
	})
	return ups, append(errs, cerrs...)
}

// readFile decodes the documents of one file and hands each item to take, in the documents'
// order; decoding errors come as items with err set. Documents are split in order and decoded
// in chunks of chunkDocs, the documents of a chunk on up to GOMAXPROCS goroutines (a document's
// YAML → JSON translation and typed decode are most of LoadDir's time); only two chunks'
// decoded objects are held at a time, and a document's bytes are dropped once it is decoded.
func readFile(path string, dec runtime.Decoder, take func(sourced)) {
	f, err := os.Open(path)
	if err != nil {
		take(sourced{err: fmt.Errorf("%s: %w", path, err)})
		return
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	// While a chunk decodes, the one before it is handed to take: conversion overlaps decoding.
	var decoding chan []sourced
	flush := func() {
		if decoding != nil {
			for _, it := range <-decoding {
				take(it)
			}
		}
	}
	for doc, done := 1, false; !done; {
		chunk := make([][]byte, 0, chunkDocs)
		var readErr error
		for len(chunk) < chunkDocs {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				done = true
				break
			}
			if err != nil {
				readErr, done = err, true
				break
			}
			chunk = append(chunk, raw)
		}
		next := make(chan []sourced, 1)
		go func(first int) {
			items := decodeDocs(chunk, path, first, dec)
			if readErr != nil {
				items = append(items, sourced{err: fmt.Errorf("%s (document %d): %w", path, first+len(chunk), readErr)})
			}
			next <- items
		}(doc)
		flush()
		decoding = next
		doc += len(chunk)
	}
	flush()
}

// chunkDocs is how many documents readFile holds and decodes at a time.
const chunkDocs = 512

// decodeDocs decodes docs, the documents of path numbered from first, in parallel; the items
// come back in the documents' order.
func decodeDocs(docs [][]byte, path string, first int, dec runtime.Decoder) []sourced {
	results := make([][]sourced, len(docs))
	workers := min(goruntime.GOMAXPROCS(0), len(docs))
	var (
		next atomic.Int64
		wg   gosync.WaitGroup
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var y yamlSubset
			for i := int(next.Add(1) - 1); i < len(docs); i = int(next.Add(1) - 1) {
				results[i] = decodeDoc(docs[i], fmt.Sprintf("%s (document %d)", path, first+i), dec, &y)
				docs[i] = nil
			}
		}()
	}
	wg.Wait()
	var out []sourced
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// decodeDoc decodes one YAML (or JSON) document; an empty one (comments only) yields nothing.
// The document becomes JSON through y when it is in the subset y reads, else through
// sigs.k8s.io/yaml, strictly: a duplicate key is an error, as it is in JSON.
func decodeDoc(raw []byte, origin string, dec runtime.Decoder, y *yamlSubset) []sourced {
	js, ok := y.translate(raw)
	if !ok {
		var err error
		if js, err = yaml.YAMLToJSONStrict(raw); err != nil {
			return []sourced{{err: fmt.Errorf("%s: %s%w", origin, namedBy(raw), err)}}
		}
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil
	}
	return decode(js, origin, dec)
}

// namedBy names the object of a document that is not strict YAML (a duplicate key) as
// objectName does, followed by ": ", if the document is YAML at all; else "".
func namedBy(raw []byte) string {
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return ""
	}
	m := &metav1.PartialObjectMetadata{}
	if json.Unmarshal(js, m) != nil || m.Kind == "" {
		return ""
	}
	return objectName(m) + ": "
}

// decode decodes one document; a v1 List yields its items. A kind the scheme does not hold (one
// that nftpolicy does not read) yields its metadata, which convertObjects reports as ignored.
func decode(js []byte, origin string, dec runtime.Decoder) []sourced {
	obj, gvk, err := dec.Decode(js, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		m := &metav1.PartialObjectMetadata{}
		if jerr := json.Unmarshal(js, m); jerr == nil {
			return []sourced{{obj: m, origin: origin}}
		}
	}
	if err != nil {
		name := ""
		switch {
		case obj != nil:
			name = " " + objectName(obj)
		case gvk != nil && gvk.Kind != "":
			name = " " + gvk.Kind
		}
		return []sourced{{err: fmt.Errorf("%s:%s: %w", origin, name, err)}}
	}
	list, ok := obj.(*corev1.List)
	if !ok {
		return []sourced{{obj: obj, origin: origin}}
	}
	var out []sourced
	for i, it := range list.Items {
		out = append(out, decode(it.Raw, fmt.Sprintf("%s item %d", origin, i), dec)...)
	}
	return out
}

// ConvertObjects converts Namespaces, Pods, NetworkPolicies and ClusterNetworkPolicies (with
// the Nodes their node peers select) and Calico's kinds into the updates that describe them, in
// a deterministic order: Calico tiers by name, namespaces by name, network sets by key,
// endpoints by key, policies by key, then SyncStatusUpdate{InSync}. A Calico policy whose tier
// no object defines (nor the model's built-ins) is reported and left out. Pods that are not endpoints are left out silently; objects of other
// kinds, duplicates (the later one is dropped) and objects the converters reject are skipped and
// reported, each error naming the object. Pods and NetworkPolicies without a namespace are in
// "default"; a namespace that holds objects but is not among objs is added with only its
// kubernetes.io/metadata.name label (the API server would not hold the objects without it).
func ConvertObjects(objs []runtime.Object) ([]model.Update, []error) {
	items := make([]sourced, len(objs))
	for i, o := range objs {
		items[i] = sourced{obj: o}
	}
	return convertObjects(items)
}

func convertObjects(items []sourced) ([]model.Update, []error) {
	return convertFed(func(add func(sourced)) {
		for _, it := range items {
			add(it)
		}
	})
}

// convertFed converts the objects feed hands to add, in that order, then the
// ClusterNetworkPolicies (whose node peers need every Node), into ConvertObjects' updates.
func convertFed(feed func(add func(sourced))) ([]model.Update, []error) {
	c := newObjectSet()
	feed(c.add)
	c.convertCNPs()
	c.checkCalicoTiers()
	c.checkHostEndpoints()
	return c.updates(), c.errs
}

// objectSet is the model of a set of manifests, as it is converted one object at a time.
type objectSet struct {
	errs       []error
	namespaces map[string]model.Namespace
	endpoints  map[model.EndpointKey]model.Endpoint
	policies   map[model.PolicyKey]model.Policy
	accounts   map[[2]string]model.ServiceAccount // by namespace and name
	nodes      []*corev1.Node
	cnps       []sourced // converted once every node is known
	calico     *calicoObjects
	// taken: every object named so far, valid or not, so that a later duplicate is skipped
	// rather than silently replacing it
	taken map[string]bool
}

func newObjectSet() *objectSet {
	return &objectSet{
		namespaces: map[string]model.Namespace{},
		endpoints:  map[model.EndpointKey]model.Endpoint{},
		accounts:   map[[2]string]model.ServiceAccount{},
		policies:   map[model.PolicyKey]model.Policy{},
		taken:      map[string]bool{},
		calico:     newCalicoObjects(),
	}
}

func (c *objectSet) fail(it sourced, err error) {
	where := ""
	if it.origin != "" {
		where = it.origin + ": "
	}
	c.errs = append(c.errs, fmt.Errorf("%s%s: %w", where, objectName(it.obj), err))
}

// take reports whether obj is to be converted: it has a name, and none of the same kind and
// namespace came before.
func (c *objectSet) take(it sourced, obj interface {
	runtime.Object
	GetName() string
}) bool {
	if obj.GetName() == "" {
		c.fail(it, errors.New("metadata.name is empty"))
		return false
	}
	id := objectName(obj)
	if c.taken[id] {
		c.fail(it, errors.New("duplicate, skipped"))
		return false
	}
	c.taken[id] = true
	return true
}

// add converts one object (a ClusterNetworkPolicy later, in convertCNPs).
func (c *objectSet) add(it sourced) {
	if it.err != nil {
		c.errs = append(c.errs, it.err)
		return
	}
	switch o := it.obj.(type) {
	case *corev1.Namespace:
		if c.take(it, o) {
			c.namespaces[o.Name] = ConvertNamespace(o)
		}
	case *corev1.Pod:
		if o = namespaced(o); !c.take(it, o) {
			return
		}
		ep, ok, err := ConvertPod(o)
		switch {
		case err != nil:
			c.fail(it, err)
		case ok:
			c.endpoints[model.EndpointKey{Namespace: o.Namespace, Name: o.Name}] = ep
		}
	case *corev1.ServiceAccount:
		if o = namespaced(o); c.take(it, o) {
			sa := model.ServiceAccount{Namespace: o.Namespace, Name: o.Name}
			if len(o.Labels) > 0 {
				sa.Labels = o.Labels
			}
			c.accounts[[2]string{o.Namespace, o.Name}] = sa
		}
	case *networkingv1.NetworkPolicy:
		if o = namespaced(o); !c.take(it, o) {
			return
		}
		if p, err := ConvertNetworkPolicy(o); err != nil {
			c.fail(it, err)
		} else {
			c.policies[p.Key] = p
		}
	case *npav1beta1.ClusterNetworkPolicy:
		if c.take(it, o) {
			c.cnps = append(c.cnps, it)
		}
	case *npav1alpha2.ClusterNetworkPolicy:
		if c.take(it, o) {
			c.cnps = append(c.cnps, it)
		}
	case *corev1.Node:
		if c.take(it, o) {
			c.nodes = append(c.nodes, o)
		}
	default:
		if !c.addCalico(it) {
			c.fail(it, errors.New("kind not used by nftpolicy, ignored"))
		}
	}
}

// namespaced is o, or a copy of it in the "default" namespace when it names none.
func namespaced[T interface {
	metav1.Object
	DeepCopyObject() runtime.Object
}](o T) T {
	if o.GetNamespace() != "" {
		return o
	}
	c := o.DeepCopyObject().(T)
	c.SetNamespace(corev1.NamespaceDefault)
	return c
}

// convertCNPs converts the ClusterNetworkPolicies, whose node peers need every Node.
func (c *objectSet) convertCNPs() {
	for _, it := range c.cnps {
		cnp, err := clusterPolicyV1beta1(it.obj)
		if err != nil {
			c.fail(it, err)
			continue
		}
		p, ignored, err := ConvertClusterNetworkPolicy(cnp, c.nodes)
		if err != nil {
			c.fail(it, err)
			continue
		}
		if len(ignored) > 0 {
			c.errs = append(c.errs, &PartlyEnforcedError{Object: strings.TrimPrefix(it.origin+": ", ": ") + objectName(it.obj), Ignored: ignored})
		}
		c.policies[p.Key] = p
	}
}

// updates lists the model: namespaces, service accounts, endpoints, policies, each sorted, then
// in-sync. A pod or policy cannot exist in the API without its namespace, nor a pod without its
// service account: a namespace the objects name but do not define exists with only its
// kubernetes.io/metadata.name label, a service account with no label.
func (c *objectSet) updates() []model.Update {
	for k, e := range c.endpoints {
		implicitNamespace(c.namespaces, k.Namespace)
		if sa := [2]string{k.Namespace, e.ServiceAccount}; e.ServiceAccount != "" {
			if _, ok := c.accounts[sa]; !ok {
				c.accounts[sa] = model.ServiceAccount{Namespace: sa[0], Name: sa[1]}
			}
		}
	}
	for k := range c.accounts {
		implicitNamespace(c.namespaces, k[0])
	}
	for k := range c.policies {
		implicitNamespace(c.namespaces, k.Namespace)
	}
	tiers, netsets := c.calicoUpdates(c.namespaces)
	ups := tiers
	for _, name := range sortedKeys(c.namespaces, func(a, b string) bool { return a < b }) {
		ups = append(ups, model.NamespaceSet{Namespace: c.namespaces[name]})
	}
	ups = append(ups, netsets...)
	for _, k := range sortedKeys(c.accounts, func(a, b [2]string) bool { return a[0] < b[0] || a[0] == b[0] && a[1] < b[1] }) {
		ups = append(ups, model.ServiceAccountSet{ServiceAccount: c.accounts[k]})
	}
	for _, k := range sortedKeys(c.endpoints, func(a, b model.EndpointKey) bool {
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	}) {
		ups = append(ups, model.EndpointSet{Endpoint: c.endpoints[k]})
	}
	for _, k := range sortedKeys(c.policies, func(a, b model.PolicyKey) bool { return a.String() < b.String() }) {
		ups = append(ups, model.PolicySet{Policy: c.policies[k]})
	}
	return append(ups, model.SyncStatusUpdate{Status: model.InSync})
}

func implicitNamespace(namespaces map[string]model.Namespace, name string) {
	if _, ok := namespaces[name]; !ok && name != "" {
		namespaces[name] = ConvertNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
}

func sortedKeys[K comparable, V any](m map[K]V, less func(a, b K) bool) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return less(keys[i], keys[j]) })
	return keys
}

// objectName names an object as Kind ns/name (Kind name for cluster-scoped ones).
func objectName(obj runtime.Object) string {
	if obj == nil {
		return "<nil object>"
	}
	kind := reflect.TypeOf(obj).String()
	if t := reflect.TypeOf(obj); t.Kind() == reflect.Pointer {
		kind = t.Elem().Name()
	}
	if n := calicoObjectName(obj); n != "" {
		return n
	}
	ns, name := "", ""
	switch o := obj.(type) {
	case *corev1.Namespace:
		kind, name = "Namespace", o.Name
	case *corev1.Pod:
		kind, ns, name = "Pod", o.Namespace, o.Name
	case *corev1.ServiceAccount:
		kind, ns, name = "ServiceAccount", o.Namespace, o.Name
	case *networkingv1.NetworkPolicy:
		kind, ns, name = KindNetworkPolicy, o.Namespace, o.Name
	case *npav1beta1.ClusterNetworkPolicy:
		kind, name = KindClusterNetworkPolicy, o.Name
	case *npav1alpha2.ClusterNetworkPolicy:
		kind, name = KindClusterNetworkPolicy, o.Name
	default:
		if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" {
			kind = gvk.Kind
		}
		if m, ok := obj.(interface {
			GetNamespace() string
			GetName() string
		}); ok {
			ns, name = m.GetNamespace(), m.GetName()
		}
	}
	if ns != "" {
		return kind + " " + ns + "/" + name
	}
	return kind + " " + name
}

// PartlyEnforcedError reports a policy that is converted and enforced, but not all of it as
// written (a ClusterNetworkPolicy's peers or protocols of a newer API, domainNames outside an Accept rule): Ignored says what and how.
type PartlyEnforcedError struct {
	Object  string // file, document and object, as other errors name them
	Ignored []string
}

func (e *PartlyEnforcedError) Error() string {
	return e.Object + ": not enforced as written: " + describeIgnored(e.Ignored)
}
