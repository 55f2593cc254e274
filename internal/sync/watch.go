package sync

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	gosync "sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	npav1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npav1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Config configures a Watcher.
type Config struct {
	Client Client // NewClient
	// NodeName is this node, for the logs. Every pod of the cluster becomes an endpoint (remote
	// pods are members of the sets local policies use); the graph tells local ones by
	// Endpoint.Node.
	NodeName string
	Logger   *slog.Logger
	// Metrics may be nil.
	Metrics *Metrics
	// AbsentRecheck is how often the API server is asked again for ClusterNetworkPolicies,
	// and for each resource of Calico's policy API, while it does not serve them (their CRD is
	// not installed); 0 means 30 s.
	AbsentRecheck time.Duration
	// AutoHostEndpoints makes every Node a host endpoint, as Calico's kube-controllers do
	// (AutoHostEndpoint); nothing is written to the API.
	AutoHostEndpoints bool
}

// Watcher watches Pods, Namespaces, ServiceAccounts, NetworkPolicies, ClusterNetworkPolicies
// (and the Nodes these select) and Calico's tiers, policies and network sets through client-go
// informers and emits the model updates that describe them.
// Run it once.
type Watcher struct {
	cfg Config
	log *slog.Logger

	mu      gosync.Mutex
	pending []model.Update
	// versions: resource → resourceVersion of its latest event since the last batch
	versions map[string]string
	kick     chan struct{} // capacity 1: "pending or versions is not empty"
	// storesSynced, capacity 1: "a store has delivered its initial list" (storeSynced), which
	// the wait for in-sync takes as the moment to look again
	storesSynced chan struct{}
	// relisting counts the relists being delivered (handlerStore.Replace): while any is, nothing
	// is sent, so that each reaches the consumer in one batch
	relisting int

	// What was last emitted per namespace, to emit only changes (resyncs and relists
	// re-deliver unchanged objects) and the matching delete when a namespace goes. Pods and
	// policies are not recorded (see podChanged and policyChanged); endpoints and policies only
	// count them, for the log.
	endpoints  int
	policies   int
	namespaces map[string]model.Namespace
	// invalid holds the resourceVersion of each object last found invalid, so that a version
	// is logged and counted once (not again on resync).
	invalid map[objectKey]string

	// names interns the strings that records and what they convert to repeat (recordPod,
	// recordPolicy).
	names *interner

	// watches are the state of each resource's watch (watchedResources' order)
	watches []*resourceWatch

	// ClusterNetworkPolicies with node peers by name, the nodes by name, and the node watch
	// (cnpwatch.go). partial holds the resourceVersion of each policy last logged as not
	// enforced as written.
	nodePolicies map[string]*nodePolicy
	nodes        map[string]node
	nodesStarted bool
	nodesSynced  atomic.Bool
	partial      map[objectKey]string
	// calico is what was last emitted of Calico's tiers and network sets and of service
	// accounts (calicowatch.go)
	calico calicoState
	// runCtx and running are Run's, for the node informer that a handler starts
	runCtx  context.Context
	running *gosync.WaitGroup
}

// watchedResources are the resources the Watcher lists and watches, as SourceVersion and the
// metrics name them.
func watchedResources() []string {
	return append([]string{"namespaces", "pods", "networkpolicies", "clusternetworkpolicies", "nodes"}, calicoWatchedResources()...)
}

type objectKey struct{ kind, namespace, name string }

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

// New returns a Watcher for cfg.
func New(cfg Config) *Watcher {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		cfg:          cfg,
		log:          log,
		kick:         make(chan struct{}, 1),
		storesSynced: make(chan struct{}, 1),
		namespaces:   map[string]model.Namespace{},
		versions:     map[string]string{},
		invalid:      map[objectKey]string{},
		names:        newInterner(),

		nodePolicies: map[string]*nodePolicy{},
		nodes:        map[string]node{},
		partial:      map[objectKey]string{},
		calico:       newCalicoState(),
	}
	now := time.Now()
	for _, res := range watchedResources() {
		w.watches = append(w.watches, newResourceWatch(res, log, cfg.Metrics, now))
	}
	w.watchOf("nodes").setIdle(true) // until a ClusterNetworkPolicy has a node peer
	return w
}

