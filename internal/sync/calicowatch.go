package sync

import (
	"context"
	"math/rand/v2"
	"reflect"
	gosync "sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The Watcher's view of Calico's policy API (projectcalico.org/v3) and of ServiceAccounts.
//
// Calico's five kinds are optional, each on its own: the API server serves them while their
// CRDs (deploy/crds/calico) or Calico's API server are installed. Each is read as
// ClusterNetworkPolicies are (cnpwatch.go): a list of one object tells whether it is served;
// while it is not, the Watcher holds none of its objects (those it held are withdrawn), counts
// the resource as in sync and idle, and looks again every Config.AbsentRecheck, so installing
// the CRDs later needs no restart.
//
// Tiers and network sets are few: the Watcher keeps what it last emitted of each (calicoState)
// and emits changes only. Policies are cached as policyRecords and emitted by policyChanged, as
// NetworkPolicies are. A policy whose tier does not exist is emitted all the same (the graph
// enforces it once the tier exists): once every Calico resource has been listed, such a
// policy is logged and counted as invalid, once per policy and tier, and the tier's arrival is
// logged too.
//
// ServiceAccounts are always watched (their metadata only): Calico's serviceAccounts peers
// select by their labels.

// calicoResource is a resource of Calico's API the Watcher reads.
type calicoResource struct {
	resource string         // as the API names it
	object   runtime.Object // what its reflector lists
}

// name is the resource as SourceVersion, the logs and the metrics name it: with its group, so
// that Calico's networkpolicies are not Kubernetes'.
func (r calicoResource) name() string { return r.resource + "." + CalicoGroupVersion.Group }

func calicoResources() []calicoResource {
	return []calicoResource{
		{"tiers", &CalicoTier{}},
		{"globalnetworkpolicies", &GlobalNetworkPolicy{}},
		{"networkpolicies", &CalicoNetworkPolicy{}},
		{"globalnetworksets", &GlobalNetworkSet{}},
		{"networksets", &CalicoNetworkSet{}},
		{"hostendpoints", &HostEndpoint{}},
	}
}

// calicoWatchedResources are the names of the resources calicowatch.go reads.
func calicoWatchedResources() []string {
	names := []string{"serviceaccounts"}
	for _, r := range calicoResources() {
		names = append(names, r.name())
	}
	return names
}

// calicoState is what the Watcher last emitted of Calico's tiers and network sets, and of
// service accounts, and the policies it found without their tier. Guarded by Watcher.mu.
type calicoState struct {
	tiers map[string]model.Tier // by Calico name; built-in tiers are not emitted
	// hosts: every valid host endpoint; emittedHosts those emitted, one per node's interface;
	// losing the names of those not enforced for another holding their interface (logged)
	hosts           hostClaims
	emittedHosts    map[hostSlot]model.Endpoint
	losing          map[string]struct{}
	netsets         map[model.NetworkSetKey]model.NetworkSet
	serviceAccounts map[[2]string]model.ServiceAccount
	// policyTiers: the model tier of each Calico policy in force; missingTier: those whose tier
	// was found missing and logged (the tier's model name)
	policyTiers map[model.PolicyKey]string
	missingTier map[model.PolicyKey]string
	// listed counts the Calico resources whose initial list has been delivered
	listed int
}

func newCalicoState() calicoState {
	return calicoState{tiers: map[string]model.Tier{}, hosts: newHostClaims(), emittedHosts: map[hostSlot]model.Endpoint{},
		losing: map[string]struct{}{}, netsets: map[model.NetworkSetKey]model.NetworkSet{},
		serviceAccounts: map[[2]string]model.ServiceAccount{}, policyTiers: map[model.PolicyKey]string{},
		missingTier: map[model.PolicyKey]string{}}
}

// eventHandler makes the event handler of a resource (Run's).
type eventHandler func(resource string, change func(oldObj, newObj any), del func(obj any)) cache.ResourceEventHandlerFuncs

// runCalico starts the ServiceAccount informer and the runs of Calico's resources, and returns
// whether each has delivered its initial list (or been found not served).
func (w *Watcher) runCalico(ctx context.Context, running *gosync.WaitGroup, handler eventHandler) []cache.InformerSynced {
	sa := newInformer(w.watchOf("serviceaccounts"), w.cfg.Client.listerWatcher("serviceaccounts", nil), &corev1.ServiceAccount{},
		w.transform, handler("serviceaccounts", ignoreOld(w.setServiceAccount), w.deleteServiceAccount))
	sa.store.sink = w
	running.Go(func() { sa.reflector.RunWithContext(ctx) })
	synced := []cache.InformerSynced{sa.hasSynced}
	for _, r := range calicoResources() {
		var change func(oldObj, newObj any)
		var del func(obj any)
		switch r.resource {
		case "tiers":
			change, del = w.calicoTierChanged, w.calicoTierDeleted
		case "globalnetworkpolicies":
			change, del = w.calicoPolicyChanged(KindGlobalNetworkPolicy), w.calicoPolicyDeleted(KindGlobalNetworkPolicy)
		case "networkpolicies":
			change, del = w.calicoPolicyChanged(KindCalicoNetworkPolicy), w.calicoPolicyDeleted(KindCalicoNetworkPolicy)
		case "hostendpoints":
			change, del = w.hostEndpointChanged, w.hostEndpointDeleted
		default:
			change, del = w.networkSetChanged, w.networkSetDeleted
		}
		synced = append(synced, w.runOptional(ctx, running, r.name(), w.cfg.Client.calico(r.resource), r.object,
			handler(r.name(), change, del)))
	}
	return synced
}

// runOptional runs the informer of a resource the API server may not serve (see the comment at
// the top): before each run of its reflector a list of one object tells whether it is served;
// a run ends when a list or watch finds it gone. Withdrawing its objects, and the list when
// it is served again, are no relists.
func (w *Watcher) runOptional(ctx context.Context, running *gosync.WaitGroup, name string, lw cache.ListerWatcher,
	object runtime.Object, handler cache.ResourceEventHandler) cache.InformerSynced {
	res := w.watchOf(name)
	store := &handlerStore{items: newObjectStore(), transform: w.transform, handler: handler, watch: res,
		sink: w, onSynced: w.calicoListed}
	recheck := w.absentRecheck()
	ctxLW := cache.ToListerWatcherWithContext(lw)
	running.Go(func() {
		known, served := false, false // as far as the log knows
		backoff := retryBackoff()
		for ctx.Err() == nil {
			_, err := ctxLW.ListWithContext(ctx, metav1.ListOptions{Limit: 1, ResourceVersion: "0"})
			switch {
			case ctx.Err() != nil:
				return
			case err != nil && !apierrors.IsNotFound(err): // the API server is away, as for any list
				res.failed("list", err)
				sleepCtx(ctx, backoff.Step())
				continue
			}
			backoff = retryBackoff()
			if err != nil { // not served
				res.setIdle(true)
				if err := store.withdraw(); err != nil {
					w.log.Error("withdrawing the objects of a resource no longer served", "resource", name, "err", err)
				}
				if !known || served {
					w.log.Info("the API server does not serve this resource (its CRD is not installed); looking again periodically",
						"resource", name, "every", recheck)
				}
				known, served = true, false
				sleepCtx(ctx, recheck+rand.N(recheck/4))
				continue
			}
			res.setIdle(false)
			if known && !served {
				w.log.Info("the API server serves this resource now", "resource", name)
			}
			known, served = true, true
			runCtx, cancel := context.WithCancel(ctx)
			newReflector(res, &goneListerWatcher{lw: ctxLW, gone: cancel}, object, store).RunWithContext(runCtx)
			cancel()
		}
	})
	return store.synced.Load
}

// absentRecheck is how often a resource the API server does not serve is looked for again.
func (w *Watcher) absentRecheck() time.Duration {
	if w.cfg.AbsentRecheck <= 0 {
		return defaultAbsentRecheck
	}
	return w.cfg.AbsentRecheck
}

// sleepCtx waits d, or less when ctx is done first; it reports whether it waited d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// transformCalico is the informers' transform of Calico's kinds and ServiceAccounts: policies
// as their records, tiers and network sets and service accounts without what their conversion
// does not read. ok is false for other objects.
func (w *Watcher) transformCalico(obj any) (out any, ok bool) {
	switch o := obj.(type) {
	case *GlobalNetworkPolicy:
		p, ignored, err := ConvertGlobalNetworkPolicy(o)
		return w.recordCalicoPolicy(&o.ObjectMeta, p, ignored, err), true
	case *CalicoNetworkPolicy:
		p, ignored, err := ConvertCalicoNetworkPolicy(o)
		return w.recordCalicoPolicy(&o.ObjectMeta, p, ignored, err), true
	case *CalicoTier:
		return &CalicoTier{ObjectMeta: slimMeta(&o.ObjectMeta), Spec: o.Spec}, true
	case *GlobalNetworkSet:
		return &GlobalNetworkSet{ObjectMeta: slimMeta(&o.ObjectMeta), Spec: o.Spec}, true
	case *CalicoNetworkSet:
		return &CalicoNetworkSet{ObjectMeta: slimMeta(&o.ObjectMeta), Spec: o.Spec}, true
	case *HostEndpoint:
		return &HostEndpoint{ObjectMeta: slimMeta(&o.ObjectMeta), Spec: o.Spec}, true
	case *corev1.ServiceAccount:
		return &corev1.ServiceAccount{ObjectMeta: slimMeta(&o.ObjectMeta)}, true
	}
	return nil, false
}

// recordCalicoPolicy is the record of a converted Calico policy, as recordPolicy makes one of
// a NetworkPolicy.
func (w *Watcher) recordCalicoPolicy(m *metav1.ObjectMeta, p model.Policy, ignored []string, err error) *policyRecord {
	ns := w.names.intern(m.Namespace)
	r := &policyRecord{recordMeta: newRecordMeta(ns, m.Name, m.ResourceVersion), err: err, ignored: ignored}
	if err == nil {
		p.Key.Namespace, p.Namespace = ns, ns
		r.fingerprint = policyFingerprint(&p)
		r.pending.Store(&p)
	}
	return r
}

// calicoPolicyChanged returns the handler of changes of a Calico policy kind: policyChanged's,
// with what is not enforced as written logged (notePartialLocked) and its tier checked.
func (w *Watcher) calicoPolicyChanged(kind string) func(oldObj, newObj any) {
	changed := w.policyChanged(kind)
	return func(oldObj, newObj any) {
		r, ok := newObj.(*policyRecord)
		if !ok {
			return
		}
		var tier string
		if p := r.pending.Load(); p != nil {
			tier = p.Tier
		}
		changed(oldObj, newObj)
		key := model.PolicyKey{Kind: kind, Namespace: r.ns(), Name: r.name()}
		w.mu.Lock()
		defer w.mu.Unlock()
		w.notePartialLocked(objectKey{kind, r.ns(), r.name()}, r.version(), r.err, r.ignored)
		switch {
		case r.err != nil:
			w.forgetPolicyTierLocked(key)
		case tier != "":
			w.calico.policyTiers[key] = tier
			w.checkTierLocked(key)
		}
	}
}

// calicoPolicyDeleted returns the handler of deletes of a Calico policy kind.
func (w *Watcher) calicoPolicyDeleted(kind string) func(obj any) {
	deleted := w.deletePolicy(kind)
	return func(obj any) {
		ns, name, _, ok := keyOf(obj)
		if !ok {
			return
		}
		w.mu.Lock()
		delete(w.partial, objectKey{kind, ns, name})
		w.forgetPolicyTierLocked(model.PolicyKey{Kind: kind, Namespace: ns, Name: name})
		w.mu.Unlock()
		deleted(obj)
	}
}

func (w *Watcher) forgetPolicyTierLocked(k model.PolicyKey) {
	delete(w.calico.policyTiers, k)
	delete(w.calico.missingTier, k)
}

// calicoListed notes that a Calico resource has delivered its initial list; once all have,
// the policies are checked for their tiers.
func (w *Watcher) calicoListed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calico.listed++
	if w.calico.listed != len(calicoResources()) {
		return
	}
	for _, k := range sortedKeys(w.calico.policyTiers, func(a, b model.PolicyKey) bool { return a.String() < b.String() }) {
		w.checkTierLocked(k)
	}
}

