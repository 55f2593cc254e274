package sync

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// retryBackoff is how long a resource's reflector waits before listing or watching again after the
// API server failed it (connection refused, an error status, an expired resourceVersion): 250 ms,
// doubling to 2 s, each wait stretched by up to half (so at most 3 s). client-go's default grows to
// 30 s stretched by up to 100% (60 s), and resets only every 2 minutes: after an outage of 20 s its
// informers come back 15–45 s after the API server does. At this cap an agent makes at most one
// attempt per resource every 2–3 s while the API server is away, about client-go's rate before 1.27
// (one a second), and a change made after the API server's return reaches the Watcher within
// seconds (TestWatchRecoversAfterAPIServerOutage).
func retryBackoff() *wait.Backoff {
	return &wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 4, Cap: 2 * time.Second}
}

// informer is one resource's client-go Reflector with its own retry backoff (retryBackoff;
// client-go's informers take none) and the store it fills, which calls the Watcher's handlers.
type informer struct {
	reflector *cache.Reflector
	store     *handlerStore
}

func newInformer(res *resourceWatch, lw cache.ListerWatcher, object runtime.Object, transform cache.TransformFunc,
	h cache.ResourceEventHandler) *informer {
	return newStoreInformer(newHandlerStore(res, newObjectStore(), transform, h), lw, object)
}

// newStoreInformer is a reflector filling store through lw (which may deliver its initial list
// to store as it reads it: handlerStore.early).
func newStoreInformer(store *handlerStore, lw cache.ListerWatcher, object runtime.Object) *informer {
	return &informer{reflector: newReflector(store.watch, lw, object, store), store: store}
}

func newHandlerStore(res *resourceWatch, items itemStore, transform cache.TransformFunc, h cache.ResourceEventHandler) *handlerStore {
	return &handlerStore{items: items, transform: transform, handler: h, watch: res}
}

// itemStore is what a handlerStore keeps of each object its handler has received, keyed as
// client-go keys objects (cache.MetaNamespaceKeyFunc): the methods of a cache.Store it uses.
type itemStore interface {
	Get(obj any) (item any, exists bool, err error)
	GetByKey(key string) (item any, exists bool, err error)
	Add(obj any) error
	Delete(obj any) error
	ListKeys() []string
}

// recordStore is an itemStore that keeps records in a form of its own (podStore) and answers
// records made anew: it tells the record it holds by value, where others hold the object itself.
type recordStore interface {
	itemStore
	sameRecord(held, obj any) bool
}

// newObjectStore is the itemStore of every resource but pods: client-go's store, which holds
// the objects themselves.
func newObjectStore() itemStore { return cache.NewStore(cache.MetaNamespaceKeyFunc) }

// newReflector is a reflector filling store through lw, tracked in res.
func newReflector(res *resourceWatch, lw cache.ListerWatcher, object runtime.Object, store *handlerStore) *cache.Reflector {
	tracked := &trackedListerWatcher{lw: lw, ctxLW: cache.ToListerWatcherWithContext(lw), watch: res}
	return cache.NewReflectorWithOptions(tracked, object, store,
		cache.ReflectorOptions{Name: res.resource, Backoff: retryBackoff()})
}

// hasSynced reports whether the initial list has been handed to the handler.
func (i *informer) hasSynced() bool { return i.store.synced.Load() }

// handlerStore is the store a Reflector fills: it keeps what the handler last received of each
// object (the transform's result, or what podStore keeps of it) and calls the handler with every
// change, in the reflector's goroutine, as client-go's informers do from their queue
// (controller.go's processDeltas): an add or update of an object it holds is an update (old,
// new); a delete of one it does not hold is dropped; a relist (Replace) delivers each listed
// object and, for each held object the list lacks, a delete with a cache.DeletedFinalStateUnknown
// of its last state. It has no queue of its own: the handlers never block (they queue updates
// in the Watcher), so nothing waits.
//
// A relist is delivered whole or not at all to the consumer: the Watcher's sends (sink, if set)
// are held from the relist's first handler call to its last, so that none of its updates is
// sent before all of them are queued (the graph never sees a half-relisted resource). It is
// logged and counted by resourceWatch.relisted: how stale the view was, and what the list
// changed. Each list tells the sink its resourceVersion, which the view now reflects whole.
type handlerStore struct {
	items     itemStore
	transform cache.TransformFunc
	handler   cache.ResourceEventHandler
	watch     *resourceWatch
	sink      listSink
	// synced: the initial list has been delivered
	synced atomic.Bool
	// onSynced, when set, is called once the initial list has been delivered
	onSynced func()
	// fresh: the store was emptied by withdraw, so its next list starts a view anew: no relist
	fresh atomic.Bool
}

