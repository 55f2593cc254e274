package ruleset

import (
	"cmp"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// TestVerifyDrift: Verify sees each change made behind the Conn's back, and none after Replace.
func TestVerifyDrift(t *testing.T) {
	c, ns := openConn(t)
	const name = "drift"
	for _, tc := range []struct {
		name string
		nft  string // an `nft -f` script run behind the Conn's back
	}{
		{"element deleted", "delete element inet drift ingress_v4 { 10.0.0.1 }"},
		{"interval element deleted", "delete element inet drift nets_v4 { 10.2.0.5-10.2.0.9 }"},
		{"port interval deleted", "delete element inet drift class_x_ports { tcp . 8000-8100 }"},
		{"element added", "add element inet drift local_v4 { 10.9.9.9 }"},
		{"element verdict changed", "delete element inet drift peers_a { 10.0.1.6 }\nadd element inet drift peers_a { 10.0.1.6 : accept }"},
		{"element goto retargeted", "delete element inet drift ingress_v4 { 10.0.0.2 }\nadd element inet drift ingress_v4 { 10.0.0.2 comment \"default/b\" : goto deny_x }"},
		{"element comment changed", "delete element inet drift ingress_v4 { 10.0.0.2 }\nadd element inet drift ingress_v4 { 10.0.0.2 comment \"forged\" : goto pod_a }"},
		{"interval verdict changed", "delete element inet drift nets_v4 { 10.2.0.5-10.2.0.9 }\nadd element inet drift nets_v4 { 10.2.0.5-10.2.0.9 : accept }"},
		{"chain flushed", "flush chain inet drift class_x"},
		{"base chain flushed", "flush chain inet drift forward"},
		{"foreign rule added", "add rule inet drift pod_a counter accept"},
		{"foreign rule inserted with our comment", `insert rule inet drift deny_x counter drop comment "default/allow-web"`},
		{"rule rewritten keeping count and comment", "flush chain inet drift deny_x\nadd rule inet drift deny_x counter accept comment \"default/allow-web\""},
		{"lookup retargeted keeping the comment", "flush chain inet drift output\nadd rule inet drift output ct state established,related accept comment \"replies of allowed connections\"\nadd rule inet drift output ip saddr @local_v4 return comment \"kubelet probes\"\nadd rule inet drift output ip6 saddr @local_v6 jump deny_x"},
		{"log group changed", "flush chain inet drift deny_logged\nadd rule inet drift deny_logged limit rate 10/second log prefix \"deny_logged\" group 101 comment \"log a few\"\nadd rule inet drift deny_logged limit rate 3/minute burst 20 packets log group 7\nadd rule inet drift deny_logged counter drop comment \"denied and logged\""},
		{"limit rate changed", "flush chain inet drift deny_logged\nadd rule inet drift deny_logged limit rate 11/second log prefix \"deny_logged\" group 100 comment \"log a few\"\nadd rule inet drift deny_logged limit rate 3/minute burst 20 packets log group 7\nadd rule inet drift deny_logged counter drop comment \"denied and logged\""},
		{"foreign chain added", "add chain inet drift intruder"},
		{"foreign set added", "add set inet drift intruder { type ipv4_addr; }"},
		{"set remade with another size", "flush chain inet drift output\ndelete set inet drift local_v4\nadd set inet drift local_v4 { type ipv4_addr; size 2048; comment \"local pods\"; elements = { 10.0.0.1, 10.0.0.2 } }\nadd rule inet drift output ct state established,related accept comment \"replies of allowed connections\"\nadd rule inet drift output ip daddr @local_v4 return comment \"kubelet probes\"\nadd rule inet drift output ip6 saddr @local_v6 jump deny_x"},
		{"table flushed", "flush table inet drift"},
		{"table deleted", "delete table inet drift"},
		{"base chain re-prioritised", "delete chain inet drift input\nadd chain inet drift input { type filter hook input priority 8; policy accept; }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			desired := sampleTable(name)
			if err := c.Replace(desired); err != nil {
				t.Fatal(err)
			}
			if drift, err := c.Verify(); err != nil || drift {
				t.Fatalf("Verify after Replace = %v, %v; want false, nil", drift, err)
			}
			nftIn(t, ns, tc.nft+"\n", "-f", "-")
			if drift, err := c.Verify(); err != nil || !drift {
				t.Fatalf("Verify after %q = %v, %v; want true, nil", tc.nft, drift, err)
			}
			if err := c.Replace(desired); err != nil {
				t.Fatalf("repairing Replace: %v", err)
			}
			if drift, err := c.Verify(); err != nil || drift {
				t.Fatalf("Verify after the repair = %v, %v; want false, nil", drift, err)
			}
			assertKernel(t, ns, desired)
		})
	}
}