// WatchDown reports the resource whose watch has been closed longest and for how long; 0 while
// every resource has a watch open. From New until its first watch opens a resource counts as
// closed. A watch is open from the API server's answer to the watch request until the stream
// ends (the API server's timeout every 5–10 minutes, an expired resourceVersion, a connection
// that breaks — a silent one within 11 s, APIDialer); between two watches the reflector may
// relist. A watch that ends at once with nothing received does not end an outage
// (resourceWatch). Safe for concurrent use.
func (w *Watcher) WatchDown() (resource string, down time.Duration) {
	now := time.Now()
	for _, r := range w.watches {
		if d := r.down(now); d > down {
			resource, down = r.resource, d
		}
	}
	return resource, down
}

// Run starts the informers and sends batches of updates on out until ctx is done. The first
// batch is SyncStatusUpdate{ResyncInProgress}; SyncStatusUpdate{InSync} follows the updates of
// the initial lists of every informer, once each event handler has received its initial list.
// After that, changes are sent as they come; an API outage sends nothing (the consumer keeps the
// last state) and client-go's relist afterwards sends only what changed. Sends never block the
// informers: updates queue in the Watcher while out is not ready, and a send carries everything
// queued. Run does not close out (other sources share it); it returns nil when ctx is done.
func (w *Watcher) Run(ctx context.Context, out chan<- []model.Update) error {
	if w.cfg.Client == nil {
		return errors.New("sync: Config.Client is nil")
	}
	w.push(model.SyncStatusUpdate{Status: model.ResyncInProgress})
	// each event's version is noted after its updates are queued: a SourceVersion never
	// precedes the changes it vouches for
	var handler eventHandler = func(resource string, change func(oldObj, newObj any), del func(obj any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { change(nil, obj); w.observe(resource, obj) },
			UpdateFunc: func(oldObj, newObj any) { change(oldObj, newObj); w.observe(resource, newObj) },
			DeleteFunc: func(obj any) { del(obj); w.observe(resource, obj) },
		}
	}
	// Each resource has a client-go Reflector with the Watcher's retry backoff, filling a store
	// that calls the handlers itself (informer.go): client-go's informers take no backoff, and
	// theirs keeps them away for up to a minute after an API server outage. A shared informer
	// would also hand every event to its handlers through a buffer and, while more than 1,024
	// wait there (all of an initial list of pods), allocate a trace for each (≈ 250 bytes of
	// garbage a pod). Pods are listed by podlist.go.
	var synced []cache.InformerSynced
	var running gosync.WaitGroup
	defer running.Wait()
	w.mu.Lock()
	w.runCtx, w.running = ctx, &running
	if w.cfg.AutoHostEndpoints {
		w.startNodesLocked() // each node is a host endpoint: in-sync waits for their list
	}
	w.mu.Unlock()
	for _, s := range []struct {
		resource string // as SourceVersion names it
		object   runtime.Object
		items    itemStore
		change   func(oldObj, newObj any) // oldObj nil for an add
		del      func(obj any)
	}{
		{"namespaces", &corev1.Namespace{}, newObjectStore(), ignoreOld(w.setNamespace), w.deleteNamespace},
		{"pods", &corev1.Pod{}, newPodStore(), w.podChanged, w.deletePod},
		{"networkpolicies", &networkingv1.NetworkPolicy{}, newObjectStore(), w.policyChanged(KindNetworkPolicy), w.deletePolicy(KindNetworkPolicy)},
	} {
		store := newHandlerStore(w.watchOf(s.resource), s.items, w.transform, handler(s.resource, s.change, s.del))
		store.sink = w
		// the pods of the initial list reach the graph as the list is read (early): the graph's
		// work on them overlaps the list's transfer
		record := func(p *corev1.Pod) *podRecord {
			r := w.recordPod(p)
			store.early(r)
			return r
		}
		inf := newStoreInformer(store, w.cfg.Client.listerWatcher(s.resource, record), s.object)
		synced = append(synced, inf.hasSynced)
		running.Go(func() { inf.reflector.RunWithContext(ctx) })
	}
	// ClusterNetworkPolicies, whose CRD may be missing, and the nodes their node peers select,
	// whose list in-sync waits for once the initial list of policies has started their watch
	synced = append(synced,
		w.runClusterPolicies(ctx, &running, handler("clusternetworkpolicies", w.clusterPolicyChanged, w.deleteClusterPolicy)),
		w.nodesReady)
	// ServiceAccounts, and Calico's resources, each of which may be missing
	synced = append(synced, w.runCalico(ctx, &running, handler)...)

	started := time.Now()
	go func() {
		if !w.waitSynced(ctx, synced) {
			return
		}
		w.mu.Lock()
		n := w.endpoints
		np := w.policies
		nn := len(w.namespaces)
		w.mu.Unlock()
		w.log.Info("initial lists received; in sync", "node", w.cfg.NodeName, "endpoints", n, "namespaces", nn, "policies", np,
			"took", time.Since(started).Round(time.Millisecond))
		w.push(model.SyncStatusUpdate{Status: model.InSync})
	}()
	w.send(ctx, out)
	return nil
}

