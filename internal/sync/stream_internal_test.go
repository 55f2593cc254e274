package sync

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// lockedBuffer is a log destination that the reflector's goroutine and the test share.
type lockedBuffer struct {
	mu gosync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// streamListerWatcher answers like an API server that streams lists (canStream) or like one
// whose etcd lacks progress notifications: the streaming list's watch is accepted and ends with
// the API server's error event, after which the reflector lists.
type streamListerWatcher struct {
	canStream bool
	mu        gosync.Mutex
	lists     int
}

func (s *streamListerWatcher) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.lists++
	s.mu.Unlock()
	return &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "10"},
		Items: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "5"}}}}, nil
}

func (s *streamListerWatcher) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFakeWithChanSize(3, false)
	if o.SendInitialEvents == nil || !*o.SendInitialEvents {
		return w, nil // stays open, quiet
	}
	if !s.canStream { // the API server's cacher: newErrWatcher
		err := apierrors.NewInternalError(fmt.Errorf("a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled"))
		w.Error(&err.ErrStatus)
		w.Stop()
		return w, nil
	}
	w.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "5"}})
	w.Action(watch.Bookmark, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "10",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
	return w, nil
}

// TestStreamingListOrFallback: a reflector streams its initial list where the API server can
// (nftpolicy_watch_streaming 1, nothing logged); where it cannot, the reflector lists instead,
// which is logged once at Info and exported as nftpolicy_watch_streaming 0.
func TestStreamingListOrFallback(t *testing.T) {
	for _, canStream := range []bool{true, false} {
		t.Run(fmt.Sprintf("canStream=%v", canStream), func(t *testing.T) {
			var logs lockedBuffer
			m := NewMetrics(nil)
			res := newResourceWatch("namespaces", slog.New(slog.NewTextHandler(&logs, nil)), m, time.Now())
			store := &handlerStore{items: cache.NewStore(cache.MetaNamespaceKeyFunc), transform: func(o any) (any, error) { return o, nil },
				handler: cache.ResourceEventHandlerFuncs{}, watch: res}
			lw := &streamListerWatcher{canStream: canStream}
			r := newReflector(res, &cache.ListWatch{ListWithContextFunc: lw.ListWithContext, WatchFuncWithContext: lw.WatchWithContext},
				&corev1.Namespace{}, store)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); r.RunWithContext(ctx) }()
			defer func() { cancel(); <-done }()
			for deadline := time.Now().Add(10 * time.Second); !store.synced.Load(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the reflector did not deliver its initial list")
				}
			}
			if _, held, _ := store.items.GetByKey("a"); !held {
				t.Error("namespace a not delivered")
			}
			want, wantLists, wantLogs := 1.0, 0, 0
			if !canStream {
				want, wantLists, wantLogs = 0, 1, 1
			}
			if got := testutil.ToFloat64(m.Streaming.WithLabelValues("namespaces")); got != want {
				t.Errorf("nftpolicy_watch_streaming %v, want %v", got, want)
			}
			lw.mu.Lock()
			lists := lw.lists
			lw.mu.Unlock()
			if lists != wantLists {
				t.Errorf("%d plain lists, want %d", lists, wantLists)
			}
			// a second fallback is not logged again
			if !canStream {
				res.listing()
				res.opened(true)
				if !res.listing() {
					t.Error("a list after a streaming list's watch is no fallback")
				}
				res.fellBack()
			}
			out := logs.String()
			if got := strings.Count(out, "API server cannot stream lists; listing"); got != wantLogs {
				t.Errorf("fallback logged %d times, want %d; log:\n%s", got, wantLogs, out)
			}
			if wantLogs > 0 && (!strings.Contains(out, "level=INFO") || !strings.Contains(out, "resource=namespaces")) {
				t.Errorf("fallback not logged at Info with the resource:\n%s", out)
			}
		})
	}
}
