package bench_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftpolicy/nftpolicy/internal/agent"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	nsync "github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// monitor follows `nft monitor` in a namespace and hands out, per address, when an element
// holding it was added or deleted. A line may list several elements (one message of a
// transaction); each address in it, alone or as a part of a concatenation, counts.
type monitor struct {
	mu      sync.Mutex
	waiters map[string]chan time.Time // "add 10.1.2.3" → first matching line's arrival
	// element additions and deletions seen, and how many times the socket's queue overflowed
	// (events lost) (watchElements)
	events, overflows int
}

// seenLocked hands at to the waiter for key ("add 10.1.2.3"), if any; m.mu is held.
func (m *monitor) seenLocked(key string, at time.Time) {
	if ch, ok := m.waiters[key]; ok {
		ch <- at
		delete(m.waiters, key)
	}
}

// seen is how many element additions and deletions watchElements saw, and how many times events
// were lost.
func (m *monitor) seen() (events, overflows int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events, m.overflows
}

func startMonitor(b *testing.B, ns *netnsHandle) *monitor {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns.name, "nft", "monitor", "elements")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with an aborted run (watchdog exit)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); cmd.Wait() })
	m := &monitor{waiters: map[string]chan time.Time{}}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			at := time.Now()
			line := sc.Text()
			op := ""
			switch {
			case strings.HasPrefix(line, "add element"):
				op = "add "
			case strings.HasPrefix(line, "delete element"):
				op = "delete "
			default:
				continue
			}
			_, elems, _ := strings.Cut(line, "{")
			m.mu.Lock()
			for _, tok := range strings.FieldsFunc(elems, isElementSeparator) {
				m.seenLocked(op+tok, at)
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// watchElements is startMonitor reading the kernel's nftables events itself, from a netlink
// socket in the namespace, for the table named table: each element added or deleted counts for
// every IPv4 address its key holds (alone, or as a part of a concatenation), when the event is
// read. `nft monitor` caches the whole ruleset and did not print a line within a minute of a
// change with P3's 364,359 elements programmed; this reads nothing but the events.
func watchElements(b *testing.B, ns *netnsHandle, table string) *monitor {
	sock, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.fd})
	if err != nil {
		b.Fatal(err)
	}
	if err := sock.SetReadBuffer(64 << 20); err != nil {
		b.Fatal(err)
	}
	if err := sock.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sock.Close() })
	m := &monitor{waiters: map[string]chan time.Time{}}
	go func() {
		for {
			msgs, err := sock.Receive()
			at := time.Now()
			if errors.Is(err, unix.ENOBUFS) {
				m.mu.Lock()
				m.overflows++
				m.mu.Unlock()
				continue
			}
			if err != nil {
				return // closed
			}
			m.mu.Lock()
			for _, msg := range msgs {
				op := ""
				switch int(msg.Header.Type & 0xff) {
				case unix.NFT_MSG_NEWSETELEM:
					op = "add "
				case unix.NFT_MSG_DELSETELEM:
					op = "delete "
				}
				if op == "" || msg.Header.Type>>8 != unix.NFNL_SUBSYS_NFTABLES || len(msg.Data) < 4 || msg.Data[0] != unix.NFPROTO_INET {
					continue
				}
				elementKeys(msg.Data[4:], table, func(key []byte) {
					m.events++
					for i := 0; i+4 <= len(key); i += 4 { // registers are 4 bytes: an IPv4 address fills one
						m.seenLocked(op+netip.AddrFrom4([4]byte(key[i:i+4])).String(), at)
					}
				})
			}
			m.mu.Unlock()
		}
	}()
	return m
}

// elementKeys calls fn with the key of each element of a NEWSETELEM or DELSETELEM event's
// attributes, when the event is of the table named table.
func elementKeys(attrs []byte, table string, fn func(key []byte)) {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return
	}
	var elems []byte
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_ELEM_LIST_TABLE:
			if ad.String() != table {
				return
			}
		case unix.NFTA_SET_ELEM_LIST_ELEMENTS:
			elems = ad.Bytes()
		}
	}
	list, err := netlink.NewAttributeDecoder(elems)
	if err != nil || ad.Err() != nil {
		return
	}
	for list.Next() { // NFTA_LIST_ELEM
		list.Nested(func(elem *netlink.AttributeDecoder) error {
			for elem.Next() {
				if elem.Type() == unix.NFTA_SET_ELEM_KEY {
					elem.Nested(func(data *netlink.AttributeDecoder) error {
						for data.Next() {
							if data.Type() == unix.NFTA_DATA_VALUE {
								fn(data.Bytes())
							}
						}
						return nil
					})
				}
			}
			return nil
		})
	}
}