// tierExistsLocked reports whether the model tier name exists: a built-in, or a Calico tier
// emitted.
func (w *Watcher) tierExistsLocked(name string) bool {
	for _, t := range model.DefaultTiers() {
		if t.Name == name {
			return true
		}
	}
	for _, t := range w.calico.tiers {
		if t.Name == name {
			return true
		}
	}
	return false
}

// checkTierLocked logs and counts, once per tier, a Calico policy whose tier does not exist
// (once every Calico resource is listed), and logs that it exists again.
func (w *Watcher) checkTierLocked(k model.PolicyKey) {
	tier, ok := w.calico.policyTiers[k]
	if !ok || w.calico.listed < len(calicoResources()) {
		return
	}
	missing, logged := w.calico.missingTier[k]
	switch {
	case w.tierExistsLocked(tier):
		if logged {
			delete(w.calico.missingTier, k)
			w.log.Info("the tier of a policy exists now; enforced", "kind", k.Kind, "namespace", k.Namespace, "name", k.Name, "tier", tier)
		}
	case !logged || missing != tier:
		w.calico.missingTier[k] = tier
		w.log.Warn("policy's tier does not exist; not enforced until it does", "kind", k.Kind, "namespace", k.Namespace, "name", k.Name,
			"tier", tier)
		if w.cfg.Metrics != nil {
			w.cfg.Metrics.InvalidObjects.WithLabelValues(k.Kind).Inc()
		}
	}
}

