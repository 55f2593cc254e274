package ifmon

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// newNetns creates a namespace removed at test end, its loopback down as the kernel makes it, and
// returns its name and an open fd.
func newNetns(t *testing.T) (string, int) {
	t.Helper()
	ns := netns.NewBare(t, "ifm", netns.LoopbackDown)
	return ns.Name, ns.FD
}

func ipIn(t *testing.T, ns string, args string) {
	t.Helper()
	full := append([]string{"-n", ns}, strings.Fields(args)...)
	if out, err := exec.Command("ip", full...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(full, " "), err, out)
	}
}

// recorder keeps every delivered event and update, in order.
type recorder struct {
	mu      sync.Mutex
	events  []Event
	updates []model.Update
	notify  chan struct{}
}

func (r *recorder) Changes(e []Event, u []model.Update) {
	r.mu.Lock()
	r.events = append(r.events, e...)
	r.updates = append(r.updates, u...)
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// wait returns once an event at or after *cursor equals want, advancing the cursor past it.
func (r *recorder) wait(t *testing.T, cursor *int, want Event) {
	t.Helper()
	r.waitFor(t, cursor, fmt.Sprintf("%#v", want), func(e Event) bool { return e == want })
}

func (r *recorder) waitFor(t *testing.T, cursor *int, what string, match func(Event) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		for i := *cursor; i < len(r.events); i++ {
			if match(r.events[i]) {
				*cursor = i + 1
				r.mu.Unlock()
				return
			}
		}
		seen := fmt.Sprint(r.events[*cursor:])
		r.mu.Unlock()
		select {
		case <-r.notify:
		case <-deadline:
			t.Fatalf("no event %s; events since last match: %s", what, seen)
		}
	}
}

func start(t *testing.T, cfg Config) (*Monitor, *recorder) {
	t.Helper()
	rec := &recorder{notify: make(chan struct{}, 1)}
	cfg.Handler = rec
	m := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Run did not return after cancel")
		}
	})
	// The loopback link of the fresh namespace arrives with the initial dump.
	cur := 0
	rec.wait(t, &cur, LinkSet{Link: Link{Index: 1, Name: "lo", Kind: ""}})
	return m, rec
}