// isElementSeparator splits the elements of a monitor line ("{ 10.0.0.1 . 80, 10.0.0.2 }")
// into their parts.
func isElementSeparator(r rune) bool { return r == ' ' || r == ',' || r == '}' }

// expect registers interest in the next add or delete of addr; call before causing it.
func (m *monitor) expect(op string, addr netip.Addr) <-chan time.Time {
	ch := make(chan time.Time, 1)
	m.mu.Lock()
	m.waiters[op+" "+addr.String()] = ch
	m.mu.Unlock()
	return ch
}

// forget withdraws an expect whose change was not made.
func (m *monitor) forget(op string, addr netip.Addr) {
	m.mu.Lock()
	delete(m.waiters, op+" "+addr.String())
	m.mu.Unlock()
}

// apiFanout is P2's end-to-end cluster: the same shape as fanout, written through the API server.
var apiFanout = scale.Fanout{Selectors: 2000, Members: 100, Pods: 10000, Spares: 16, LocalPods: 20, Node: "node-bench"}

// createFanout writes the namespace, the policies and the pods of f through the API server
// (8 writers in parallel).
func createFanout(b *testing.B, srv *kube.Server, f scale.Fanout) {
	ctx := b.Context()
	var pods []model.Endpoint
	var pols []model.Policy
	for _, u := range f.Updates() {
		switch u := u.(type) {
		case model.NamespaceSet:
			if err := srv.CreateNamespace(ctx, u.Namespace.Name, u.Namespace.Labels); err != nil {
				b.Fatal(err)
			}
		case model.EndpointSet:
			pods = append(pods, u.Endpoint)
		case model.PolicySet:
			pols = append(pols, u.Policy)
		}
	}
	parallel(b, len(pols), func(i int) error {
		np := networkPolicy(pols[i]) // p3_api_test.go
		np.Name, np.Namespace = pols[i].Key.Name, pols[i].Namespace
		_, err := srv.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
		return err
	})
	parallel(b, len(pods), func(i int) error {
		e := pods[i]
		_, err := srv.CreatePod(ctx, e.Key.Namespace, e.Key.Name, e.Node, e.Labels.Map(), nil, e.Addrs)
		return err
	})
}

func ptr[T any](v T) *T { return &v }