// checkTiersLocked checks every Calico policy of the model tier name.
func (w *Watcher) checkTiersLocked(name string) {
	for _, k := range sortedKeys(w.calico.policyTiers, func(a, b model.PolicyKey) bool { return a.String() < b.String() }) {
		if w.calico.policyTiers[k] == name {
			w.checkTierLocked(k)
		}
	}
}

// calicoTierChanged emits the change of a Calico tier: TierSet when it converts to another tier
// than was emitted, TierDeleted when a version that was emitted is followed by an invalid one.
// Calico's built-in tiers emit nothing (the model has them).
func (w *Watcher) calicoTierChanged(_, obj any) {
	t, ok := obj.(*CalicoTier)
	if !ok {
		return
	}
	tier, builtin, err := ConvertCalicoTier(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkedLocked(objectKey{calicoKindTier, "", t.Name}, t.ResourceVersion, err)
	old, had := w.calico.tiers[t.Name]
	switch {
	case err != nil || builtin:
		if had {
			delete(w.calico.tiers, t.Name)
			w.pushLocked(model.TierDeleted{Name: old.Name})
			w.checkTiersLocked(old.Name)
		}
	case had && old == tier:
	default:
		w.calico.tiers[t.Name] = tier
		w.pushLocked(model.TierSet{Tier: tier})
		w.checkTiersLocked(tier.Name)
	}
}

func (w *Watcher) calicoTierDeleted(obj any) {
	_, name, _, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.invalid, objectKey{calicoKindTier, "", name})
	if old, had := w.calico.tiers[name]; had {
		delete(w.calico.tiers, name)
		w.pushLocked(model.TierDeleted{Name: old.Name})
		w.checkTiersLocked(old.Name)
	}
}

