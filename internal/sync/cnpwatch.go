package sync

import (
	"context"
	"hash/maphash"
	"maps"
	"math/rand/v2"
	"slices"
	gosync "sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	npav1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npav1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The Watcher's ClusterNetworkPolicies and the Nodes their node peers select.
//
// ClusterNetworkPolicies are a custom resource: the API server serves them only while their CRD
// is installed, at v1beta1 and v1alpha2 (network-policy-api v0.3.0 on) or at v1alpha2 only
// (v0.2). runClusterPolicies lists them like any resource, at v1beta1 where it is served and
// at v1alpha2 where only it is; when the API server answers that it serves neither, the
// Watcher holds no ClusterNetworkPolicy (those it held are withdrawn), counts the resource as
// in sync and idle (not a watch outage: /readyz stays ready), and lists again every
// Config.AbsentRecheck, so policies are picked up within that time of the CRD's installation,
// without a restart.
//
// Nodes are watched only from the first ClusterNetworkPolicy with a node peer on (their
// informer caches each node's name, labels and IP addresses only). A ClusterNetworkPolicy with
// node peers is emitted with those peers resolved into the nodes' addresses (Nets), once the
// node list has arrived, and emitted again whenever a change of a node it selects (or
// selected) changes the addresses. In-sync waits for the node list when the initial list of
// ClusterNetworkPolicies started the node watch.

// defaultAbsentRecheck is how often the API server is asked again for a resource it does not
// serve: a list that fails at once, cheap for the API server, from every agent; at 5,000 nodes
// about 170 requests a second cluster-wide.
const defaultAbsentRecheck = 30 * time.Second

// nodePolicy is a ClusterNetworkPolicy with node peers as the Watcher last emitted it.
type nodePolicy struct {
	conv        *cnpConversion
	emitted     bool
	fingerprint uint64 // of the resolved policy last emitted
}

// recordClusterPolicy converts a ClusterNetworkPolicy into its record. One with node peers
// keeps its conversion (resolved when emitted); the others keep the policy until it is handed
// over, as NetworkPolicies do.
func (w *Watcher) recordClusterPolicy(cnp *npav1beta1.ClusterNetworkPolicy) *policyRecord {
	c, err := convertCNP(cnp)
	r := &policyRecord{recordMeta: newRecordMeta("", cnp.Name, cnp.ResourceVersion), err: err}
	if err != nil {
		return r
	}
	r.ignored = c.ignored
	r.fingerprint = policyFingerprint(&c.policy)
	if len(c.nodeRules) == 0 {
		r.pending.Store(&c.policy)
		return r
	}
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	hashUint(&h, r.fingerprint)
	for _, nr := range c.nodeRules {
		hashUint(&h, uint64(nr.rule))
		hashString(&h, nr.sel.String())
	}
	r.fingerprint = h.Sum64()
	r.nodes = c
	return r
}

// clusterPolicyChanged emits the change of one ClusterNetworkPolicy: as policyChanged does,
// but a valid version with node peers is kept (nodePolicies) and emitted resolved, once the
// nodes are known.
func (w *Watcher) clusterPolicyChanged(oldObj, newObj any) {
	r, ok := newObj.(*policyRecord)
	if !ok {
		return
	}
	name := r.name()
	key := objectKey{KindClusterNetworkPolicy, "", name}
	w.mu.Lock()
	w.notePartialLocked(key, r.version(), r.err, r.ignored)
	if r.nodes == nil {
		delete(w.nodePolicies, name)
		w.mu.Unlock()
		w.policyChanged(KindClusterNetworkPolicy)(oldObj, newObj)
		return
	}
	defer w.mu.Unlock()
	w.checkedLocked(key, r.version(), nil)
	o, _ := oldObj.(*policyRecord)
	if o != nil && o.err == nil && o.fingerprint == r.fingerprint {
		return
	}
	if o == nil || o.err != nil {
		w.policies++
	}
	np := w.nodePolicies[name]
	if np == nil {
		np = &nodePolicy{}
		w.nodePolicies[name] = np
	}
	np.conv = r.nodes
	w.startNodesLocked()
	if w.nodesSynced.Load() {
		w.emitNodePolicyLocked(np)
	}
}

// deleteClusterPolicy withdraws a deleted ClusterNetworkPolicy.
func (w *Watcher) deleteClusterPolicy(obj any) {
	_, name, _, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	delete(w.nodePolicies, name)
	delete(w.partial, objectKey{KindClusterNetworkPolicy, "", name})
	w.mu.Unlock()
	w.deletePolicy(KindClusterNetworkPolicy)(obj)
}

// emitNodePolicyLocked emits np resolved against the nodes, unless that is what it emitted
// last.
func (w *Watcher) emitNodePolicyLocked(np *nodePolicy) {
	p := np.conv.resolve(w.nodes)
	fp := policyFingerprint(&p)
	if np.emitted && np.fingerprint == fp {
		return
	}
	np.emitted, np.fingerprint = true, fp
	w.pushLocked(model.PolicySet{Policy: p})
}

// notePartialLocked logs, once per version, what of a policy is not enforced as written, and
// counts it in nftpolicy_partly_enforced_objects_total{kind}.
func (w *Watcher) notePartialLocked(k objectKey, resourceVersion string, err error, ignored []string) {
	if err != nil || len(ignored) == 0 {
		delete(w.partial, k)
		return
	}
	if rv, seen := w.partial[k]; seen && rv == resourceVersion {
		return
	}
	w.partial[k] = resourceVersion
	w.log.Warn("policy not enforced as written", "kind", k.kind, "name", k.name, "condition", describeIgnored(ignored))
	if w.cfg.Metrics != nil {
		w.cfg.Metrics.PartlyEnforced.WithLabelValues(k.kind).Inc()
	}
}

// The ClusterNetworkPolicy API versions the Watcher reads, preferred first. Their schemas are
// the same; v1beta1 objects are converted as they are, v1alpha2 ones through
// ClusterNetworkPolicyV1beta1.
const (
	cnpV1beta1  = "v1beta1"
	cnpV1alpha2 = "v1alpha2"
)

// runClusterPolicies runs the ClusterNetworkPolicy informer (see the comment at the top) and
// returns whether its initial list has been delivered, or the API server found not to serve
// the resource. Before each run of the reflector a list of one object at each version, v1beta1
// first, tells which version the API server serves (discovery by the request the reflector
// makes anyway): the run reads the first served. A run ends when a list of the reflector finds
// its version gone (the CRD deleted or replaced), and the next look withdraws what the store
// held or picks the other version; a run of v1alpha2 also ends when a look every AbsentRecheck
// finds v1beta1 served (the CRD upgraded). The version read is logged when it changes and
// exported as nftpolicy_cnp_api_version{version}; the list of the new version replaces the
// store's content as the first list does, not as a relist.
func (w *Watcher) runClusterPolicies(ctx context.Context, running *gosync.WaitGroup, handler cache.ResourceEventHandler) cache.InformerSynced {
	const resource = "clusternetworkpolicies"
	res := w.watchOf(resource)
	store := &handlerStore{items: newObjectStore(), transform: w.transform, handler: handler, watch: res,
		sink: w}
	recheck := w.absentRecheck()
	lws := map[string]cache.ListerWatcherWithContext{}
	for _, v := range []string{cnpV1beta1, cnpV1alpha2} {
		lws[v] = cache.ToListerWatcherWithContext(w.cfg.Client.clusterPolicies(v))
	}
	w.setClusterPolicyVersion("")
	running.Go(func() {
		version, known := "", false // as far as the log knows
		backoff := retryBackoff()
		for ctx.Err() == nil {
			v, err := servedClusterPolicyVersion(ctx, lws)
			switch {
			case ctx.Err() != nil:
				return
			case err != nil: // the API server is away, as for any list
				res.failed("list", err)
				sleepCtx(ctx, backoff.Step())
				continue
			}
			backoff = retryBackoff()
			changed := !known || v != version
			if changed {
				w.setClusterPolicyVersion(v)
			}
			if v == "" {
				res.setIdle(true)
				if err := store.withdraw(); err != nil { // synced
					w.log.Error("withdrawing the ClusterNetworkPolicies", "err", err)
				}
				if changed {
					w.log.Info("the API server does not serve ClusterNetworkPolicies (their CRD is not installed); looking again periodically",
						"every", recheck)
				}
				version, known = v, true
				sleepCtx(ctx, recheck+rand.N(recheck/4))
				continue
			}
			res.setIdle(false)
			if changed {
				switch {
				case known && version == "":
					w.log.Info("the API server serves ClusterNetworkPolicies now", "version", v)
				case known:
					w.log.Info("the API server serves another version of ClusterNetworkPolicies now; reading it", "version", v, "was", version)
					store.fresh.Store(true) // the same objects through another version: no relist
				default:
					w.log.Info("reading ClusterNetworkPolicies", "version", v)
				}
				if v != cnpV1beta1 {
					w.log.Info("the API server does not serve ClusterNetworkPolicy v1beta1 (a CRD older than network-policy-api v0.3.0); reading v1alpha2 and looking for v1beta1 periodically",
						"every", recheck)
				}
			}
			version, known = v, true
			runCtx, cancel := context.WithCancel(ctx)
			var upgrade gosync.WaitGroup
			if v != cnpV1beta1 {
				upgrade.Go(func() {
					for sleepCtx(runCtx, recheck+rand.N(recheck/4)) {
						if _, err := lws[cnpV1beta1].ListWithContext(runCtx, metav1.ListOptions{Limit: 1, ResourceVersion: "0"}); err == nil {
							cancel()
							return
						}
					}
				})
			}
			newReflector(res, &goneListerWatcher{lw: lws[v], gone: cancel}, clusterPolicyObject(v), store).RunWithContext(runCtx)
			cancel()
			upgrade.Wait()
		}
	})
	return store.synced.Load
}

// servedClusterPolicyVersion returns the first of v1beta1 and v1alpha2 the API server serves
// ClusterNetworkPolicies at ("" for neither: no CRD), by a list of at most one object at each;
// an error when the API server did not answer.
func servedClusterPolicyVersion(ctx context.Context, lws map[string]cache.ListerWatcherWithContext) (string, error) {
	for _, v := range []string{cnpV1beta1, cnpV1alpha2} {
		_, err := lws[v].ListWithContext(ctx, metav1.ListOptions{Limit: 1, ResourceVersion: "0"})
		if err == nil {
			return v, nil
		}
		if !apierrors.IsNotFound(err) {
			return "", err
		}
	}
	return "", nil
}

// clusterPolicyObject is the type the reflector of a ClusterNetworkPolicy version lists.
func clusterPolicyObject(version string) runtime.Object {
	if version == cnpV1alpha2 {
		return &npav1alpha2.ClusterNetworkPolicy{}
	}
	return &npav1beta1.ClusterNetworkPolicy{}
}

// setClusterPolicyVersion exports the ClusterNetworkPolicy version read ("": none) as
// nftpolicy_cnp_api_version{version}.
func (w *Watcher) setClusterPolicyVersion(version string) {
	if w.cfg.Metrics == nil {
		return
	}
	for _, v := range []string{cnpV1beta1, cnpV1alpha2} {
		g := 0.0
		if v == version {
			g = 1
		}
		w.cfg.Metrics.ClusterPolicyVersion.WithLabelValues(v).Set(g)
	}
}

// goneListerWatcher lists and watches through lw and calls gone when the API server answers
// that it does not serve the resource (NotFound).
type goneListerWatcher struct {
	lw   cache.ListerWatcherWithContext
	gone func()
}

var _ cache.ListerWatcherWithContext = (*goneListerWatcher)(nil)

func (g *goneListerWatcher) List(o metav1.ListOptions) (runtime.Object, error) {
	return g.ListWithContext(context.Background(), o)
}

func (g *goneListerWatcher) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return g.WatchWithContext(context.Background(), o)
}

