package ruleset

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// genWatcher counts the transactions (NFT_MSG_NEWGEN notifications) committed in a namespace.
type genWatcher struct {
	tb    testing.TB
	nl    *netlink.Conn
	other *nftables.Conn
	seq   int
}

func watchGens(tb testing.TB, fd int) *genWatcher {
	tb.Helper()
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: fd})
	if err != nil {
		tb.Fatalf("netlink dial: %v", err)
	}
	tb.Cleanup(func() { nl.Close() })
	if err := nl.SetReadBuffer(64 << 20); err != nil { // every element is a notification
		tb.Fatal(err)
	}
	if err := nl.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		tb.Fatalf("joining NFNLGRP_NFTABLES: %v", err)
	}
	other, err := nftables.New(nftables.WithNetNSFd(fd))
	if err != nil {
		tb.Fatal(err)
	}
	return &genWatcher{tb: tb, nl: nl, other: other}
}

// transactions returns the number of transactions since the last call. It commits a marker
// table of its own and reads notifications up to it, so nothing is left in flight.
func (w *genWatcher) transactions() int {
	w.tb.Helper()
	w.seq++
	marker := &nftables.Table{Name: "marker" + strings.Repeat("x", w.seq), Family: nftables.TableFamilyINet}
	w.other.AddTable(marker)
	if err := w.other.Flush(); err != nil {
		w.tb.Fatalf("marker transaction: %v", err)
	}
	// a safety net against a hang, not a timing assertion: the notifications were queued
	// before the marker's Flush returned
	if err := w.nl.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		w.tb.Fatal(err)
	}
	gens, seenMarker := 0, false
	for {
		msgs, err := w.nl.Receive()
		if err != nil {
			w.tb.Fatalf("reading notifications: %v", err)
		}
		for _, m := range msgs {
			typ := m.Header.Type & 0xff
			if m.Header.Type>>8 != unix.NFNL_SUBSYS_NFTABLES {
				continue
			}
			switch typ {
			case unix.NFT_MSG_NEWGEN:
				if seenMarker {
					return gens // the marker's own generation
				}
				gens++
			case unix.NFT_MSG_NEWTABLE:
				ad, err := netlink.NewAttributeDecoder(m.Data[4:])
				if err != nil {
					w.tb.Fatal(err)
				}
				for ad.Next() {
					if ad.Type() == unix.NFTA_TABLE_NAME && ad.String() == marker.Name {
						seenMarker = true
					}
				}
			}
		}
	}
}