// convertAnyNetworkSet converts a GlobalNetworkSet or a Calico NetworkSet; ok is false for
// another object.
func convertAnyNetworkSet(obj any) (kind string, m *metav1.ObjectMeta, s model.NetworkSet, ignored []string, err error, ok bool) {
	switch o := obj.(type) {
	case *GlobalNetworkSet:
		s, ignored, err = ConvertGlobalNetworkSet(o)
		return calicoKindGlobalNetworkSet, &o.ObjectMeta, s, ignored, err, true
	case *CalicoNetworkSet:
		s, ignored, err = ConvertCalicoNetworkSet(o)
		return "NetworkSet.projectcalico.org", &o.ObjectMeta, s, ignored, err, true
	}
	return "", nil, model.NetworkSet{}, nil, nil, false
}

// networkSetChanged emits the change of a network set: NetworkSetSet when it converts to
// another set than was emitted, NetworkSetDeleted when an emitted one turns invalid.
func (w *Watcher) networkSetChanged(_, obj any) {
	kind, m, s, ignored, err, ok := convertAnyNetworkSet(obj)
	if !ok {
		return
	}
	key := model.NetworkSetKey{Namespace: m.Namespace, Name: m.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkedLocked(objectKey{kind, m.Namespace, m.Name}, m.ResourceVersion, err)
	w.notePartialLocked(objectKey{kind, m.Namespace, m.Name}, m.ResourceVersion, err, ignored)
	old, had := w.calico.netsets[key]
	switch {
	case err != nil:
		if had {
			delete(w.calico.netsets, key)
			w.pushLocked(model.NetworkSetDeleted{Key: key})
		}
	case had && reflect.DeepEqual(old, s):
	default:
		w.calico.netsets[key] = s
		w.pushLocked(model.NetworkSetSet{NetworkSet: s})
	}
}

func (w *Watcher) networkSetDeleted(obj any) {
	ns, name, _, ok := keyOf(obj)
	if !ok {
		return
	}
	kind := calicoKindGlobalNetworkSet
	if ns != "" {
		kind = "NetworkSet.projectcalico.org"
	}
	key := model.NetworkSetKey{Namespace: ns, Name: name}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.invalid, objectKey{kind, ns, name})
	delete(w.partial, objectKey{kind, ns, name})
	if _, had := w.calico.netsets[key]; had {
		delete(w.calico.netsets, key)
		w.pushLocked(model.NetworkSetDeleted{Key: key})
	}
}

