package sync_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"path"
	"strings"
	gosync "sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"

	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// requestLog records the resources of the plain lists and of the streaming lists' watches
// (sendInitialEvents=true) a client sends.
type requestLog struct {
	rt        http.RoundTripper
	mu        gosync.Mutex
	plain     map[string]int
	streaming map[string]int
	logs      bytes.Buffer
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet {
		q := r.URL.Query()
		l.mu.Lock()
		res := path.Base(r.URL.Path)
		if strings.Contains(r.URL.Path, "/projectcalico.org/") { // named as the Watcher names them
			res += ".projectcalico.org"
		}
		switch {
		case q.Get("watch") == "":
			l.plain[res]++
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			l.streaming[res]++
		}
		l.mu.Unlock()
	}
	return l.rt.RoundTrip(r)
}

func (l *requestLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logs.Write(p)
}

// TestInitialListsStreamed: against the harness' API server (etcd 3.6, which has the progress
// notifications the API server needs), the Watcher's initial lists of namespaces and network
// policies are streamed (client-go's WatchListClient): watches with initial events, no plain
// list, nftpolicy_watch_streaming 1, and no fallback logged. Pods are listed plainly by design
// (podlist.go): no streaming attempt, nftpolicy_watch_streaming 0.
func TestInitialListsStreamed(t *testing.T) {
	s := kube.Require(t, srv)
	rl := &requestLog{plain: map[string]int{}, streaming: map[string]int{}}
	cfg := rest.CopyConfig(s.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rl.rt = rt; return rl })
	cs, err := sync.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := sync.NewMetrics(nil)
	c := startCollector(t, sync.New(sync.Config{Client: cs, NodeName: "node-1", Metrics: m,
		Logger: slog.New(slog.NewTextHandler(rl, nil))}))
	c.waitSync(t)
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if got := testutil.ToFloat64(m.Streaming.WithLabelValues("pods")); got != 0 {
		t.Errorf("nftpolicy_watch_streaming{pods} = %v, want 0 (a plain list)", got)
	}
	if rl.streaming["pods"] != 0 || rl.plain["pods"] == 0 {
		t.Errorf("pods: %d streaming list(s), %d plain list(s); want a plain list only", rl.streaming["pods"], rl.plain["pods"])
	}
	for _, res := range []string{"namespaces", "networkpolicies"} {
		if got := testutil.ToFloat64(m.Streaming.WithLabelValues(res)); got != 1 {
			t.Errorf("nftpolicy_watch_streaming{%s} = %v, want 1 (a streamed list)", res, got)
		}
		if rl.streaming[res] == 0 || rl.plain[res] != 0 {
			t.Errorf("%s: %d streaming list(s), %d plain list(s); want streamed only", res, rl.streaming[res], rl.plain[res])
		}
	}
	if out := rl.logs.String(); strings.Contains(out, "cannot stream") {
		t.Errorf("a fallback to plain lists was logged:\n%s", out)
	}
}
