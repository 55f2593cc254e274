package sync_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"strings"
	gosync "sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/rest"

	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
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

// heldPodList holds the answer to the first plain list of pods once its first bytes have been
// read, until release is closed: held is closed when it starts holding.
type heldPodList struct {
	rt      http.RoundTripper
	first   int // bytes passed on before holding
	once    gosync.Once
	held    chan struct{}
	release chan struct{}
}

func (h *heldPodList) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.rt.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || r.URL.Query().Get("watch") != "" || path.Base(r.URL.Path) != "pods" {
		return resp, err
	}
	h.once.Do(func() { resp.Body = &heldBody{ReadCloser: resp.Body, left: h.first, list: h} })
	return resp, nil
}

type heldBody struct {
	io.ReadCloser
	left int
	list *heldPodList
	stop gosync.Once
}

func (b *heldBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.stop.Do(func() { close(b.list.held) })
		<-b.list.release
		return b.ReadCloser.Read(p)
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), b.left)])
	b.left -= n
	return n, err
}

// TestPodsDeliveredAsListed: the pods of the initial list reach the consumer while the list is
// still being read, not only once it has been read whole (the graph's work on them overlaps the
// list's transfer); in-sync still waits for the whole list, and holds every listed pod once.
// The API server's answer to the list is held after its first 32 KiB until the consumer has
// received endpoints.
func TestPodsDeliveredAsListed(t *testing.T) {
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := testenv.UniqueName("0early") // sorts before the other tests' namespaces: its pods come first
	if err := s.CreateNamespace(ctx, ns, nil); err != nil {
		t.Fatal(err)
	}
	const pods = 200 // ≈ 100 KB of protobuf: more than the bytes passed on before the hold
	for i := range pods {
		ip := netip.AddrFrom4([4]byte{10, 77, byte(i >> 8), byte(i)})
		if _, err := s.CreatePod(ctx, ns, fmt.Sprintf("p-%03d", i), "node-9", map[string]string{"app": "x"}, nil, []netip.Addr{ip}); err != nil {
			t.Fatal(err)
		}
	}
	h := &heldPodList{first: 32 << 10, held: make(chan struct{}), release: make(chan struct{})}
	var releaseOnce gosync.Once
	release := func() { releaseOnce.Do(func() { close(h.release) }) }
	defer release()
	cfg := rest.CopyConfig(s.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { h.rt = rt; return h })
	cs, err := sync.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := startCollector(t, sync.New(sync.Config{Client: cs, NodeName: "node-1"}))
	select {
	case <-h.held:
	case <-ctx.Done():
		t.Fatal("the pod list was never read past its first 32 KiB")
	}
	ours := func() (n int, synced bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for k := range c.st.Endpoints {
			if k.Namespace == ns {
				n++
			}
		}
		return n, c.atSync != nil
	}
	for deadline := time.After(30 * time.Second); ; {
		n, synced := ours()
		if synced {
			t.Fatal("in sync while the pod list was still being read")
		}
		if n > 0 {
			t.Logf("%d of %d pods received while the list was held", n, pods)
			break
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatal("no pod of the list reached the consumer while the rest of the list was held: the list is delivered only once read whole")
		}
	}
	release()
	c.waitSync(t)
	if n, _ := ours(); n != pods {
		t.Errorf("at in-sync the consumer holds %d of the namespace's %d pods", n, pods)
	}
}
