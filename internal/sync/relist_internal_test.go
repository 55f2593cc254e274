package sync

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

func relistNamespace(name, rv string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels}}
}

func listOf(objs ...*corev1.Namespace) []any {
	list := make([]any, len(objs))
	for i, o := range objs {
		list[i] = o
	}
	return list
}

// relistLines are the "relisted" lines of a JSON log.
func relistLines(t *testing.T, log *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if !strings.Contains(l, "relisted") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	log.Reset()
	return lines
}

// TestRelistSaidOutLoud: a relist — a list after the first, which the reflector makes when its
// watch could not resume — is logged once by the Watcher itself, naming the resource, how long
// the view had been stale (since the last thing received before it) and what the list changed,
// at Warn when it changed anything; nftpolicy_watch_relists_total and
// nftpolicy_watch_relist_staleness_seconds count it. The initial list, and the list after a
// withdraw (ClusterNetworkPolicies whose CRD came back), are no relists.
func TestRelistSaidOutLoud(t *testing.T) {
	var log bytes.Buffer
	m := NewMetrics(prometheus.NewRegistry())
	s := &handlerStore{items: cache.NewStore(cache.MetaNamespaceKeyFunc), transform: func(o any) (any, error) { return o, nil },
		handler: cache.ResourceEventHandlerFuncs{},
		watch:   newResourceWatch("namespaces", slog.New(slog.NewJSONHandler(&log, nil)), m, time.Now())}
	relists := func() float64 { return testutil.ToFloat64(m.Relists.WithLabelValues("namespaces")) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Replace(listOf(relistNamespace("a", "1", nil), relistNamespace("b", "1", nil), relistNamespace("c", "1", nil)), "1"))
	must(s.Add(relistNamespace("d", "2", nil)))
	if lines := relistLines(t, &log); len(lines) != 0 || relists() != 0 {
		t.Fatalf("the initial list logged %v and counted %v relists, want none", lines, relists())
	}
	const quiet = 50 * time.Millisecond
	time.Sleep(quiet)
	// b changed, e is new, c and d are gone
	must(s.Replace(listOf(relistNamespace("a", "1", nil), relistNamespace("b", "3", nil), relistNamespace("e", "3", nil)), "3"))
	lines := relistLines(t, &log)
	if len(lines) != 1 {
		t.Fatalf("a relist logged %d lines, want 1", len(lines))
	}
	l := lines[0]
	want := map[string]any{"level": "WARN", "resource": "namespaces", "listed": 3.0, "added": 1.0, "changed": 1.0, "deleted": 2.0}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("relist line: %s = %v, want %v (line %v)", k, l[k], v, l)
		}
	}
	ns, _ := l["stale"].(float64) // JSON logs durations in nanoseconds
	if stale := time.Duration(ns); stale < quiet || stale > time.Minute {
		t.Errorf("relist line: stale %v, want since the event before it, ≥ %v", stale, quiet)
	}
	if relists() != 1 || testutil.ToFloat64(m.Lists.WithLabelValues("namespaces")) != 2 {
		t.Errorf("relists %v, lists %v; want 1 and 2", relists(), testutil.ToFloat64(m.Lists.WithLabelValues("namespaces")))
	}
	if n := testutil.CollectAndCount(m.RelistStaleness, "nftpolicy_watch_relist_staleness_seconds"); n != 1 {
		t.Errorf("nftpolicy_watch_relist_staleness_seconds has %d series, want 1", n)
	}

	// a relist that changes nothing is said at Info
	must(s.Replace(listOf(relistNamespace("a", "1", nil), relistNamespace("b", "3", nil), relistNamespace("e", "3", nil)), "3"))
	if lines := relistLines(t, &log); len(lines) != 1 || lines[0]["level"] != "INFO" || lines[0]["changed"] != 0.0 {
		t.Fatalf("an unchanged relist logged %v, want one INFO line that changed nothing", lines)
	}
	// a withdraw, and the list after it, start the view anew
	must(s.withdraw())
	must(s.Replace(listOf(relistNamespace("f", "9", nil)), "9"))
	if lines := relistLines(t, &log); len(lines) != 0 || relists() != 2 {
		t.Fatalf("a withdraw and the list after it logged %v, %v relists; want none, 2", lines, relists())
	}
	must(s.Replace(listOf(relistNamespace("f", "9", nil)), "9"))
	if relists() != 3 {
		t.Fatalf("relists %v after a list that followed one, want 3", relists())
	}
}

// TestRelistSentWhole: the updates of one relist reach the consumer in one batch, however long
// the relist takes to deliver (here a millisecond per object, time enough for the sender to send
// many batches): the graph never sees a half-relisted resource. The batch ends with the list's
// resourceVersion as the resource's version: the last object of a list need not be its newest.
func TestRelistSentWhole(t *testing.T) {
	w := New(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan []model.Update)
	go w.send(ctx, out)
	slow := func(o any) (any, error) {
		time.Sleep(time.Millisecond)
		return w.transform(o)
	}
	s := &handlerStore{items: cache.NewStore(cache.MetaNamespaceKeyFunc), transform: slow, sink: w,
		handler: cache.ResourceEventHandlerFuncs{
			AddFunc: w.setNamespace, UpdateFunc: ignoreOld(w.setNamespace), DeleteFunc: w.deleteNamespace},
		watch: newResourceWatch("namespaces", slog.New(slog.DiscardHandler), nil, time.Now())}
	const n = 50
	list := func(rv string, labels map[string]string, from int) []any {
		var objs []*corev1.Namespace
		for i := from; i < n; i++ {
			objs = append(objs, relistNamespace(fmt.Sprintf("ns-%02d", i), rv, labels))
		}
		return listOf(objs...)
	}
	// receive takes batches until it has want updates and the list's version (the list's
	// resourceVersion, which the version of no object of it is)
	receive := func(want int, listVersion string) (batches int) {
		t.Helper()
		versioned := false
		for got := 0; got < want || !versioned; batches++ {
			select {
			case b := <-out:
				for _, u := range b {
					if v, ok := u.(model.SourceVersion); ok {
						versioned = v == model.SourceVersion{Resource: "namespaces", ResourceVersion: listVersion}
						continue
					}
					got++
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("received %d of %d updates, the list's version %v", got, want, versioned)
			}
		}
		return batches
	}
	go func() {
		if err := s.Replace(list("1", nil, 0), "5"); err != nil {
			t.Error(err)
		}
	}()
	t.Logf("the initial list of %d namespaces came in %d batches", n, receive(n, "5"))
	// the relist relabels 40 namespaces and lacks 10
	done := make(chan error, 1)
	go func() { done <- s.Replace(list("6", map[string]string{"team": "x"}, 10), "9") }()
	select {
	case b := <-out:
		version := model.SourceVersion{Resource: "namespaces", ResourceVersion: "9"}
		if len(b) != n+1 || b[n] != version {
			t.Fatalf("the relist's first batch holds %d items, want all %d updates and then the list's version %v", len(b), n, version)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the relist was never sent")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