func TestEvents(t *testing.T) {
	ns, fd := newNetns(t)
	m, rec := start(t, Config{NetNS: fd, WorkloadPrefixes: []string{"va", "vc"}})
	cur := 0
	link := func(name string) Link {
		s := m.Snapshot()
		for _, l := range s.Links {
			if l.Name == name {
				return l
			}
		}
		t.Fatalf("no link %q in %v", name, s.Links)
		return Link{}
	}
	ipIn(t, ns, "link add va type veth peer name vb")
	for _, name := range []string{"va", "vb"} {
		c := cur
		rec.waitFor(t, &c, "LinkSet "+name, func(e Event) bool {
			ls, ok := e.(LinkSet)
			return ok && ls.Link.Name == name && ls.Link.Kind == "veth"
		})
	}
	if got := m.WorkloadInterfaces(); fmt.Sprint(got) != "[va]" {
		t.Errorf("WorkloadInterfaces = %v, want [va]", got)
	}
	va := link("va").Index
	vb := link("vb").Index

	steps := []struct {
		cmd  string
		want []Event
	}{
		{"link set va up", []Event{}},
		{"link set vb up", []Event{LinkSet{Link: Link{Index: va, Name: "va", Up: true, Kind: "veth"}}}},
		{"addr add 10.9.0.1/24 dev va", []Event{AddrSet{Addr: AddrKey{va, netip.MustParsePrefix("10.9.0.1/24")}}}},
		{"addr add fd00:9::1/64 dev va nodad", []Event{AddrSet{Addr: AddrKey{va, netip.MustParsePrefix("fd00:9::1/64")}}}},
		{"route add 10.9.1.5/32 dev va", []Event{RouteSet{Dst: netip.MustParsePrefix("10.9.1.5/32"), Index: va, Interface: "va"}}},
		{"route add fd00:9:1::5/128 dev va", []Event{RouteSet{Dst: netip.MustParsePrefix("fd00:9:1::5/128"), Index: va, Interface: "va"}}},
		// A rename re-announces the routes through the link under its new name.
		{"link set va name vc", []Event{
			RouteSet{Dst: netip.MustParsePrefix("10.9.1.5/32"), Index: va, Interface: "vc"},
			RouteSet{Dst: netip.MustParsePrefix("fd00:9:1::5/128"), Index: va, Interface: "vc"},
		}},
		{"route del 10.9.1.5/32 dev vc", []Event{RouteDeleted{Dst: netip.MustParsePrefix("10.9.1.5/32")}}},
		{"addr del 10.9.0.1/24 dev vc", []Event{AddrDeleted{Addr: AddrKey{va, netip.MustParsePrefix("10.9.0.1/24")}}}},
		{"link set vb down", []Event{LinkSet{Link: Link{Index: vb, Name: "vb", Up: false, Kind: "veth"}}}},
		// Deleting the link drops its remaining route and address.
		{"link del vc", []Event{
			LinkDeleted{Link: Link{Index: va, Name: "vc", Up: false, Kind: "veth"}},
			RouteDeleted{Dst: netip.MustParsePrefix("fd00:9:1::5/128")},
		}},
	}
	for _, st := range steps {
		ipIn(t, ns, st.cmd)
		for _, w := range st.want {
			c := cur
			rec.wait(t, &c, w)
		}
		// Advance past everything so far once every expected event was seen.
		rec.mu.Lock()
		cur = len(rec.events)
		rec.mu.Unlock()
	}
	if _, ok := m.Snapshot().InterfaceOf(netip.MustParsePrefix("fd00:9:1::5/128")); ok {
		t.Errorf("route of a deleted link still mapped")
	}
	assertEqualsDump(t, m, fd)
	rec.mu.Lock()
	var sawRoute bool
	// the node's addresses with the interface holding each: a rename moves them
	hostAddrs := map[model.Update]bool{model.HostAddrSet{Addr: netip.MustParseAddr("10.9.0.1"), Interface: "va"}: false,
		model.HostAddrDeleted{Addr: netip.MustParseAddr("fd00:9::1"), Interface: "va"}: false,
		model.HostAddrSet{Addr: netip.MustParseAddr("fd00:9::1"), Interface: "vc"}:     false}
	for _, u := range rec.updates {
		if u == (model.RouteSet{Dst: netip.MustParsePrefix("10.9.1.5/32"), Interface: "vc"}) {
			sawRoute = true
		}
		if _, ok := hostAddrs[u]; ok {
			hostAddrs[u] = true
		}
	}
	rec.mu.Unlock()
	if !sawRoute {
		t.Errorf("no model.RouteSet with the renamed interface among updates")
	}
	for u, saw := range hostAddrs {
		if !saw {
			t.Errorf("no %#v among updates", u)
		}
	}
}

func assertEqualsDump(t *testing.T, m *Monitor, fd int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		want, err := Dump(fd)
		if err != nil {
			t.Fatalf("Dump: %v", err)
		}
		got := m.Snapshot()
		if got.Equal(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitor state differs from a fresh dump:\n got %d links %d addrs %d routes\nwant %d links %d addrs %d routes",
				len(got.Links), len(got.Addrs), len(got.Routes), len(want.Links), len(want.Addrs), len(want.Routes))
		}
		time.Sleep(50 * time.Millisecond) // bounded poll for the monitor to drain its socket
	}
}

func TestBurstResync(t *testing.T) {
	ns, fd := newNetns(t)
	m, _ := start(t, Config{NetNS: fd, ReadBuffer: 4096})
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "link add b%da type veth peer name b%db\n", i, i)
	}
	batch := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ipIn(t, ns, "-batch "+batch)
	assertEqualsDump(t, m, fd)
	if n := len(m.Snapshot().Links); n != 1001 {
		t.Errorf("links = %d, want 1001 (lo + 1000)", n)
	}
	if m.ENOBUFS() == 0 || m.Resyncs() == 0 {
		t.Errorf("ENOBUFS=%d Resyncs=%d: the burst did not exercise the re-dump path", m.ENOBUFS(), m.Resyncs())
	}
	t.Logf("events=%d enobufs=%d resyncs=%d", m.Events(), m.ENOBUFS(), m.Resyncs())
}