// syncedPoll is how often waitSynced looks at sources that tell nobody when they are synced
// (client-go's WaitForCacheSync polls every source this often).
const syncedPoll = 100 * time.Millisecond

// waitSynced waits until every source is synced, or ctx is done (false). It looks again as soon
// as a store has delivered its initial list (storeSynced), so in-sync follows the last list at
// once, and at least every syncedPoll for the other conditions (the node list a ClusterNetworkPolicy
// needs, a resource found not served).
func (w *Watcher) waitSynced(ctx context.Context, synced []cache.InformerSynced) bool {
	poll := time.NewTicker(syncedPoll)
	defer poll.Stop()
	for slices.ContainsFunc(synced, func(s cache.InformerSynced) bool { return !s() }) {
		select {
		case <-ctx.Done():
			return false
		case <-w.storesSynced:
		case <-poll.C:
		}
	}
	return true
}

// storeSynced notes that a store has delivered its initial list (waitSynced).
func (w *Watcher) storeSynced() {
	select {
	case w.storesSynced <- struct{}{}:
	default:
	}
}

// send sends what is queued on out, one batch per kick, until ctx is done; nothing while a
// relist is being delivered (holdSends).
func (w *Watcher) send(ctx context.Context, out chan<- []model.Update) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.mu.Lock()
		if w.relisting > 0 {
			w.mu.Unlock()
			continue // releaseSends kicks again
		}
		batch := w.pending
		w.pending = nil
		for res, rv := range w.versions {
			batch = append(batch, model.SourceVersion{Resource: res, ResourceVersion: rv})
		}
		clear(w.versions)
		w.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		select {
		case out <- batch:
		case <-ctx.Done():
			return
		}
	}
}

// holdSends holds the sends until releaseSends: a relist is being delivered, and its updates
// reach the consumer together. A relist's updates, the events of other resources meanwhile
// included, are then sent in one batch.
func (w *Watcher) holdSends() {
	w.mu.Lock()
	w.relisting++
	w.mu.Unlock()
}