func (g *goneListerWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	list, err := g.lw.ListWithContext(ctx, o)
	if apierrors.IsNotFound(err) {
		g.gone()
	}
	return list, err
}

func (g *goneListerWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := g.lw.WatchWithContext(ctx, o)
	if apierrors.IsNotFound(err) {
		g.gone()
	}
	return w, err
}

// IsWatchListSemanticsUnSupported: plain lists.
func (g *goneListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// startNodesLocked starts the node informer, once.
func (w *Watcher) startNodesLocked() {
	if w.nodesStarted {
		return
	}
	w.nodesStarted = true
	res := w.watchOf("nodes")
	res.setIdle(false)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.nodeChanged(nil, obj); w.observe("nodes", obj) },
		UpdateFunc: func(oldObj, newObj any) { w.nodeChanged(oldObj, newObj); w.observe("nodes", newObj) },
		DeleteFunc: func(obj any) { w.nodeChanged(obj, nil); w.observe("nodes", obj) },
	}
	inf := newInformer(res, w.cfg.Client.listerWatcher("nodes", nil), &corev1.Node{}, w.transform, h)
	inf.store.sink = w
	inf.store.onSynced = func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.nodesSynced.Store(true)
		for _, name := range sortedKeys(w.nodePolicies, func(a, b string) bool { return a < b }) {
			w.emitNodePolicyLocked(w.nodePolicies[name])
		}
	}
	ctx := w.runCtx
	w.running.Go(func() { inf.reflector.RunWithContext(ctx) })
}

