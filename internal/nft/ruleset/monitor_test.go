package ruleset

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// startMonitor opens a Monitor of table on c and runs it until the test ends.
func startMonitor(t *testing.T, c *Conn, table string) (*Monitor, <-chan TableChange) {
	t.Helper()
	out := make(chan TableChange, 16)
	m, err := c.Monitor(table, out)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Go(t, "Monitor.Run", m.Run)
	return m, out
}

// nftProcess runs nft -f with script in ns and returns the pid of the process that committed it
// (`ip netns exec` execs nft in its own process).
func nftProcess(t *testing.T, ns, script string) uint32 {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script + "\n")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := uint32(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nft -f %.200q: %v\n%.2000s", script, err, out.String())
	}
	return pid
}

// nextChange waits for the next reported change.
func nextChange(t *testing.T, out <-chan TableChange, what string) TableChange {
	t.Helper()
	select {
	case c := <-out:
		return c
	case <-time.After(5 * time.Second):
		t.Fatalf("no change reported for %s within 5 s", what)
		return TableChange{}
	}
}

// barrier makes a known change to the table by another process, adding addr (which the table
// must not hold yet) to local_v4, and asserts that it is the next change reported: any change
// the Monitor should not report, made before it, would come first.
func barrier(t *testing.T, ns string, out <-chan TableChange, table, addr string) {
	t.Helper()
	pid := nftProcess(t, ns, "add element inet "+table+" local_v4 { "+addr+" }")
	got := nextChange(t, out, "the barrier")
	want := []ObjectChange{{Op: "add", Kind: "element", Name: "local_v4", Count: 1}}
	if got.PID != pid || !slices.Equal(got.Objects, want) {
		t.Fatalf("first change reported: %+v; want the barrier's (pid %d, %v)", got, pid, want)
	}
}

// TestMonitorReportsOthersChanges: each change another process makes to the table is reported
// once, with the committing pid and command and the objects it changed; changes to other tables,
// or to a table of the same name in another family, are not.
func TestMonitorReportsOthersChanges(t *testing.T) {
	const name = "mon"
	c, ns := openConn(t)
	_, out := startMonitor(t, c, name)
	for _, tc := range []struct {
		name   string
		script string
		want   []ObjectChange // nil: nothing reported
	}{
		{"table flushed", "flush table inet mon", []ObjectChange{
			{"delete", "rule", "forward", 7}, {"delete", "rule", "input", 2}, {"delete", "rule", "output", 3},
			{"delete", "rule", "class_x", 3}, {"delete", "rule", "deny_logged", 3}, {"delete", "rule", "deny_x", 1}, {"delete", "rule", "pod_a", 6}}},
		{"element deleted", "delete element inet mon ingress_v4 { 10.0.0.1 }", []ObjectChange{{"delete", "element", "ingress_v4", 1}}},
		{"elements added", "add element inet mon local_v4 { 10.7.0.1, 10.7.0.2, 10.7.0.3 }", []ObjectChange{{"add", "element", "local_v4", 3}}},
		{"rule added into our chain", "add rule inet mon pod_a counter accept", []ObjectChange{{"add", "rule", "pod_a", 1}}},
		{"chain added", "add chain inet mon intruder", []ObjectChange{{"add", "chain", "intruder", 1}}},
		{"set flushed", "flush set inet mon local_v4", []ObjectChange{{"delete", "element", "local_v4", 2}}},
		{"other table", "add table inet other\nadd chain inet other c\nadd rule inet other c accept", nil},
		{"same name, other family", "add table ip mon\nadd chain ip mon c\nadd rule ip mon c accept\ndelete table ip mon", nil},
		{"table deleted", "delete table inet mon", nil}, // checked below: too many objects to list
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.Replace(sampleTable(name)); err != nil {
				t.Fatal(err)
			}
			pid := nftProcess(t, ns, tc.script)
			if tc.name == "table deleted" {
				got := nextChange(t, out, tc.script)
				if got.PID != pid || got.Comm != "nft" || !slices.Contains(got.Objects, ObjectChange{"delete", "table", "", 1}) {
					t.Fatalf("reported %+v; want pid %d (nft) deleting the table", got, pid)
				}
				for _, kind := range []string{"chain", "set", "rule"} {
					n := 0
					for _, o := range got.Objects {
						if o.Op == "delete" && o.Kind == kind {
							n += o.Count
						}
					}
					if want := map[string]int{"chain": 7, "set": 14, "rule": 25}[kind]; n != want {
						t.Errorf("%d %ss deleted reported, want %d", n, kind, want)
					}
				}
				return
			}
			if tc.want == nil {
				barrier(t, ns, out, name, "10.9.9.9")
				return
			}
			got := nextChange(t, out, tc.script)
			if got.PID != pid || got.Comm != "nft" || got.Lost || got.Gen == 0 {
				t.Errorf("reported pid %d comm %q gen %d lost %v; want pid %d comm nft, a generation", got.PID, got.Comm, got.Gen, got.Lost, pid)
			}
			if !slices.Equal(got.Objects, tc.want) {
				t.Errorf("objects %v, want %v", got.Objects, tc.want)
			}
		})
	}
}