var (
	_ cache.ReflectorStore           = (*handlerStore)(nil)
	_ cache.ReflectorBookmarkStore   = (*handlerStore)(nil)
	_ cache.TransformingStore        = (*handlerStore)(nil)
	_ cache.ListerWatcherWithContext = (*trackedListerWatcher)(nil)
)

// listSink is what a store tells the Watcher of the lists it delivers: a relist holds its sends
// (holdSends, releaseSends), and each list's resourceVersion is the resource's version from then
// on (listedAt), in the batch that carries the list's updates.
type listSink interface {
	holdSends()
	releaseSends()
	listedAt(resource, resourceVersion string)
	storeSynced()
}

func (s *handlerStore) Add(obj any) error    { _, err := s.upsert(obj, false, true); return err }
func (s *handlerStore) Update(obj any) error { _, err := s.upsert(obj, false, true); return err }

// upsert delivers obj as an add or an update; stamp: count it as an event from the API server.
// It reports what obj is to the store: new, another version of a held object, the same version,
// or the very object held (delivered early): that one is not delivered again.
func (s *handlerStore) upsert(obj any, initial, stamp bool) (upserted, error) {
	obj, err := s.transform(obj)
	if err != nil {
		return 0, err
	}
	old, held, err := s.items.Get(obj)
	if err != nil {
		return 0, err
	}
	if held && s.isHeld(old, obj) {
		return upsertedItself, nil
	}
	if err := s.items.Add(obj); err != nil {
		return 0, err
	}
	if stamp {
		s.watch.received()
	}
	if held {
		s.handler.OnUpdate(old, obj)
		if sameVersion(old, obj) {
			return upsertedSame, nil
		}
		return upsertedChanged, nil
	}
	s.handler.OnAdd(obj, initial)
	return upsertedNew, nil
}

// upserted is what an object delivered to the store is to it.
type upserted int

const (
	upsertedNew upserted = iota
	upsertedChanged
	upsertedSame
	upsertedItself // the store holds obj itself: early delivered it
)

// isHeld reports whether obj is the very object held as old: the same pointer, or the same
// record for a store that keeps records in a form of its own (podStore).
func (s *handlerStore) isHeld(old, obj any) bool {
	if samePointer(old, obj) {
		return true
	}
	r, ok := s.items.(recordStore)
	return ok && r.sameRecord(old, obj)
}

// samePointer reports whether a and b are one object. Stored objects are pointers, and a
// reflector's lists and watches decode new ones, so only early's are held as they are listed.
func samePointer(a, b any) bool {
	x, y := reflect.ValueOf(a), reflect.ValueOf(b)
	return x.Kind() == reflect.Pointer && y.Kind() == reflect.Pointer && x.Pointer() == y.Pointer()
}

// sameVersion reports whether two states of an object have one resourceVersion.
func sameVersion(a, b any) bool {
	ma, errA := meta.Accessor(a)
	mb, errB := meta.Accessor(b)
	return errA == nil && errB == nil && ma.GetResourceVersion() != "" && ma.GetResourceVersion() == mb.GetResourceVersion()
}

func (s *handlerStore) Delete(obj any) error {
	obj, err := s.transform(obj)
	if err != nil {
		return err
	}
	s.watch.received()
	if _, held, err := s.items.Get(obj); err != nil || !held {
		return err
	}
	if err := s.items.Delete(obj); err != nil {
		return err
	}
	s.handler.OnDelete(obj)
	return nil
}

