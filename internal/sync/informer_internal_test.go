package sync

import (
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// TestHandlerStore checks that the store a reflector fills calls the handler as client-go's
// informers do: adds, updates of held objects, deletes of held objects only, and relists that
// delete what they no longer list, with the last known state in a tombstone.
func TestHandlerStore(t *testing.T) {
	ns := func(name, rv string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	type op func(s *handlerStore) error
	add := func(o *corev1.Namespace) op { return func(s *handlerStore) error { return s.Add(o) } }
	update := func(o *corev1.Namespace) op { return func(s *handlerStore) error { return s.Update(o) } }
	del := func(o *corev1.Namespace) op { return func(s *handlerStore) error { return s.Delete(o) } }
	early := func(o *corev1.Namespace) op { return func(s *handlerStore) error { s.early(o); return nil } }
	replace := func(os ...*corev1.Namespace) op {
		return func(s *handlerStore) error {
			list := make([]any, len(os))
			for i, o := range os {
				list[i] = o
			}
			return s.Replace(list, "")
		}
	}
	// objects an initial list delivers early and then lists (the store holds these very objects)
	a1, b1, a2, c2 := ns("a", "1"), ns("b", "1"), ns("a", "2"), ns("c", "2")
	tests := []struct {
		name   string
		ops    []op
		want   []string
		held   []string
		synced bool
	}{
		{"initial list", []op{replace(ns("a", "1"), ns("b", "1"))},
			[]string{"add a@1 initial", "add b@1 initial"}, []string{"a", "b"}, true},
		{"events after the list", []op{replace(ns("a", "1")), add(ns("b", "2")), update(ns("a", "3")), del(ns("b", "4"))},
			[]string{"add a@1 initial", "add b@2", "update a@1→a@3", "delete b@4"}, []string{"a"}, true},
		{"an add of a held object is an update", []op{add(ns("a", "1")), add(ns("a", "2"))},
			[]string{"add a@1", "update a@1→a@2"}, []string{"a"}, false},
		{"an update of an unknown object is an add", []op{update(ns("a", "1"))},
			[]string{"add a@1"}, []string{"a"}, false},
		{"a delete of an unknown object is dropped", []op{del(ns("a", "1"))},
			nil, nil, false},
		{"a relist delivers what it lists and deletes what it lacks", []op{
			replace(ns("a", "1"), ns("b", "1")), replace(ns("a", "5"), ns("c", "5"))},
			[]string{"add a@1 initial", "add b@1 initial", "update a@1→a@5", "add c@5", "delete tombstone b (last b@1)"},
			[]string{"a", "c"}, true},
		{"an empty relist deletes everything", []op{replace(ns("a", "1")), replace()},
			[]string{"add a@1 initial", "delete tombstone a (last a@1)"}, nil, true},
		{"an initial list delivered as it is read is not delivered again", []op{early(a1), early(b1), replace(a1, b1, ns("c", "1"))},
			[]string{"add a@1 initial", "add b@1 initial", "add c@1 initial"}, []string{"a", "b", "c"}, true},
		{"an initial list delivered in part, then failed: the next list delivers what changed and deletes what it lacks", []op{
			early(a1), early(b1), early(a2), early(c2), replace(a2, c2)},
			[]string{"add a@1 initial", "add b@1 initial", "update a@1→a@2", "add c@2 initial", "delete tombstone b (last b@1)"},
			[]string{"a", "c"}, true},
		{"a relist is not delivered early", []op{replace(a1), early(b1)},
			[]string{"add a@1 initial"}, []string{"a"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			str := describeStored
			h := cache.ResourceEventHandlerDetailedFuncs{
				AddFunc: func(obj any, initial bool) {
					s := "add " + str(obj)
					if initial {
						s += " initial"
					}
					got = append(got, s)
				},
				UpdateFunc: func(o, n any) { got = append(got, "update "+str(o)+"→"+str(n)) },
				DeleteFunc: func(obj any) { got = append(got, "delete "+str(obj)) },
			}
			s := &handlerStore{items: cache.NewStore(cache.MetaNamespaceKeyFunc), transform: func(o any) (any, error) { return o, nil },
				handler: h, watch: newResourceWatch("namespaces", slog.New(slog.DiscardHandler), nil, time.Now())}
			for _, o := range tt.ops {
				if err := o(s); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("handler calls:\n got %q\nwant %q", got, tt.want)
			}
			held := s.items.ListKeys()
			slices.Sort(held)
			if !slices.Equal(held, tt.held) {
				t.Errorf("held %q, want %q", held, tt.held)
			}
			if s.synced.Load() != tt.synced {
				t.Errorf("synced = %v, want %v", s.synced.Load(), tt.synced)
			}
		})
	}
}

// describeStored names a namespace as name@resourceVersion, or a tombstone and its last state.
func describeStored(obj any) string {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return o.Name + "@" + o.ResourceVersion
	case cache.DeletedFinalStateUnknown:
		return fmt.Sprintf("tombstone %s (last %s)", o.Key, describeStored(o.Obj))
	}
	return fmt.Sprintf("%T", obj)
}

// TestResourceWatch checks when a resource counts as without a watch, and what counts as a
// restart or a failure: a resource is down from New until a watch opens, and from the end of a
// real watch until the next opens; a watch that ends at once with nothing received (client-go's
// empty watch when a proxy closes the connection, an unsupported streaming list) leaves the
// outage going and is a failed attempt unless it was a streaming list's; a watch is real once it
// delivers something or lasts confirmAfter.
func TestResourceWatch(t *testing.T) {
	type step func(r *resourceWatch, gens *[]int64)
	open := func(streaming bool) step {
		return func(r *resourceWatch, gens *[]int64) { *gens = append(*gens, r.opened(streaming)) }
	}
	closeLast := func(r *resourceWatch, gens *[]int64) { r.closed((*gens)[len(*gens)-1]) }
	closeFirst := func(r *resourceWatch, gens *[]int64) { r.closed((*gens)[0]) }
	event := func(r *resourceWatch, _ *[]int64) { r.received() }
	quiet := func(r *resourceWatch, _ *[]int64) { // the confirmation timer fires (on a loaded machine, late)
		time.Sleep(r.confirmAfter)
		for deadline := time.Now().Add(10 * time.Second); r.unconfirmed.Load() && time.Now().Before(deadline); {
			time.Sleep(r.confirmAfter)
		}
	}
	tests := []struct {
		name     string
		steps    []step
		wantDown string // "open", "since New" (an hour), "just now"
		restarts float64
		failures int
	}{
		{"before any watch", nil, "since New", 0, 0},
		{"a watch that delivers", []step{open(false), event}, "open", 0, 0},
		{"a watch that delivered and ended", []step{open(false), event, closeLast}, "just now", 0, 0},
		{"a reopened watch is a restart", []step{open(false), event, closeLast, open(false), event}, "open", 1, 0},
		{"a quiet watch is real after confirmAfter", []step{open(false), quiet, closeLast, open(false), quiet}, "open", 1, 0},
		{"an empty watch leaves the outage going", []step{open(false), closeLast}, "since New", 0, 1},
		{"empty watches after a real one", []step{open(false), event, closeLast, open(false), closeLast, open(false), closeLast},
			"just now", 0, 2},
		{"a streaming list that ends at once is no failure", []step{open(true), closeLast}, "since New", 0, 0},
		{"a streaming list that delivers is real", []step{open(true), event, closeLast, open(false), event}, "open", 1, 0},
		{"a late stop of an older watch changes nothing", []step{open(false), event, open(false), event, closeFirst}, "open", 1, 0},
		{"stopped twice", []step{open(false), event, closeLast, closeLast}, "just now", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(nil)
			r := newResourceWatch("pods", slog.New(slog.DiscardHandler), m, time.Now().Add(-time.Hour))
			r.confirmAfter = 20 * time.Millisecond
			var gens []int64
			for _, s := range tt.steps {
				s(r, &gens)
			}
			down := r.down(time.Now())
			switch tt.wantDown {
			case "open":
				if down != 0 {
					t.Errorf("down %v, want 0 (a watch open)", down)
				}
			case "since New":
				if down < time.Hour {
					t.Errorf("down %v, want ≥ 1h (since New)", down)
				}
			case "just now":
				if down == 0 || down > time.Minute {
					t.Errorf("down %v, want since the last real watch ended (a moment ago)", down)
				}
			}
			if got := testutil.ToFloat64(m.WatchRestarts.WithLabelValues("pods")); got != tt.restarts {
				t.Errorf("restarts %v, want %v", got, tt.restarts)
			}
			r.mu.Lock()
			failures := r.failures
			r.mu.Unlock()
			if failures != tt.failures {
				t.Errorf("failed attempts %d, want %d", failures, tt.failures)
			}
			wantOpen := 0.0
			if tt.wantDown == "open" {
				wantOpen = 1
			}
			if got := testutil.ToFloat64(m.WatchOpen.WithLabelValues("pods")); got != wantOpen {
				t.Errorf("nftpolicy_watch_open %v, want %v", got, wantOpen)
			}
		})
	}
}