// TestOneTransactionPerCommit counts new-generation notifications: every Replace and Commit is
// exactly one transaction, also one that adds and deletes many objects.
func TestOneTransactionPerCommit(t *testing.T) {
	ns, fd := newNetns(t)
	c, err := Open(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := watchGens(t, fd)
	if n := w.transactions(); n != 0 {
		t.Fatalf("%d transactions before any commit", n)
	}
	desired := sampleTable("atomic")
	if err := c.Replace(desired); err != nil {
		t.Fatal(err)
	}
	if n := w.transactions(); n != 1 {
		t.Errorf("Replace: %d transactions, want 1", n)
	}
	for i := range 3000 { // several element chunks
		put(desired.Sets["ingress_v4"], addrKey(fmtAddr(10, 50, i)), goTo("pod_a"), "bulk")
	}
	desired.Chains["pod_z"] = &Chain{Name: "pod_z", Rules: []Rule{{Verdict: Verdict{Kind: Drop}}}}
	put(desired.Sets["ingress_v6"], addrKey("fd00::9"), goTo("pod_z"), "")
	delete(desired.Sets, "local_v6")
	desired.Chains["output"].Rules = desired.Chains["output"].Rules[:2]
	if err := c.Commit(desired, nil); err != nil {
		t.Fatal(err)
	}
	if n := w.transactions(); n != 1 {
		t.Errorf("Commit: %d transactions, want 1", n)
	}
	assertKernel(t, ns, desired)
	// nothing to do: no transaction at all
	if err := c.Commit(desired, nil); err != nil {
		t.Fatal(err)
	}
	if n := w.transactions(); n != 0 {
		t.Errorf("empty Commit: %d transactions, want 0", n)
	}
}

func fmtAddr(a, b byte, i int) string {
	return strings.Join([]string{itoa(int(a)), itoa(int(b)), itoa(i / 256), itoa(i % 256)}, ".")
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestFailedCommitChangesNothing: a Commit with one bad part (an element jumping to a chain that
// does not exist) fails as a whole; the kernel table and the mirror stay as they were, and the
// next Commit works.
func TestFailedCommitChangesNothing(t *testing.T) {
	c, ns, before := committedSample(t, "failing")
	bad := before.Clone()
	put(bad.Sets["ingress_v4"], addrKey("10.0.0.9"), goTo("pod_a"), "fine on its own")
	bad.Chains["pod_new"] = &Chain{Name: "pod_new", Rules: []Rule{{Verdict: Verdict{Kind: Accept}}}}
	bad.Sets["peers_a"].Delete(addrKey("10.0.1.6"))
	put(bad.Sets["ingress_v6"], addrKey("fd00::7"), goTo("no_such_chain"), "broken")
	err := c.Commit(bad, nil)
	if err == nil {
		t.Fatal("Commit with an element pointing to a missing chain succeeded")
	}
	t.Logf("expected error: %v", err)
	assertKernel(t, ns, before)
	if Render(c.Committed()) != Render(before) {
		t.Errorf("mirror changed by a failed commit")
	}
	// the connection still works, and the good part of it commits
	bad.Sets["ingress_v6"].Delete(addrKey("fd00::7"))
	if err := c.Commit(bad, nil); err != nil {
		t.Fatalf("Commit after a failure: %v", err)
	}
	assertKernel(t, ns, bad)
}

// TestUnencodableCommitSendsNothing: an object the batch cannot encode (an IPv6 address in an
// IPv4 set), met after other changes were already queued, fails the Commit or Replace before
// anything is sent; the kernel table and the mirror stay as they were, and what was queued does
// not leak into the next batch.
func TestUnencodableCommitSendsNothing(t *testing.T) {
	c, ns, before := committedSample(t, "unencodable")
	bad := before.Clone()
	bad.Chains["pod_new"] = &Chain{Name: "pod_new", Rules: []Rule{{Verdict: Verdict{Kind: Accept}}}}
	put(bad.Sets["ingress_v4"], addrKey("10.0.0.9"), goTo("pod_new"), "queued before the bad one")
	for _, tc := range []struct {
		name      string
		bad, undo func(*Table)
		wantInErr string
	}{
		{"an IPv6 element in an IPv4 set", func(t *Table) { put(t.Sets["ingress_v4"], addrKey("fd00::9"), goTo("pod_a"), "wrong family") },
			func(t *Table) { t.Sets["ingress_v4"].Delete(addrKey("fd00::9")) }, "ingress_v4"},
		{"more elements than the set's size", func(t *Table) {
			for _, a := range []string{"10.0.1.97", "10.0.1.98", "10.0.1.99"} {
				put(t.Sets["peers_a"], addrKey(a), Verdict{Kind: Drop}, "")
			}
		}, func(t *Table) {
			for _, a := range []string{"10.0.1.97", "10.0.1.98", "10.0.1.99"} {
				t.Sets["peers_a"].Delete(addrKey(a))
			}
		}, "peers_a: 5 elements, more than its size 4"},
		{"a size on an interval set", func(t *Table) { t.Sets["nets_v4"].Size = 100 },
			func(t *Table) { t.Sets["nets_v4"].Size = 0 }, "nets_v4: a size on an interval set"},
	} {
		tc.bad(bad)
		for _, op := range []struct {
			name string
			do   func() error
		}{{"Commit", func() error { return c.Commit(bad, nil) }}, {"Replace", func() error { return c.Replace(bad) }}} {
			batches := c.Batches()
			if err := op.do(); err == nil || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Fatalf("%s with %s: %v, want an error naming %q", op.name, tc.name, err, tc.wantInErr)
			} else {
				t.Logf("%s: expected error: %v", op.name, err)
			}
			if c.Batches() != batches {
				t.Errorf("%s with %s sent a batch", op.name, tc.name)
			}
			assertKernel(t, ns, before)
			if Render(c.Committed()) != Render(before) {
				t.Errorf("mirror changed by a failed %s with %s", op.name, tc.name)
			}
		}
		tc.undo(bad)
	}
	// the next Commit carries only its own changes
	bad.Sets["ingress_v4"].Delete(addrKey("10.0.0.9"))
	if err := c.Commit(bad, nil); err != nil {
		t.Fatalf("Commit after a failure: %v", err)
	}
	assertKernel(t, ns, bad)
}