// TestMonitorSkipsOwnCommits: the Conn's own replaces, commits and deletes are not reported, and
// their events do not even reach the Monitor (the socket filter drops them), also after the
// Conn has re-dialled its socket.
func TestMonitorSkipsOwnCommits(t *testing.T) {
	const name = "own"
	c, ns := openConn(t)
	m, out := startMonitor(t, c, name)
	desired := sampleTable(name)
	own := func() {
		t.Helper()
		if err := c.Replace(desired); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			put(desired.Sets["local_v4"], addrKey(fmt.Sprintf("10.8.0.%d", i+1)), Verdict{}, "")
			if err := c.Commit(desired, &Changes{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Delete(); err != nil {
			t.Fatal(err)
		}
		if err := c.Replace(desired); err != nil {
			t.Fatal(err)
		}
	}
	own()
	barrier(t, ns, out, name, "10.9.9.9")
	// the barrier's element and NEWGEN only: no event of the Conn's reached the Monitor
	if got := m.Read(); got != 2 {
		t.Errorf("Monitor read %d event messages, want 2 (the barrier's)", got)
	}
	c.abandon() // a new socket, hence a new port
	own()
	barrier(t, ns, out, name, "10.9.9.8")
	if m.Sent() != 2 || m.Dropped() != 0 || m.Lost() != 0 {
		t.Errorf("sent %d, dropped %d, lost %d; want 2 (the barriers), 0, 0", m.Sent(), m.Dropped(), m.Lost())
	}
}

// TestMonitorOverflow: when the kernel drops events (the socket's queue overflowed), a Lost
// change is reported, the buffer doubled, and the changes made afterwards are reported again.
func TestMonitorOverflow(t *testing.T) {
	const name = "overflow"
	c, ns := openConn(t)
	if err := c.Replace(sampleTable(name)); err != nil {
		t.Fatal(err)
	}
	out := make(chan TableChange, 16)
	m, err := c.Monitor(name, out)
	if err != nil {
		t.Fatal(err)
	}
	const small = 4096
	m.rbuf = small
	if err := m.sock.SetReadBuffer(small); err != nil {
		t.Fatal(err)
	}
	// 2,000 element events queued before anything reads them: far beyond 4 KiB
	var els []string
	for i := range 2000 {
		els = append(els, fmt.Sprintf("10.6.%d.%d", i/250, i%250+1))
	}
	nftProcess(t, ns, "add set inet overflow big { type ipv4_addr; elements = { "+strings.Join(els, ", ")+" }; }")
	testenv.Go(t, "Monitor.Run", m.Run)
	if got := nextChange(t, out, "the overflow"); !got.Lost || got.Reason != lostOverflow {
		t.Fatalf("first change %+v, want Lost: %s", got, lostOverflow)
	}
	if m.Lost() != 1 || m.rbuf != 2*small {
		t.Errorf("lost %d, buffer %d; want 1, %d", m.Lost(), m.rbuf, 2*small)
	}
	barrier(t, ns, out, name, "10.9.9.9")
}

// TestMonitorQuietBatches: a large batch of the Conn's is sent with the Monitor out of the event
// group, and reported by nothing; another transaction committed meanwhile (in the table or
// anywhere else: the generation says only that one happened) is reported Lost, and not as its
// own change, which shows that the Monitor was out of the group.
func TestMonitorQuietBatches(t *testing.T) {
	const name = "quiet"
	c, ns := openConn(t)
	m, out := startMonitor(t, c, name)
	large := sampleTable(name)
	large.Sets["many"] = newSet("many", KeyIPSaddr, false, false, "")
	for i := range 5000 {
		put(large.Sets["many"], addrKey(fmt.Sprintf("10.5.%d.%d", i/250, i%250+1)), Verdict{}, "")
	}
	for _, tc := range []struct {
		name   string
		during string // an nft script another process commits while the batch is out of sight
	}{
		{"nothing else", ""},
		{"an element of the table added meanwhile", "add element inet quiet local_v4 { 10.4.0.1 }"},
		{"another table changed meanwhile", "add table inet elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hooked := false
			c.quietHook = func() {
				hooked = true
				if tc.during != "" {
					nftProcess(t, ns, tc.during)
				}
			}
			defer func() { c.quietHook = nil }()
			lost := m.Lost()
			if err := c.Replace(large); err != nil {
				t.Fatal(err)
			}
			if !hooked {
				t.Fatalf("a Replace of %d elements was not sent quietly", large.Sets["many"].Len())
			}
			if tc.during != "" {
				if got := nextChange(t, out, "the unwatched transaction"); !got.Lost || got.Reason != lostQuiet {
					t.Fatalf("reported %+v, want Lost: %s", got, lostQuiet)
				}
				if m.Lost() != lost+1 {
					t.Errorf("Lost() = %d, want %d", m.Lost(), lost+1)
				}
			}
			barrier(t, ns, out, name, "10.9.9.9")
		})
	}
	// a small commit is watched as before: not quiet
	c.quietHook = func() { t.Errorf("a one-element commit was sent quietly") }
	put(large.Sets["many"], addrKey("10.3.0.1"), Verdict{}, "")
	if err := c.Commit(large, &Changes{}); err != nil {
		t.Fatal(err)
	}
	c.quietHook = nil
	barrier(t, ns, out, name, "10.9.9.8")
}

// TestTableChangeString: the log line's description names the process and groups the changes
// by kind, the table first.
func TestTableChangeString(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change TableChange
		want   string
	}{
		{"lost", TableChange{Lost: true, Reason: lostOverflow}, "changes may have gone unreported: the event socket overflowed"},
		{"one element", TableChange{PID: 7, Comm: "nft", Gen: 3, Objects: []ObjectChange{{"delete", "element", "ingress_v4", 1}}},
			"pid 7 (nft), generation 3: delete element in set ingress_v4"},
		{"rules in two chains", TableChange{PID: 7, Comm: "nft", Gen: 3, Objects: []ObjectChange{
			{"delete", "rule", "forward_egress", 5}, {"delete", "rule", "forward_ingress", 3}}},
			"pid 7 (nft), generation 3: delete rule ×8 in chains forward_egress, forward_ingress"},
		{"table deleted, the table first", TableChange{PID: 9, Comm: "iptables-nft", Gen: 4, Objects: []ObjectChange{
			{"delete", "rule", "a", 1}, {"delete", "set", "s1", 1}, {"delete", "set", "s2", 1}, {"delete", "set", "s3", 1},
			{"delete", "set", "s4", 1}, {"delete", "set", "s5", 1}, {"delete", "chain", "a", 1}, {"delete", "table", "", 1}}},
			"pid 9 (iptables-nft), generation 4: delete table; delete chain: a; delete set ×5: s1, s2, s3, s4, … (5); delete rule in chain a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.change.String(); got != tc.want {
				t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// BenchmarkReplaceWatched: a Replace of 100,000 map elements with comments with no listener to
// the event group ("unwatched"), with the Conn's own Monitor as shipped (a quiet batch:
// "watched"), and with another socket listening throughout ("listened", which makes the kernel
// build an event per element in the commit). Reports the process's system CPU per Replace.
//
//	go test -run '^$' -bench ReplaceWatched -benchtime 5x ./internal/nft/ruleset/
func BenchmarkReplaceWatched(b *testing.B) {
	const n = 100_000
	tb := NewTable("watched")
	tb.Chains["pod"] = &Chain{Name: "pod", Rules: []Rule{{Verdict: Verdict{Kind: Drop}}}}
	big := newSet("big", KeyIPSaddr, true, false, "")
	for i := range n {
		put(big, addrKey(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)), goTo("pod"), fmt.Sprintf("namespace-%d/pod-%d", i%100, i))
	}
	tb.Sets["big"] = big
	for _, mode := range []string{"unwatched", "watched", "listened"} {
		b.Run(mode, func(b *testing.B) {
			c, _ := openConn(b)
			switch mode {
			case "watched":
				m, err := c.Monitor("watched", make(chan TableChange, 1))
				if err != nil {
					b.Fatal(err)
				}
				testenv.Go(b, "Monitor.Run", m.Run)
			case "listened":
				cfg := &netlink.Config{NetNS: c.netnsFD}
				l, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Close() })
				if err := l.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
					b.Fatal(err)
				}
			}
			var before, after unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &before)
			b.ResetTimer()
			for range b.N {
				if err := c.Replace(tb); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			unix.Getrusage(unix.RUSAGE_SELF, &after)
			b.ReportMetric(float64(after.Stime.Nano()-before.Stime.Nano())/1e6/float64(b.N), "sys-ms/op")
		})
	}
}