// parallel runs fn(0..n-1) on 8 workers and fails b on the first error.
func parallel(b *testing.B, n int, fn func(int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// setLabels merge-patches a pod's labels (null deletes a key).
func setLabels(ctx context.Context, srv *kube.Server, ns, name string, labels map[string]*string) error {
	var parts []string
	for k, v := range labels {
		if v == nil {
			parts = append(parts, fmt.Sprintf("%q:null", k))
		} else {
			parts = append(parts, fmt.Sprintf("%q:%q", k, *v))
		}
	}
	patch := `{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`
	_, err := srv.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// BenchmarkAPIToKernel is P2's end-to-end figure: the agent (agent.Run, in process, on a node
// namespace) watching a real API server holding 10,000 pods and 2,000 NetworkPolicies over
// 2,000 selectors; a spare pod's labels are patched to join (then leave) one selector, and the
// latency runs from the patch request to the element's add (delete) seen by `nft monitor` in
// the node namespace. Not run with BENCH_QUICK (creating the objects takes most of a minute).
func BenchmarkAPIToKernel(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	if quick {
		report.add(row{"P2", "API event → kernel commit through the API server and the agent", "not run with BENCH_QUICK=1", "p99 ≤ 20 ms", ""})
		return
	}
	setStage("P2 API → kernel")
	srv := startProfiled(b)
	node := newNetns(b, "ba")
	t0 := time.Now()
	createFanout(b, srv, apiFanout)
	created := time.Since(t0)

	client, err := nsync.NewClient(srv.Config)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(ctx, agent.RunConfig{Client: client, NodeName: apiFanout.Node, NetNSFD: node.fd,
			ResyncInterval: time.Hour})
	}()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			b.Errorf("agent: %v", err)
		}
	})
	mon := startMonitor(b, node)
	// the kernel's own element events, read from netlink in this process: `nft monitor` prints
	// its line only after its own work on each transaction
	events := watchElements(b, node, nft.DefaultTable)
	// await waits for the element line of one change; an agent that stops fails the benchmark
	// (and leaves its error for the cleanup, which would otherwise wait for it forever)
	await := func(ch <-chan time.Time, timeout time.Duration, what string) time.Time {
		b.Helper()
		select {
		case at := <-ch:
			return at
		case <-time.After(timeout):
			b.Fatalf("%s did not reach the kernel within %v", what, timeout)
		case err := <-done:
			done <- err
			b.Fatalf("agent stopped: %v", err)
		}
		return time.Time{}
	}

	ns := scale.FanoutNamespace
	in := "in"
	spare := func(s int) string { return fmt.Sprintf("pod-%06d", apiFanout.Pods+s) }
	// Warm-up: the first join lands once the agent has synced everything before it.
	ch := mon.expect("add", apiFanout.SpareAddr(0))
	if err := setLabels(b.Context(), srv, ns, spare(0), map[string]*string{"g0": &in}); err != nil {
		b.Fatal(err)
	}
	await(ch, 3*time.Minute, "the first joined spare (after the agent's sync)")
	synced := time.Since(t0) - created
	ch = mon.expect("delete", apiFanout.SpareAddr(0))
	if err := setLabels(b.Context(), srv, ns, spare(0), map[string]*string{"g0": nil}); err != nil {
		b.Fatal(err)
	}
	await(ch, 30*time.Second, "the first spare leaving")

	// The samples start after the API server's collection: creating the objects through it left
	// it garbage whose collection, on the cores the agent shares, stretches its answers several
	// times over for as long as it marks (BENCHMARKS.md); the row counts the collections that
	// still fall among the samples.
	if err := srv.CollectGarbage(b.Context()); err != nil {
		b.Fatal(err)
	}
	gcBefore, err := srv.Collections(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	samples := max(b.N, 200)
	var lat, latEvent, latPatch, latAfter []time.Duration
	for i := range samples {
		s, k := (i/2)%apiFanout.Spares, (i/2*37)%apiFanout.Selectors
		key := fmt.Sprintf("g%d", k)
		op, labels := "add", map[string]*string{key: &in}
		if i%2 == 1 {
			op, labels = "delete", map[string]*string{key: nil} // the key the previous change added
		}
		ch := mon.expect(op, apiFanout.SpareAddr(s))
		chEvent := events.expect(op, apiFanout.SpareAddr(s))
		start := time.Now()
		if err := setLabels(b.Context(), srv, ns, spare(s), labels); err != nil {
			b.Fatal(err)
		}
		latPatch = append(latPatch, time.Since(start))
		what := fmt.Sprintf("change %d (%s %v)", i, op, apiFanout.SpareAddr(s))
		at := await(ch, 30*time.Second, what)
		lat = append(lat, at.Sub(start))
		event := await(chEvent, 30*time.Second, what+", its netlink event").Sub(start)
		latEvent = append(latEvent, event)
		latAfter = append(latAfter, max(0, event-latPatch[len(latPatch)-1]))
	}
	gcAfter, err := srv.Collections(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(p99)/1e6, "p99-ms")
	report.add(row{"P2", fmt.Sprintf("API event → kernel commit, real API server + agent, %d pods, %d policies (%d changes; patch sent → `nft monitor` line)",
		apiFanout.Pods+apiFanout.Spares+apiFanout.LocalPods, apiFanout.Selectors, samples),
		fmt.Sprintf("p50 %.1f ms, p99 %.1f ms (objects created in %.0f s; agent synced %.1f s after)", ms(p50), ms(p99), created.Seconds(), synced.Seconds()),
		"p99 ≤ 20 ms", meets(p99 <= 20*time.Millisecond)})
	e50, e99 := percentile(latEvent, 50), percentile(latEvent, 99)
	b.ReportMetric(ms(e99), "event-p99-ms")
	report.add(row{"P2", "API event → kernel commit, the same changes timed to the kernel's element event (read from netlink in the benchmark, not through `nft monitor`); beside it the patch's answer",
		fmt.Sprintf("p50 %.1f ms, p99 %.1f ms; the API server answered the patch in p50 %.1f ms, p99 %.1f ms (the samples start after its collection; it collected %d more time(s) during them)",
			ms(e50), ms(e99), ms(percentile(latPatch, 50)), ms(percentile(latPatch, 99)), gcAfter-gcBefore),
		"p99 ≤ 5 ms (issue)", meets(e99 <= 5*time.Millisecond)})
	// The API server commits the change to etcd before it sends the watch event and answers the
	// patch, so the time from its answer to the kernel's event bounds what the agent adds.
	a50, a99 := percentile(latAfter, 50), percentile(latAfter, 99)
	b.ReportMetric(ms(a99), "after-answer-p99-ms")
	report.add(row{"P2", "the same changes: the kernel's element event after the API server's answer to the patch (0 when before it): the agent's share, the API server's and etcd's write left out",
		fmt.Sprintf("p50 %.1f ms, p99 %.1f ms", ms(a50), ms(a99)), "", ""})
}