// setServiceAccount emits a service account whose labels changed (ServiceAccountSet).
func (w *Watcher) setServiceAccount(obj any) {
	sa, ok := obj.(*corev1.ServiceAccount)
	if !ok {
		return
	}
	m := model.ServiceAccount{Namespace: sa.Namespace, Name: sa.Name, Labels: sa.Labels}
	key := [2]string{sa.Namespace, sa.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, had := w.calico.serviceAccounts[key]; had && reflect.DeepEqual(old, m) {
		return
	}
	w.calico.serviceAccounts[key] = m
	w.pushLocked(model.ServiceAccountSet{ServiceAccount: m})
}

func (w *Watcher) deleteServiceAccount(obj any) {
	ns, name, _, ok := keyOf(obj)
	if !ok {
		return
	}
	key := [2]string{ns, name}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, had := w.calico.serviceAccounts[key]; had {
		delete(w.calico.serviceAccounts, key)
		w.pushLocked(model.ServiceAccountDeleted{Namespace: ns, Name: name})
	}
}

// hostEndpointChanged converts a HostEndpoint and emits what changes of the host endpoints of
// its node's interface (setHostLocked).
func (w *Watcher) hostEndpointChanged(_, obj any) {
	h, ok := obj.(*HostEndpoint)
	if !ok {
		return
	}
	ep, ignored, err := ConvertHostEndpoint(h)
	k := objectKey{calicoKindHostEndpoint, "", h.Name}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkedLocked(k, h.ResourceVersion, err)
	w.notePartialLocked(k, h.ResourceVersion, err, ignored)
	if err != nil {
		w.setHostLocked(h.Name, nil)
		return
	}
	w.setHostLocked(h.Name, &ep)
}

func (w *Watcher) hostEndpointDeleted(obj any) {
	_, name, _, ok := keyOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.invalid, objectKey{calicoKindHostEndpoint, "", name})
	delete(w.partial, objectKey{calicoKindHostEndpoint, "", name})
	w.setHostLocked(name, nil)
}