// TestDelete removes the table, and is a no-op when it is gone.
func TestDelete(t *testing.T) {
	c, ns := openConn(t)
	if err := c.Delete(); err != nil {
		t.Fatalf("Delete before any commit: %v", err)
	}
	if err := c.Replace(sampleTable("gone")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if out, err := nftRun(ns, "list", "table", "inet", "gone"); err == nil {
		t.Fatalf("table still listed after Delete:\n%s", out)
	}
	if c.Committed() != nil {
		t.Errorf("mirror kept after Delete")
	}
	if err := c.Delete(); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	// DeleteTable without a mirror (clean-up of a previous run's table)
	nftIn(t, ns, "table inet leftover {\n\tchain c {\n\t}\n}\n", "-f", "-")
	if err := c.DeleteTable("leftover"); err != nil {
		t.Fatal(err)
	}
	if out := nftIn(t, ns, "", "list", "tables"); out != "" {
		t.Errorf("tables left: %s", out)
	}
}

// TestCounters: ReadCounts gives each counting rule its own Count, named by its chain, and none
// for a chain without one; UDP datagrams to port 9 on the namespace's loopback make known
// traffic through output into count_lo, whose two rules both count.
func TestCounters(t *testing.T) {
	c, ns := openConn(t)
	testenv.RequireCommand(t, "bash")
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	tb := NewTable("counters")
	tb.Chains["output"] = &Chain{Name: "output", Base: &Base{Hook: HookOutput, Priority: 0}, Rules: []Rule{
		{Lookups: []Lookup{{Key: KeyL4ProtoDport, Set: "udp9"}}, Verdict: Verdict{Kind: Jump, Chain: "count_lo"}},
	}}
	tb.Chains["count_lo"] = &Chain{Name: "count_lo", Rules: []Rule{
		{Counter: true, Comment: "first"},
		{Counter: true, Verdict: Verdict{Kind: Return}, Comment: "second"},
	}}
	tb.Chains["never"] = &Chain{Name: "never", Rules: []Rule{{Counter: true, Verdict: Verdict{Kind: Drop}}}}
	udp9 := newSet("udp9", KeyL4ProtoDport, false, false, "")
	put(udp9, ElementKey{Proto: unix.IPPROTO_UDP, Port: 9, PortEnd: 9}, Verdict{}, "")
	tb.Sets["udp9"] = udp9
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	script := "for i in 1 2 3; do echo x > /dev/udp/127.0.0.1/9; done"
	if out, err := exec.Command("ip", "netns", "exec", ns, "bash", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("sending datagrams: %v: %s", err, out)
	}
	counts, err := ReadCounts(c.netnsFD, "counters", []string{"output", "count_lo", "never"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range counts {
		if n.Packets > 0 && n.Bytes == 0 {
			t.Errorf("%s %q: %d packets of 0 bytes", n.Chain, n.Comment, n.Packets)
		}
		got = append(got, fmt.Sprintf("%s %q %d", n.Chain, n.Comment, n.Packets))
	}
	// 3 datagrams through output, counted by each rule of count_lo; output counts nothing
	want := []string{`count_lo "first" 3`, `count_lo "second" 3`, `never "" 0`}
	if !slices.Equal(got, want) {
		t.Errorf("counts %q, want %q", got, want)
	}
}

// TestReadCounts reads the counters of counting rules and of the elements of counting sets and
// maps, each with its comment and verdict, past a chain and a set that are gone; UDP datagrams
// on the namespace's loopback to ports 9, 10 and 11 go through a counting allow set, a counting
// verdict map and a counting drop rule.
func TestReadCounts(t *testing.T) {
	ns, fd := newNetns(t)
	c, err := Open(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	testenv.RequireCommand(t, "bash")
	if out, err := exec.Command("ip", "-n", ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	tb := NewTable("counts")
	tb.Chains["output"] = &Chain{Name: "output", Base: &Base{Hook: HookOutput, Priority: 0}, Rules: []Rule{
		{L4Proto: unix.IPPROTO_UDP, Lookups: []Lookup{{Key: KeyIPDaddrL4ProtoDport, Set: "allow"}}, Verdict: Verdict{Kind: Accept}},
		{L4Proto: unix.IPPROTO_UDP, Lookups: []Lookup{{Key: KeyL4ProtoDport, Set: "ports", Map: true}}},
	}}
	tb.Chains["deny"] = &Chain{Name: "deny", Rules: []Rule{{Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "denied"}}}
	allow := newSet("allow", KeyIPDaddrL4ProtoDport, false, false, "")
	allow.Counter = true
	lo := ip("127.0.0.1")
	put(allow, ElementKey{Addr: lo, AddrEnd: lo, Proto: unix.IPPROTO_UDP, Port: 11, PortEnd: 11}, Verdict{}, "eleven")
	put(allow, ElementKey{Addr: lo, AddrEnd: lo, Proto: unix.IPPROTO_UDP, Port: 12, PortEnd: 12}, Verdict{}, "twelve")
	ports := newSet("ports", KeyL4ProtoDport, true, true, "")
	ports.Counter = true
	put(ports, ElementKey{Proto: unix.IPPROTO_UDP, Port: 9, PortEnd: 9}, Verdict{Kind: Accept}, "nine")
	put(ports, ElementKey{Proto: unix.IPPROTO_UDP, Port: 10, PortEnd: 10}, goTo("deny"), "ten")
	tb.Sets["allow"], tb.Sets["ports"] = allow, ports
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	script := "for p in 9 9 9 10 10 11; do echo x > /dev/udp/127.0.0.1/$p; done 2>/dev/null; true"
	if out, err := exec.Command("ip", "netns", "exec", ns, "bash", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("sending datagrams: %v: %s", err, out)
	}
	got, err := ReadCounts(fd, "counts", []string{"gone", "deny", "output"}, []string{"gone", "allow", "ports"})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range got {
		lines = append(lines, fmt.Sprintf("%s %s %d %d", cmp.Or(c.Chain, "-"), c.Comment, c.Verdict, c.Packets))
	}
	slices.Sort(lines)
	want := []string{fmt.Sprintf("- eleven %d 1", VerdictNone), fmt.Sprintf("- nine %d 3", Accept),
		fmt.Sprintf("- ten %d 2", Goto), fmt.Sprintf("- twelve %d 0", VerdictNone), fmt.Sprintf("deny denied %d 2", Drop)}
	if !slices.Equal(lines, want) {
		t.Errorf("counts %q, want %q", lines, want)
	}
}

// TestReplaceScale: one Replace adding 100,000 elements to one map is one transaction and the
// kernel holds all of them.
func TestReplaceScale(t *testing.T) {
	c, ns := openConn(t)
	const n = 100_000
	tb := NewTable("scale")
	tb.Chains["pod"] = &Chain{Name: "pod", Rules: []Rule{{Verdict: Verdict{Kind: Drop}}}}
	tb.Chains["forward"] = &Chain{Name: "forward", Base: &Base{Hook: HookForward, Priority: 7}, Rules: []Rule{
		{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "big", Map: true}}},
	}}
	big := newSet("big", KeyIPSaddr, true, false, "100k")
	for i := range n {
		put(big, addrKey(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)), goTo("pod"), fmt.Sprintf("namespace-%d/pod-%d", i%100, i))
	}
	tb.Sets["big"] = big
	start := time.Now()
	if err := c.Replace(tb); err != nil {
		t.Fatalf("Replace with %d elements: %v", n, err)
	}
	t.Logf("Replace of %d elements with comments: %v (a figure, not asserted)", n, time.Since(start))
	if c.Batches() != 1 {
		t.Errorf("%d batches, want 1", c.Batches())
	}
	els, err := c.nft.GetSetElements(&nftables.Set{Table: nfTable("scale"), Name: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if len(els) != n {
		t.Errorf("kernel holds %d elements, want %d", len(els), n)
	}
	start = time.Now()
	if drift, err := c.Verify(); err != nil || drift {
		t.Errorf("Verify = %v, %v", drift, err)
	}
	t.Logf("Verify of %d elements: %v", n, time.Since(start))
	_ = ns
}

// TestChunkWorstCase: the largest elements this package writes (IPv6 interval map elements with
// 128-byte comments jumping to a chain with a long name) still fit their messages' 16-bit
// lengths, in a Replace and in a Commit.
func TestChunkWorstCase(t *testing.T) {
	c, ns := openConn(t)
	long := strings.Repeat("c", 200)
	comment := strings.Repeat("x", MaxCommentLen)
	tb := NewTable("chunks")
	tb.Chains[long] = &Chain{Name: long, Rules: []Rule{{Verdict: Verdict{Kind: Drop}}}}
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIP6Saddr, Set: "v6", Map: true}}}}}
	v6 := newSet("v6", KeyIP6Saddr, true, true, comment)
	fill := func(from, to int) {
		for i := from; i < to; i++ {
			a := fmt.Sprintf("fd00:%x::", i)
			put(v6, rangeKey(a, fmt.Sprintf("fd00:%x::ff", i)), goTo(long), comment)
		}
	}
	fill(0, 3000)
	tb.Sets["v6"] = v6
	if err := c.Replace(tb); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	fill(3000, 6000)
	if err := c.Commit(tb, &Changes{Sets: names("v6")}); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify = %v, %v", drift, err)
	}
	out := nftIn(t, ns, "", "-j", "list", "map", "inet", "chunks", "v6")
	if n := strings.Count(out, `"goto"`); n != 6000 {
		t.Errorf("kernel lists %d elements, want 6000", n)
	}
}
