package ruleset

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// newNetns creates a network namespace for the test, removed when it ends, and returns its name
// and an open handle (closed at the end).
func newNetns(tb testing.TB) (string, int) {
	tb.Helper()
	testenv.RequireCommand(tb, "ip", "nft")
	ns := netns.NewBare(tb, "rs", netns.LoopbackDown)
	return ns.Name, ns.FD
}

// openConn opens a Conn on a new namespace.
func openConn(tb testing.TB) (*Conn, string) {
	tb.Helper()
	ns, fd := newNetns(tb)
	c, err := Open(fd)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c, ns
}

// nftIn runs nft in the namespace with stdin and returns its output; it fails the test on error.
func nftIn(tb testing.TB, ns, stdin string, args ...string) string {
	tb.Helper()
	return netns.Nft(tb, ns, stdin, args...)
}

// nftRun runs nft in the namespace and returns its output and error.
func nftRun(ns string, args ...string) (string, error) {
	out, err := netns.Exec(context.Background(), ns, append([]string{"nft"}, args...)...)
	return string(out), err
}

// assertKernel fails unless `nft list table` in ns prints what Render(want) prints.
func assertKernel(tb testing.TB, ns string, want *Table) {
	tb.Helper()
	got := nftIn(tb, ns, "", "list", "table", "inet", want.Name)
	if g, w := testenv.NormalizeListing(got), testenv.NormalizeListing(Render(want)); g != w {
		tb.Fatalf("kernel table differs from Render\n--- kernel (normalized)\n%s\n--- render (normalized)\n%s\n--- kernel (raw)\n%s", g, w, got)
	}
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func addrKey(s string) ElementKey { a := ip(s); return ElementKey{Addr: a, AddrEnd: a} }

func rangeKey(from, to string) ElementKey { return ElementKey{Addr: ip(from), AddrEnd: ip(to)} }

func prefixKey(p string) ElementKey {
	pp := netip.MustParsePrefix(p)
	return ElementKey{Addr: pp.Addr(), AddrEnd: lastAddr(pp)}
}

// committedSample opens a Conn on a fresh namespace and replaces its table with sampleTable(name).
func committedSample(t *testing.T, name string) (*Conn, string, *Table) {
	t.Helper()
	c, ns := openConn(t)
	tb := sampleTable(name)
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	return c, ns, tb
}

func goTo(c string) Verdict { return Verdict{Kind: Goto, Chain: c} }

func put(s *Set, k ElementKey, v Verdict, comment string) {
	s.Put(Element{k, Value{Verdict: v, Comment: comment}})
}

func newSet(name string, k Key, isMap, interval bool, comment string) *Set {
	return &Set{Name: name, Key: k, Map: isMap, Interval: interval, Comment: comment, Elements: map[ElementKey]Value{}}
}

// sampleTable is a representative table: the layout internal/nft builds (three base chains with
// conntrack rules, v4/v6 dispatch maps to per-pod chains, an interval map of addresses, a
// protocol . port interval map, a protocol map, counter-drop chains, one of them logging at a
// limited rate), comments everywhere.
func sampleTable(name string) *Table {
	t := NewTable(name)
	est := Rule{CtState: CtEstablishedRelated, Verdict: Verdict{Kind: Accept}, Comment: "replies of allowed connections"}
	inv := Rule{CtState: CtInvalid, Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "invalid conntrack state"}
	vmap := func(k Key, set, c string) Rule {
		return Rule{Lookups: []Lookup{{Key: k, Set: set, Map: true}}, Comment: c}
	}
	t.Chains["forward"] = &Chain{Name: "forward", Comment: "pod traffic", Base: &Base{Hook: HookForward, Priority: 7}, Rules: []Rule{
		est, inv,
		vmap(KeyIPDaddr, "ingress_v4", "to a local pod (IPv4)"),
		vmap(KeyIP6Daddr, "ingress_v6", "to a local pod (IPv6)"),
		{Iifname: "veth*", Lookups: []Lookup{{Key: KeyIifnameIPSaddr, Set: "sources_v4", Invert: true}}, Counter: true,
			Verdict: Verdict{Kind: Drop}, Comment: "spoofed source (IPv4)"},
		{Iifname: "veth*", Lookups: []Lookup{{Key: KeyIifnameIP6Saddr, Set: "sources_v6", Invert: true}}, Counter: true,
			Verdict: Verdict{Kind: Drop}, Comment: "spoofed source (IPv6)"},
		{Iifname: "veth*", Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "workload interface without endpoint"},
	}}
	t.Chains["input"] = &Chain{Name: "input", Base: &Base{Hook: HookInput, Priority: 7}, Rules: []Rule{
		est,
		{Lookups: []Lookup{{Key: KeyIifname, Set: "workload_ifs"}}, Counter: true, Verdict: Verdict{Kind: Accept}, Comment: "pods to host"},
	}}
	t.Chains["output"] = &Chain{Name: "output", Comment: "host to pods", Base: &Base{Hook: HookOutput, Priority: 7}, Rules: []Rule{
		est,
		{Lookups: []Lookup{{Key: KeyIPDaddr, Set: "local_v4"}}, Verdict: Verdict{Kind: Return}, Comment: "kubelet probes"},
		{Lookups: []Lookup{{Key: KeyIP6Saddr, Set: "local_v6"}}, Verdict: Verdict{Kind: Jump, Chain: "deny_x"}},
	}}
	t.Chains["pod_a"] = &Chain{Name: "pod_a", Comment: "ingress of default/a", Rules: []Rule{
		{Lookups: []Lookup{{Key: KeyIPSaddrL4ProtoDport, Set: "allow_a"}}, Verdict: Verdict{Kind: Accept}, Comment: "allowed peer . proto . port"},
		{Lookups: []Lookup{{Key: KeyIP6DaddrL4ProtoDport, Set: "allow_a6"}}, Verdict: Verdict{Kind: Accept}},
		vmap(KeyIPSaddr, "peers_a", "known peers"),
		vmap(KeyIPSaddr, "nets_v4", "ipBlock peers"),
		vmap(KeyIP6Saddr, "nets_v6", "ipBlock peers (IPv6)"),
		{Verdict: goTo("deny_x"), Comment: "default deny"},
	}}
	t.Chains["class_x"] = &Chain{Name: "class_x", Comment: "peer class x: policy default/allow-web", Rules: []Rule{
		vmap(KeyL4ProtoDport, "class_x_ports", "ports"),
		vmap(KeyL4Proto, "class_x_l4", "protocols without ports"),
		{Verdict: goTo("deny_x"), Comment: "nothing else"},
	}}
	t.Chains["deny_x"] = &Chain{Name: "deny_x", Comment: "denied by default/allow-web", Rules: []Rule{
		{Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "default/allow-web"},
	}}
	t.Chains["deny_logged"] = &Chain{Name: "deny_logged", Comment: "denied and logged", Rules: []Rule{
		{Limit: &Limit{Rate: 10, Unit: PerSecond, Burst: 5}, Log: &Log{Group: 100, Prefix: "deny_logged"}, Comment: "log a few"},
		{Limit: &Limit{Rate: 3, Unit: PerMinute, Burst: 20}, Log: &Log{Group: 7}},
		{Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "denied and logged"},
	}}

	in4 := newSet("ingress_v4", KeyIPDaddr, true, false, "local pod address -> its ingress chain")
	put(in4, addrKey("10.0.0.1"), goTo("pod_a"), "default/a")
	put(in4, addrKey("10.0.0.2"), goTo("pod_a"), "default/b")
	t.Sets[in4.Name] = in4
	in6 := newSet("ingress_v6", KeyIP6Daddr, true, false, "")
	put(in6, addrKey("fd00::1"), goTo("pod_a"), "default/a")
	t.Sets[in6.Name] = in6
	peers := newSet("peers_a", KeyIPSaddr, true, false, "known peer address -> peer class")
	peers.Size = 4 // a sized map (Set.Size)
	put(peers, addrKey("10.0.1.5"), goTo("class_x"), "web/x")
	put(peers, addrKey("10.0.1.6"), Verdict{Kind: Drop}, "")
	t.Sets[peers.Name] = peers
	nets := newSet("nets_v4", KeyIPSaddr, true, true, "ipBlock ranges (except subtracted)")
	put(nets, prefixKey("10.1.0.0/16"), goTo("class_x"), "allow-web rule 0")
	put(nets, rangeKey("10.2.0.5", "10.2.0.9"), Verdict{Kind: Drop}, "")
	put(nets, addrKey("192.168.1.7"), Verdict{Kind: Accept}, "single")
	put(nets, prefixKey("240.0.0.0/4"), Verdict{Kind: Return}, "to the end of the space")
	t.Sets[nets.Name] = nets
	nets6 := newSet("nets_v6", KeyIP6Saddr, true, true, "")
	put(nets6, prefixKey("fd00:1::/64"), goTo("class_x"), "v6 block")
	put(nets6, rangeKey("fd00:2::5", "fd00:2::9"), Verdict{Kind: Drop}, "")
	t.Sets[nets6.Name] = nets6
	ports := newSet("class_x_ports", KeyL4ProtoDport, true, true, "protocol . port -> verdict")
	ports.Counter = true // every element counts its packets
	put(ports, ElementKey{Proto: 6, Port: 80, PortEnd: 80}, Verdict{Kind: Accept}, "allow-web port 80")
	put(ports, ElementKey{Proto: 6, Port: 8000, PortEnd: 8100}, goTo("deny_x"), "")
	put(ports, ElementKey{Proto: 17, Port: 53, PortEnd: 53}, Verdict{Kind: Accept}, "dns")
	put(ports, ElementKey{Proto: 132, Port: 5000, PortEnd: 5001}, Verdict{Kind: Accept}, "")
	t.Sets[ports.Name] = ports
	l4 := newSet("class_x_l4", KeyL4Proto, true, false, "protocols without ports")
	put(l4, ElementKey{Proto: 1}, Verdict{Kind: Accept}, "icmp")
	put(l4, ElementKey{Proto: 58}, Verdict{Kind: Accept}, "")
	t.Sets[l4.Name] = l4
	ifs := newSet("workload_ifs", KeyIifname, false, false, "")
	put(ifs, ElementKey{Ifname: "veth0"}, Verdict{}, "pod a")
	t.Sets[ifs.Name] = ifs
	local4 := NewAddrSet("local_v4", KeyIPDaddr, "local pods", 2)
	local4.Size = 1024
	put(local4, addrKey("10.0.0.1"), Verdict{}, "")
	put(local4, addrKey("10.0.0.2"), Verdict{}, "")
	t.Sets[local4.Name] = local4
	t.Sets["local_v6"] = newSet("local_v6", KeyIP6Saddr, false, false, "empty")
	src4 := newSet("sources_v4", KeyIifnameIPSaddr, false, false, "workload interface . its pod's address")
	src4.Size = 64 // a sized concatenation: its description holds the size and the fields
	put(src4, ElementKey{Ifname: "veth0", Addr: netip.MustParseAddr("10.0.0.1"), AddrEnd: netip.MustParseAddr("10.0.0.1")}, Verdict{}, "default/a")
	put(src4, ElementKey{Ifname: "veth1", Addr: netip.MustParseAddr("10.0.0.2"), AddrEnd: netip.MustParseAddr("10.0.0.2")}, Verdict{}, "")
	t.Sets[src4.Name] = src4
	src6 := newSet("sources_v6", KeyIifnameIP6Saddr, false, false, "")
	put(src6, ElementKey{Ifname: "veth0", Addr: netip.MustParseAddr("fd00::1"), AddrEnd: netip.MustParseAddr("fd00::1")}, Verdict{}, "default/a")
	t.Sets[src6.Name] = src6
	allow := newSet("allow_a", KeyIPSaddrL4ProtoDport, false, false, "peer . protocol . port allowed")
	allow.Counter = true
	put(allow, ElementKey{Addr: netip.MustParseAddr("10.0.1.5"), AddrEnd: netip.MustParseAddr("10.0.1.5"), Proto: 6, Port: 80, PortEnd: 80}, Verdict{}, "web/x")
	put(allow, ElementKey{Addr: netip.MustParseAddr("10.0.1.5"), AddrEnd: netip.MustParseAddr("10.0.1.5"), Proto: 17, Port: 53, PortEnd: 53}, Verdict{}, "")
	t.Sets[allow.Name] = allow
	allow6 := newSet("allow_a6", KeyIP6DaddrL4ProtoDport, false, false, "")
	put(allow6, ElementKey{Addr: netip.MustParseAddr("fd00::5"), AddrEnd: netip.MustParseAddr("fd00::5"), Proto: 132, Port: 5000, PortEnd: 5000}, Verdict{}, "")
	t.Sets[allow6.Name] = allow6
	return t
}

// watchFromAnother reports the changes to table in namespace ns as another connection's Monitor
// sees them: the kernel's own account of each batch's objects.
func watchFromAnother(t *testing.T, ns, table string) <-chan TableChange {
	t.Helper()
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // Open keeps its own handle
	watcher, err := Open(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { watcher.Close() })
	_, out := startMonitor(t, watcher, table)
	return out
}

// commitInOneBatch commits tb with changes and checks that the commit was one batch, no
// replace, the kernel holds tb without drift, and the batch changed exactly want (read from
// out, a watch of the table's changes).
func commitInOneBatch(t *testing.T, c *Conn, ns string, tb *Table, changes *Changes, out <-chan TableChange, what string, want []ObjectChange) {
	t.Helper()
	replaces, batches := c.replaces, c.batches
	if err := c.Commit(tb, changes); err != nil {
		t.Fatal(err)
	}
	if c.replaces != replaces || c.batches != batches+1 || c.WholeWhy() != "" {
		t.Errorf("%s: %d replaces, %d batches (whole: %q); want none, one", what, c.replaces-replaces, c.batches-batches, c.WholeWhy())
	}
	assertKernel(t, ns, tb)
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("%s: Verify = %v, %v; want no drift", what, drift, err)
	}
	if got := nextChange(t, out, what); !slices.Equal(got.Objects, want) {
		t.Errorf("%s: the batch changed %v, want %v", what, got.Objects, want)
	}
}
