package sync

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
)

func testPodRecord(ns, name, version string, fingerprint uint64) *podRecord {
	return &podRecord{recordMeta: newRecordMeta(ns, name, version), fingerprint: fingerprint}
}

// invalidPodRecord is the record of a pod that cannot be converted.
func invalidPodRecord(ns, name, version string) *podRecord {
	r := testPodRecord(ns, name, version, 0)
	problem := errors.New("no such address")
	r.problem = &problem
	return r
}

// TestPodStoreAsClientGoStore: podStore answers as client-go's store holding the records would,
// through random adds (new pods and new versions: endpoints, pods that are none, invalid pods)
// and deletes: the same keys, and under each key a record of the same namespace, name, version,
// fingerprint and validity, which it takes for the record held.
func TestPodStoreAsClientGoStore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ours, theirs := newPodStore(), cache.NewStore(cache.MetaNamespaceKeyFunc)
	pods := make([]*podRecord, 40)
	for step := range 2000 {
		i := rng.IntN(len(pods))
		if rng.IntN(4) == 0 {
			if pods[i] != nil {
				if err := ours.Delete(pods[i]); err != nil {
					t.Fatal(err)
				}
				if err := theirs.Delete(pods[i]); err != nil {
					t.Fatal(err)
				}
				pods[i] = nil
			}
		} else {
			ns, name, version := fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("pod-%d", i), fmt.Sprint(step)
			switch rng.IntN(3) {
			case 0:
				pods[i] = testPodRecord(ns, name, version, 0)
			case 1:
				pods[i] = invalidPodRecord(ns, name, version)
			default:
				pods[i] = testPodRecord(ns, name, version, rng.Uint64()|1)
			}
			if err := ours.Add(pods[i]); err != nil {
				t.Fatal(err)
			}
			if err := theirs.Add(pods[i]); err != nil {
				t.Fatal(err)
			}
		}
		keys, want := ours.ListKeys(), theirs.ListKeys()
		slices.Sort(keys)
		slices.Sort(want)
		if !slices.Equal(keys, want) {
			t.Fatalf("step %d: keys %v, want %v", step, keys, want)
		}
		for _, k := range want {
			got, ok, err := ours.GetByKey(k)
			held, _, _ := theirs.GetByKey(k)
			g, h := got.(*podRecord), held.(*podRecord)
			if err != nil || !ok || g.ns() != h.ns() || g.name() != h.name() || g.version() != h.version() ||
				g.fingerprint != h.fingerprint || (g.err() == nil) != (h.err() == nil) {
				t.Fatalf("step %d: %s holds %+v (%v, %v), want %+v", step, k, g, ok, err, h)
			}
			if !ours.sameRecord(got, h) {
				t.Fatalf("step %d: %s: the record added is not the one held", step, k)
			}
		}
	}
	for _, c := range []struct{ held, other *podRecord }{
		{testPodRecord("a", "b", "1", 1), testPodRecord("a", "b", "2", 1)},
		{testPodRecord("a", "b", "1", 1), testPodRecord("a", "b", "1", 3)},
		{testPodRecord("a", "b", "1", 0), invalidPodRecord("a", "b", "1")},
	} {
		if err := ours.Add(c.held); err != nil {
			t.Fatal(err)
		}
		held, _, _ := ours.Get(c.held)
		if ours.sameRecord(held, c.other) {
			t.Fatalf("%+v is taken for %+v", c.other, c.held)
		}
	}
}

// TestPodStoreDelivers: a handlerStore keeping pods in a podStore delivers as with client-go's
// store. The initial list's records delivered early are not delivered again by its Replace. A
// relist delivers a new version as an update whose old record is the one held (its
// fingerprint), delivers nothing for a version held already (a record of its own, as a relist
// decodes it), and deletes a pod the list lacks with its last record in the tombstone. A pod
// changed under the same version (a fake clientset's) is delivered as an update.
func TestPodStoreDelivers(t *testing.T) {
	var calls []string
	say := func(verb string, objs ...any) {
		s := verb
		for _, o := range objs {
			switch o := o.(type) {
			case *podRecord:
				s += fmt.Sprintf(" %s@%s/%d", o.key(), o.version(), o.fingerprint)
			case cache.DeletedFinalStateUnknown:
				r := o.Obj.(*podRecord)
				s += fmt.Sprintf(" tombstone %s: %s@%s/%d", o.Key, r.key(), r.version(), r.fingerprint)
			}
		}
		calls = append(calls, s)
	}
	s := &handlerStore{items: newPodStore(), transform: func(o any) (any, error) { return o, nil },
		handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { say("add", o) },
			UpdateFunc: func(o, n any) { say("update", o, n) },
			DeleteFunc: func(o any) { say("delete", o) },
		},
		watch: newResourceWatch("pods", slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(prometheus.NewRegistry()), time.Now())}
	a, b, c := testPodRecord("ns", "a", "1", 11), testPodRecord("ns", "b", "1", 0), testPodRecord("ns", "c", "1", 13)
	for _, r := range []*podRecord{a, b, c} {
		s.early(r)
	}
	if err := s.Replace([]any{a, b, c}, "1"); err != nil {
		t.Fatal(err)
	}
	a2, bAgain := testPodRecord("ns", "a", "5", 15), testPodRecord("ns", "b", "1", 0)
	if err := s.Replace([]any{a2, bAgain}, "5"); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(testPodRecord("ns", "b", "1", 17)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(a2); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"add ns/a@1/11", "add ns/b@1/0", "add ns/c@1/13",
		"update ns/a@1/11 ns/a@5/15", "delete tombstone ns/c: ns/c@1/13",
		"update ns/b@1/0 ns/b@1/17",
		"delete ns/a@5/15",
	}
	if !slices.Equal(calls, want) {
		t.Fatalf("delivered\n%q\nwant\n%q", calls, want)
	}
	if keys := s.items.ListKeys(); !slices.Equal(keys, []string{"ns/b"}) {
		t.Fatalf("held %v, want [ns/b]", keys)
	}
}