// early delivers one object of the initial list as soon as the list's reader has made it
// (podlist.go), before the reflector hands the whole list to Replace: the consumer takes the
// initial list's objects while the rest of the list is still being transferred and decoded,
// not after it. Replace then finds this very object held and delivers it no more. Only the
// initial list: once synced, a list is a relist, delivered whole by Replace (under holdSends),
// and early does nothing. A list that fails part-way leaves what it delivered held, and the
// next list's Replace deletes what that list lacks, as a relist does. An object early cannot
// deliver is delivered by Replace, which reports the error. It must not run concurrently with
// the store's other writers: the reflector calls Replace only once its list has returned.
func (s *handlerStore) early(obj any) {
	if s.synced.Load() {
		return
	}
	_, _ = s.upsert(obj, true, false)
}

// Replace delivers a (re)list. Objects the store holds already as they are listed (delivered
// early) are skipped. Only a list that leaves some held object unnamed builds the set of listed
// keys that tells which held objects are gone. A relist holds the Watcher's sends until it is
// delivered whole, and is logged with what it changed; the initial list needs no hold (nothing
// reaches the dataplane before in-sync, which follows it).
func (s *handlerStore) Replace(list []any, resourceVersion string) error {
	lastHeard := s.watch.listed()
	initial := !s.synced.Load()
	relist := !initial && !s.fresh.Swap(false)
	if !initial && s.sink != nil {
		s.sink.holdSends()
		defer s.sink.releaseSends()
	}
	var n relistCounts
	if err := s.deliverList(list, initial, &n); err != nil {
		return err
	}
	if s.sink != nil && resourceVersion != "" {
		// the last object delivered need not be the newest: the list's version vouches for all
		s.sink.listedAt(s.watch.resource, resourceVersion)
	}
	if relist {
		s.watch.relisted(lastHeard, n)
	}
	s.markSynced()
	return nil
}

// markSynced notes that the initial list has been delivered: onSynced, then the sink, once.
func (s *handlerStore) markSynced() {
	if s.synced.Swap(true) {
		return
	}
	if s.onSynced != nil {
		s.onSynced()
	}
	if s.sink != nil {
		s.sink.storeSynced()
	}
}

// withdraw deletes every held object, as a relist that lists none would, but is no relist: the
// API server does not serve the resource any more (ClusterNetworkPolicies whose CRD is gone),
// and the next list starts the view anew. The store counts as synced.
func (s *handlerStore) withdraw() error {
	s.watch.listed() // the API server answered the list that found the resource gone
	if s.sink != nil {
		s.sink.holdSends()
		defer s.sink.releaseSends()
	}
	if err := s.deliverList(nil, false, &relistCounts{}); err != nil {
		return err
	}
	s.fresh.Store(true)
	s.markSynced()
	return nil
}

// relistCounts is what a relist changed in the store.
type relistCounts struct{ listed, added, changed, deleted int }

// deliverList delivers each listed object (but those the store holds as they are: early) and a
// delete of each held object the list lacks, counting them in n. A list names each object once,
// so when every held object was among those listed no held object is gone: the listed keys are
// collected only otherwise. It costs O(listed + held).
func (s *handlerStore) deliverList(list []any, initial bool, n *relistCounts) error {
	held := s.items.ListKeys()
	n.listed = len(list)
	wasHeld := 0 // listed objects the store held before this list
	for _, obj := range list {
		obj, err := s.transform(obj)
		if err != nil {
			return err
		}
		u, err := s.upsert(obj, initial, false)
		if err != nil {
			return err
		}
		switch u {
		case upsertedNew:
			n.added++
		case upsertedChanged:
			n.changed++
			wasHeld++
		case upsertedSame, upsertedItself:
			wasHeld++
		}
	}
	if wasHeld == len(held) {
		return nil
	}
	listed := make(map[string]struct{}, len(list))
	for _, obj := range list {
		// the key of the object as listed: a transform keeps namespace and name
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return err
		}
		listed[key] = struct{}{}
	}
	for _, key := range held {
		if _, ok := listed[key]; ok {
			continue
		}
		old, held, err := s.items.GetByKey(key)
		if err != nil || !held {
			continue
		}
		if err := s.items.Delete(old); err != nil {
			return err
		}
		n.deleted++
		s.handler.OnDelete(cache.DeletedFinalStateUnknown{Key: key, Obj: old})
	}
	return nil
}