// nodesReady reports whether the node list the ClusterNetworkPolicies need has arrived.
func (w *Watcher) nodesReady() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.nodesStarted || w.nodesSynced.Load()
}

// nodeChanged follows one node (oldObj nil: added; newObj nil: deleted) and emits the
// ClusterNetworkPolicies whose node peers select it now or selected it before, when their
// resolution changed. An update that changes neither the node's labels nor its addresses
// (status heartbeats, conditions) does nothing. O(node rules of every such policy) selector
// evaluations, and a resolution (O(its node rules × nodes)) for each policy concerned.
func (w *Watcher) nodeChanged(oldObj, newObj any) {
	var name string
	var now node
	gone := newObj == nil
	if gone {
		_, n, _, ok := keyOf(oldObj)
		if !ok {
			return
		}
		name = n
	} else {
		n, ok := newObj.(*corev1.Node)
		if !ok {
			return
		}
		name, now = n.Name, convertNode(n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cfg.AutoHostEndpoints {
		w.autoHostEndpointLocked(name, newObj)
	}
	before, had := w.nodes[name]
	if gone {
		if !had {
			return
		}
		delete(w.nodes, name)
	} else {
		if had && slices.Equal(before.addrs, now.addrs) && maps.Equal(before.labels, now.labels) {
			return
		}
		w.nodes[name] = now
	}
	if !w.nodesSynced.Load() {
		return // emitted once the list is in
	}
	for _, pn := range sortedKeys(w.nodePolicies, func(a, b string) bool { return a < b }) {
		np := w.nodePolicies[pn]
		if (had && np.conv.selects(before)) || (!gone && np.conv.selects(now)) {
			w.emitNodePolicyLocked(np)
		}
	}
}

// slimNode keeps of a node what convertNode reads: name, labels, resourceVersion and its
// addresses that are IP addresses.
func slimNode(n *corev1.Node) *corev1.Node {
	out := &corev1.Node{ObjectMeta: slimMeta(&n.ObjectMeta)}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeHostName || a.Type == corev1.NodeInternalDNS || a.Type == corev1.NodeExternalDNS {
			continue
		}
		out.Status.Addresses = append(out.Status.Addresses, corev1.NodeAddress{Type: a.Type, Address: a.Address})
	}
	return out
}