// listedAt notes that the view of resource is a list's at resourceVersion: the next batch's
// SourceVersion of it. The objects of a list arrive in key order, so the version of the last
// one delivered (observe) may be older than others of the list.
func (w *Watcher) listedAt(resource, resourceVersion string) {
	w.mu.Lock()
	w.versions[resource] = resourceVersion
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// releaseSends ends a holdSends and kicks the sender.
func (w *Watcher) releaseSends() {
	w.mu.Lock()
	w.relisting--
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// watchOf is the state of resource's watch.
func (w *Watcher) watchOf(resource string) *resourceWatch {
	for _, r := range w.watches {
		if r.resource == resource {
			return r
		}
	}
	panic("sync: no watch of " + resource)
}

func ignoreOld(f func(obj any)) func(_, obj any) { return func(_, obj any) { f(obj) } }

// observe notes the resourceVersion of an event's object (a tombstone has none) for the next
// batch's SourceVersion of its resource.
func (w *Watcher) observe(resource string, obj any) {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetResourceVersion() == "" {
		return
	}
	w.mu.Lock()
	w.versions[resource] = m.GetResourceVersion()
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// push queues updates for the sender.
func (w *Watcher) push(ups ...model.Update) {
	w.mu.Lock()
	w.pushLocked(ups...)
	w.mu.Unlock()
}

func (w *Watcher) pushLocked(ups ...model.Update) {
	w.pending = append(w.pending, ups...)
	if w.cfg.Metrics != nil {
		for _, u := range ups {
			w.cfg.Metrics.Updates.WithLabelValues(updateKind(u)).Inc()
		}
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func updateKind(u model.Update) string {
	switch u.(type) {
	case model.EndpointSet, model.EndpointDeleted:
		return "endpoint"
	case model.NamespaceSet, model.NamespaceDeleted:
		return "namespace"
	case model.PolicySet, model.PolicyDeleted:
		return "policy"
	case model.SyncStatusUpdate:
		return "sync"
	case model.TierSet, model.TierDeleted:
		return "tier"
	case model.NetworkSetSet, model.NetworkSetDeleted:
		return "networkset"
	case model.ServiceAccountSet, model.ServiceAccountDeleted:
		return "serviceaccount"
	}
	return "other"
}

// checkedLocked notes whether an object's version converted (err nil): an invalid version is
// logged and counted once; a valid one after invalid ones is logged once too.
func (w *Watcher) checkedLocked(k objectKey, resourceVersion string, err error) {
	if err == nil {
		if _, was := w.invalid[k]; was {
			delete(w.invalid, k)
			w.log.Info("object is valid again", "kind", k.kind, "namespace", k.namespace, "name", k.name)
		}
		return
	}
	if rv, seen := w.invalid[k]; seen && rv == resourceVersion {
		return
	}
	w.invalid[k] = resourceVersion
	w.log.Warn("skipping invalid object", "kind", k.kind, "namespace", k.namespace, "name", k.name, "err", err)
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.InvalidObjects.WithLabelValues(k.kind).Inc()
	}
}

// podChanged emits the change of one pod. Pods are many, so the Watcher keeps no record of
// them: what was emitted for a pod is told by the record cached with its previous version (old;
// nil for an add), whose fingerprint is compared with the new one's. The new record's endpoint
// leaves the cache here, emitted or not: the graph keeps what was emitted.
func (w *Watcher) podChanged(oldObj, newObj any) {
	r, ok := newObj.(*podRecord)
	if !ok {
		return
	}
	up := r.pending.Swap(nil)
	hadBefore, same := false, false
	if o, ok := oldObj.(*podRecord); ok {
		hadBefore = o.isEndpoint()
		same = hadBefore && r.isEndpoint() && o.fingerprint == r.fingerprint
	}
	key := model.EndpointKey{Namespace: r.ns(), Name: r.name()}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkedLocked(objectKey{"Pod", r.ns(), r.name()}, r.version(), r.err())
	switch {
	case same:
	case r.isEndpoint() && up == nil:
		// The record was handed over before (client-go re-delivers a cached record only with
		// itself as old, which is the case above; relists bring new records). Emitting nothing
		// leaves the graph with the pod's previous state, but a panic would stop every pod.
		w.log.Error("pod record delivered again after its endpoint was taken; change not emitted",
			"namespace", r.ns(), "name", r.name(), "resourceVersion", r.version())
	case r.isEndpoint():
		w.endpoints++
		if hadBefore {
			w.endpoints--
		}
		w.pushLocked(*up)
	case hadBefore:
		w.endpoints--
		w.pushLocked(model.EndpointDeleted{Key: key})
	}
}

func (w *Watcher) deletePod(obj any) {
	ns, name, last, ok := keyOf(obj)
	if !ok {
		return
	}
	// A pod whose last known version was no endpoint was never emitted (or already withdrawn).
	// A tombstone without a readable pod gets a delete anyway; the graph ignores unknown keys.
	wasEndpoint := true
	if r, isPod := last.(*podRecord); isPod {
		wasEndpoint = r.isEndpoint()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.invalid, objectKey{"Pod", ns, name})
	if wasEndpoint {
		w.endpoints--
		w.pushLocked(model.EndpointDeleted{Key: model.EndpointKey{Namespace: ns, Name: name}})
	}
}

func (w *Watcher) setNamespace(obj any) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	m := ConvertNamespace(n)
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, had := w.namespaces[n.Name]; had && reflect.DeepEqual(old, m) {
		return
	}
	w.namespaces[n.Name] = m
	w.pushLocked(model.NamespaceSet{Namespace: m})
}

func (w *Watcher) deleteNamespace(obj any) {
	_, name, _, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, had := w.namespaces[name]; had {
		delete(w.namespaces, name)
		w.pushLocked(model.NamespaceDeleted{Name: name})
	}
}

// policyChanged returns the handler of changes of one kind of policy (NetworkPolicy,
// ClusterNetworkPolicy), which emits the change of one policy. As for pods (podChanged), the
// Watcher keeps no record of policies: the record cached with the previous version (old; nil
// for an add) tells whether the policy is in force (it converted) and, by its fingerprint,
// whether the new version converts to the same policy. The new record's policy leaves the
// cache here, emitted or not.
//
// An invalid version withdraws the policy (PolicyDeleted) when an earlier version was in force:
// the user has replaced those rules, so keeping them would enforce something nobody asked for
// any more. Withdrawing changes only what this one policy allowed or isolated, never what other
// policies decide. The log line and nftpolicy_invalid_objects_total make it visible; a later
// valid version is picked up.
func (w *Watcher) policyChanged(kind string) func(oldObj, newObj any) {
	return func(oldObj, newObj any) {
		r, ok := newObj.(*policyRecord)
		if !ok {
			return
		}
		p := r.pending.Swap(nil)
		inForce, same := false, false
		if o, ok := oldObj.(*policyRecord); ok {
			inForce = o.err == nil
			same = inForce && r.err == nil && o.fingerprint == r.fingerprint
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.checkedLocked(objectKey{kind, r.ns(), r.name()}, r.version(), r.err)
		switch {
		case same:
		case r.err == nil && p == nil:
			// delivered again after its policy was taken, as in podChanged
			w.log.Error("policy record delivered again after its policy was taken; change not emitted",
				"kind", kind, "namespace", r.ns(), "name", r.name(), "resourceVersion", r.version())
		case r.err == nil:
			if !inForce {
				w.policies++
			}
			w.pushLocked(model.PolicySet{Policy: *p})
		case inForce:
			w.policies--
			w.pushLocked(model.PolicyDeleted{Key: model.PolicyKey{Kind: kind, Namespace: r.ns(), Name: r.name()}})
		}
	}
}

// deletePolicy returns the handler of deletes of one kind of policy.
func (w *Watcher) deletePolicy(kind string) func(obj any) {
	return func(obj any) {
		ns, name, last, ok := keyOf(obj)
		if !ok {
			return
		}
		// A policy whose last known version was invalid is not in force (never emitted, or
		// already withdrawn). A tombstone without a readable record gets a delete anyway; the
		// graph ignores unknown keys.
		inForce := true
		if r, isRecord := last.(*policyRecord); isRecord {
			inForce = r.err == nil
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.invalid, objectKey{kind, ns, name})
		if inForce {
			w.policies--
			w.pushLocked(model.PolicyDeleted{Key: model.PolicyKey{Kind: kind, Namespace: ns, Name: name}})
		}
	}
}

// keyOf names a deleted object, which may be a tombstone when the watch missed the delete, and
// gives its last known state (a tombstone's may be nil).
func keyOf(obj any) (namespace, name string, last any, ok bool) {
	if t, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		ns, n, err := cache.SplitMetaNamespaceKey(t.Key)
		return ns, n, t.Obj, err == nil
	}
	if r, isRecord := obj.(interface {
		ns() string
		name() string
	}); isRecord {
		return r.ns(), r.name(), obj, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", nil, false
	}
	return m.GetNamespace(), m.GetName(), obj, true
}

// transform is the informers' transform: pods and policies are cached as their conversion
// (podRecord, policyRecord), namespaces keep only the fields ConvertNamespace reads (no
// managedFields, annotations, …). It is idempotent and returns other objects unchanged. A
// method, not a function: the records' strings are interned in the Watcher's interner.
func (w *Watcher) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return w.recordPod(o), nil
	case *networkingv1.NetworkPolicy:
		return w.recordPolicy(o), nil
	case *npav1beta1.ClusterNetworkPolicy, *npav1alpha2.ClusterNetworkPolicy: // v1alpha2 where v1beta1 is not served
		cnp, err := clusterPolicyV1beta1(o.(runtime.Object))
		if err != nil {
			m := o.(metav1.Object)
			return &policyRecord{recordMeta: newRecordMeta("", m.GetName(), m.GetResourceVersion()), err: err}, nil
		}
		return w.recordClusterPolicy(cnp), nil
	case *corev1.Node:
		return slimNode(o), nil
	case *corev1.Namespace:
		return &corev1.Namespace{ObjectMeta: slimMeta(&o.ObjectMeta)}, nil
	}
	if out, ok := w.transformCalico(obj); ok {
		return out, nil
	}
	return obj, nil
}

func slimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, Labels: m.Labels}
}