// Resync is never called: the reflector has no resync period.
func (s *handlerStore) Resync() error { return nil }

// Bookmark notes that the API server is still there (a bookmark carries no object).
func (s *handlerStore) Bookmark(string) error {
	s.watch.received()
	return nil
}

// Transformer lets the reflector transform what a streaming list (WatchListClient) collects
// before Replace; the transform is idempotent.
func (s *handlerStore) Transformer() cache.TransformFunc { return s.transform }

// resourceWatch is the state of one resource's watch: whether one is open, since when none is,
// and its metrics and log lines.
//
// A watch request the API server accepts counts as open at once. It is a real watch once it has
// delivered something or lasted confirmAfter (client-go's "very short watch" bound); one that
// ends sooner with nothing delivered was a failed attempt, and the outage it interrupted goes
// on: client-go hands out an empty, closed watch for a request whose connection ended (a proxy
// or load balancer before a dead API server accepts and closes; after 10 retries a second
// apart), and the streaming-list attempt of a reflector ends that way where the API server
// cannot stream lists. Restarts are counted, and reopening after failures logged, when a watch
// proves real.
type resourceWatch struct {
	resource     string
	log          *slog.Logger
	confirmAfter time.Duration
	// generation counts the watches opened; the open one is this generation's, if any
	generation atomic.Int64
	// downSince is when the outage began: the end of the last real watch (or New), in Unix
	// nanoseconds; 0 while a watch is open
	downSince atomic.Int64
	// unconfirmed: a watch is open that has not proved real yet
	unconfirmed atomic.Bool
	// idle: the resource is not watched, and its watch is not missed: the API server does not
	// serve it (ClusterNetworkPolicies without their CRD), or nothing needs it (Nodes without a
	// node peer)
	idle atomic.Bool

	mu          gosync.Mutex
	openedAt    time.Time // of the open watch
	outageStart int64     // downSince when the open watch opened
	streaming   bool      // the open watch is a streaming list's (SendInitialEvents)
	// streamOpened: a streaming list's watch opened since the last list was delivered or a plain
	// one requested; the list the reflector delivers next is that stream's, unless a plain list
	// is requested first
	streamOpened bool
	// fallbackLogged: a fallback from a streaming list to a plain one has been logged
	fallbackLogged bool
	real           int       // watches that proved real
	failures       int       // failed lists and watches since a watch last proved real, for the log
	logged         time.Time // when a failure was last logged
	// heard is when the API server last sent something of the resource (a list, an event or a
	// bookmark), in Unix nanoseconds; 0 before the first
	heard atomic.Int64

	// the resource's children of the Watcher's metrics; nil without metrics
	open      prometheus.Gauge
	restarts  prometheus.Counter
	lists     prometheus.Counter
	streamed  prometheus.Gauge
	lastEvent prometheus.Gauge
	relists   prometheus.Counter
	staleness prometheus.Observer
}

func newResourceWatch(resource string, log *slog.Logger, m *Metrics, now time.Time) *resourceWatch {
	r := &resourceWatch{resource: resource, log: log, confirmAfter: time.Second}
	r.downSince.Store(now.UnixNano())
	if m != nil {
		r.open = m.WatchOpen.WithLabelValues(resource)
		r.restarts = m.WatchRestarts.WithLabelValues(resource)
		r.lists = m.Lists.WithLabelValues(resource)
		r.streamed = m.Streaming.WithLabelValues(resource)
		r.streamed.Set(0)
		r.lastEvent = m.LastEvent.WithLabelValues(resource)
		r.relists = m.Relists.WithLabelValues(resource)
		r.staleness = m.RelistStaleness.WithLabelValues(resource)
		r.open.Set(0)
	}
	return r
}

// down reports how long no watch of the resource has been open at now (0 while one is, and
// while the resource is idle).
func (r *resourceWatch) down(now time.Time) time.Duration {
	since := r.downSince.Load()
	if since == 0 || r.idle.Load() {
		return 0
	}
	return now.Sub(time.Unix(0, since))
}

// setIdle marks the resource idle (see resourceWatch.idle), or watched from now on; an idle
// resource's outage, if any, ends, and a resource watched again counts as down until its first
// watch opens.
func (r *resourceWatch) setIdle(idle bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idle.Swap(idle) == idle {
		return
	}
	r.failures = 0
	if !idle && r.downSince.Load() == 0 {
		return
	}
	r.downSince.Store(time.Now().UnixNano())
}

// opened records a watch that the API server accepted and returns its generation; streaming:
// a streaming list's.
func (r *resourceWatch) opened(streaming bool) int64 {
	now := time.Now()
	gen := r.generation.Add(1)
	r.mu.Lock()
	r.openedAt, r.outageStart, r.streaming = now, r.downSince.Swap(0), streaming
	r.streamOpened = r.streamOpened || streaming
	r.unconfirmed.Store(true)
	r.mu.Unlock()
	r.setOpen(1)
	time.AfterFunc(r.confirmAfter, func() { r.confirm(gen) })
	return gen
}

// confirm records that the watch of generation gen, if still open, is real.
func (r *resourceWatch) confirm(gen int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.generation.Load() == gen && r.downSince.Load() == 0 {
		r.confirmLocked()
	}
}

func (r *resourceWatch) confirmLocked() {
	if !r.unconfirmed.Swap(false) {
		return
	}
	r.real++
	if r.real > 1 && r.restarts != nil {
		r.restarts.Inc()
	}
	if r.outageStart != 0 {
		down := r.openedAt.Sub(time.Unix(0, r.outageStart)).Round(time.Millisecond)
		switch {
		case r.failures > 0:
			r.log.Info("watch of the API server reopened", "resource", r.resource, "down", down, "failed_attempts", r.failures)
		case r.real > 1:
			r.log.Debug("watch restarted", "resource", r.resource, "down", down)
		}
	}
	r.failures = 0
}

// closed records that the watch of generation gen has ended, unless a newer one is open.
func (r *resourceWatch) closed(gen int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.generation.Load() != gen || r.downSince.Load() != 0 {
		return
	}
	now := time.Now()
	r.setOpen(0)
	if now.Sub(r.openedAt) >= r.confirmAfter {
		r.confirmLocked()
	}
	if !r.unconfirmed.Swap(false) {
		r.downSince.Store(now.UnixNano())
		return
	}
	// ended at once with nothing delivered: the outage goes on
	start := r.outageStart
	if start == 0 {
		start = now.UnixNano()
	}
	r.downSince.Store(start)
	if !r.streaming {
		r.failedLocked("watch", errWatchEnded, now)
	}
}

var errWatchEnded = errors.New("the watch ended as soon as it opened, with nothing received")

// failed records a list or watch the API server did not answer or refused.
func (r *resourceWatch) failed(op string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failedLocked(op, err, time.Now())
}

// failedLocked counts a failure. The first after a real watch is logged, and then one a minute
// while they go on.
func (r *resourceWatch) failedLocked(op string, err error, now time.Time) {
	r.failures++
	if r.failures == 1 || now.Sub(r.logged) >= time.Minute {
		r.logged = now
		r.log.Warn("cannot "+op+" through the API server; retrying", "resource", r.resource, "failed_attempts", r.failures, "err", err)
	}
}

// listing records that the reflector requests a plain list and reports whether a streaming
// list's watch opened since the last list was delivered or requested: the reflector falls back to a plain list when
// the API server ends the stream with an error — it cannot stream lists when its etcd lacks
// progress notifications (RequestWatchProgress: etcd before 3.5.13).
func (r *resourceWatch) listing() (afterStream bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	afterStream, r.streamOpened = r.streamOpened, false
	return afterStream
}

// fellBack records a plain list the API server answered after a streaming list's watch: logged
// once per resource, at Info (the view is complete either way; a plain list of many objects
// costs the API server one answer it builds whole).
func (r *resourceWatch) fellBack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fallbackLogged {
		r.fallbackLogged = true
		r.log.Info("API server cannot stream lists; listing", "resource", r.resource)
	}
}

// listed records a completed list and returns when the API server was last heard of before it
// (Unix nanoseconds, 0: never). The list was streamed when a streaming list's watch opened since
// the last list was delivered or a plain one requested.
func (r *resourceWatch) listed() (lastHeard int64) {
	if r.lists != nil {
		r.lists.Inc()
	}
	r.mu.Lock()
	streamed := r.streamOpened
	r.streamOpened = false
	r.mu.Unlock()
	if r.streamed != nil {
		v := 0.0
		if streamed {
			v = 1
		}
		r.streamed.Set(v)
	}
	return r.received()
}

// relisted logs and counts a relist, which the reflector makes when its watch could not resume
// (an expired resourceVersion — 410 Gone, "too old resource version" — after a compaction or an
// API server restart, or a watch that failed otherwise): the view of the resource was stale from
// the last thing heard of it before the list (lastHeard) until the list, and n is what the list
// changed. It is a warning when the list changed anything: changes had been missed.
func (r *resourceWatch) relisted(lastHeard int64, n relistCounts) {
	var stale time.Duration
	if lastHeard != 0 {
		stale = time.Since(time.Unix(0, lastHeard))
	}
	if r.relists != nil {
		r.relists.Inc()
		r.staleness.Observe(stale.Seconds())
	}
	level := slog.LevelInfo
	if n.added+n.changed+n.deleted > 0 {
		level = slog.LevelWarn
	}
	r.log.Log(context.Background(), level, "watch could not resume; relisted", "resource", r.resource,
		"stale", stale.Round(time.Millisecond), "listed", n.listed, "added", n.added, "changed", n.changed, "deleted", n.deleted)
}

// received records that the API server sent something: a list, an event or a bookmark, and
// returns when it was last heard of before (Unix nanoseconds, 0: never). The first event of a
// watch proves it real.
func (r *resourceWatch) received() (lastHeard int64) {
	lastHeard = r.heard.Swap(time.Now().UnixNano())
	if r.lastEvent != nil {
		r.lastEvent.SetToCurrentTime()
	}
	if r.unconfirmed.Load() {
		r.confirm(r.generation.Load())
	}
	return lastHeard
}

func (r *resourceWatch) setOpen(v float64) {
	if r.open != nil {
		r.open.Set(v)
	}
}

// trackedListerWatcher lists and watches through lw, recording in watch when a watch is open.
type trackedListerWatcher struct {
	lw    cache.ListerWatcher
	ctxLW cache.ListerWatcherWithContext // lw
	watch *resourceWatch
}

func (t *trackedListerWatcher) List(o metav1.ListOptions) (runtime.Object, error) {
	return t.ListWithContext(context.Background(), o)
}

func (t *trackedListerWatcher) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return t.WatchWithContext(context.Background(), o)
}

func (t *trackedListerWatcher) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	afterStream := t.watch.listing()
	list, err := t.ctxLW.ListWithContext(ctx, o)
	if err != nil {
		if ctx.Err() == nil {
			t.watch.failed("list", err)
		}
		return list, err
	}
	if afterStream {
		t.watch.fellBack()
	}
	return list, nil
}

func (t *trackedListerWatcher) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := t.ctxLW.WatchWithContext(ctx, o)
	if err != nil {
		if ctx.Err() == nil {
			t.watch.failed("watch", err)
		}
		return nil, err
	}
	streaming := o.SendInitialEvents != nil && *o.SendInitialEvents
	return &trackedWatch{Interface: w, watch: t.watch, generation: t.watch.opened(streaming)}, nil
}

// IsWatchListSemanticsUnSupported passes on whether lw's client can stream lists.
func (t *trackedListerWatcher) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(t.lw)
}

// trackedWatch is an open watch; the reflector stops every watch once it has ended.
type trackedWatch struct {
	watch.Interface
	watch      *resourceWatch
	generation int64
}

func (w *trackedWatch) Stop() {
	w.Interface.Stop()
	w.watch.closed(w.generation)
}
