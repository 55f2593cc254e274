package ruleset

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

// TestReplaceRoundTrip: the kernel lists a replaced table as Render prints it.
func TestReplaceRoundTrip(t *testing.T) {
	c, ns := openConn(t)
	want := sampleTable("roundtrip")
	if err := c.Replace(want); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	assertKernel(t, ns, want)
	// what the kernel lists parses again
	nftIn(t, ns, nftIn(t, ns, "", "list", "table", "inet", want.Name), "-c", "-f", "-")
	if got, w := Render(c.Committed()), Render(want); got != w {
		t.Errorf("mirror differs from desired")
	}
	// Replacing again (table present) is one more transaction and leaves the same table.
	if err := c.Replace(want); err != nil {
		t.Fatalf("second Replace: %v", err)
	}
	assertKernel(t, ns, want)
	if c.Batches() != 2 {
		t.Errorf("batches = %d, want 2", c.Batches())
	}
}

func names(ns ...string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, n := range ns {
		m[n] = struct{}{}
	}
	return m
}

// TestCommitIncremental applies a sequence of changes with Commit, each naming what it touched;
// after each the kernel lists the desired table and the mirror equals it.
func TestCommitIncremental(t *testing.T) {
	c, ns := openConn(t)
	desired := sampleTable("incr")
	if err := c.Commit(desired, nil); err != nil { // no mirror yet: a Replace
		t.Fatalf("first Commit: %v", err)
	}
	assertKernel(t, ns, desired)

	steps := []struct {
		name    string
		change  func(t *Table)
		changes *Changes
		replace bool // the kernel cannot do it in place
	}{
		{"add a pod chain and its dispatch element", func(t *Table) {
			t.Chains["pod_c"] = &Chain{Name: "pod_c", Comment: "ingress of default/c", Rules: []Rule{{Verdict: goTo("deny_x"), Comment: "default deny"}}}
			put(t.Sets["ingress_v4"], addrKey("10.0.0.3"), goTo("pod_c"), "default/c")
		}, &Changes{Sets: names("ingress_v4"), Chains: names("pod_c")}, false},
		{"remove the element and the chain it pointed to", func(t *Table) {
			delete(t.Chains, "pod_c")
			t.Sets["ingress_v4"].Delete(addrKey("10.0.0.3"))
		}, &Changes{Sets: names("ingress_v4"), Chains: names("pod_c")}, false},
		{"change a rule", func(t *Table) {
			t.Chains["class_x"].Rules[2] = Rule{Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "changed"}
		}, &Changes{Chains: names("class_x")}, false},
		{"change an element's verdict and comment", func(t *Table) {
			put(t.Sets["peers_a"], addrKey("10.0.1.6"), goTo("class_x"), "now a peer")
		}, &Changes{Sets: names("peers_a")}, false},
		{"repartition an interval map", func(t *Table) {
			s := t.Sets["nets_v4"]
			s.Delete(prefixKey("10.1.0.0/16"))
			put(s, prefixKey("10.1.0.0/17"), goTo("class_x"), "lower half")
			put(s, rangeKey("10.1.128.0", "10.1.200.255"), Verdict{Kind: Drop}, "upper part")
			s.Delete(prefixKey("240.0.0.0/4"))
			put(s, prefixKey("240.0.0.0/5"), Verdict{Kind: Return}, "")
		}, &Changes{Sets: names("nets_v4")}, false},
		{"change port intervals", func(t *Table) {
			s := t.Sets["class_x_ports"]
			s.Delete(ElementKey{Proto: 6, Port: 8000, PortEnd: 8100})
			put(s, ElementKey{Proto: 6, Port: 8000, PortEnd: 8049}, Verdict{Kind: Accept}, "")
			put(s, ElementKey{Proto: 6, Port: 8050, PortEnd: 8100}, goTo("deny_x"), "split")
		}, &Changes{Sets: names("class_x_ports")}, false},
		{"add a set and a rule using it", func(t *Table) {
			s := newSet("extra_v6", KeyIP6Daddr, false, true, "new set")
			put(s, prefixKey("2001:db8::/32"), Verdict{}, "doc")
			t.Sets[s.Name] = s
			t.Chains["deny_x"].Rules = append([]Rule{{Lookups: []Lookup{{Key: KeyIP6Daddr, Set: "extra_v6"}}, Verdict: Verdict{Kind: Accept}}}, t.Chains["deny_x"].Rules...)
		}, &Changes{Sets: names("extra_v6"), Chains: names("deny_x")}, false},
		{"delete a set with the rule using it and a chain referenced from a deleted map", func(t *Table) {
			delete(t.Sets, "extra_v6")
			t.Chains["deny_x"].Rules = t.Chains["deny_x"].Rules[1:]
			delete(t.Sets, "class_x_l4") // its elements may point at chains: deleted whole
			t.Chains["class_x"].Rules = slicesDelete(t.Chains["class_x"].Rules, 1)
		}, &Changes{Sets: names("extra_v6", "class_x_l4"), Chains: names("deny_x", "class_x")}, false},
		{"add a map whose element jumps to a new chain", func(t *Table) {
			t.Chains["class_gone"] = &Chain{Name: "class_gone", Rules: []Rule{{Verdict: goTo("deny_x")}}}
			t.Sets["class_gone_l4"] = &Set{Name: "class_gone_l4", Key: KeyL4Proto, Map: true,
				Elements: map[ElementKey]Value{{Proto: 6}: {Verdict: goTo("class_gone")}}}
		}, &Changes{Sets: names("class_gone_l4"), Chains: names("class_gone")}, false},
		{"delete that map and the chain only it jumped to, in place (the map is not emptied first)", func(t *Table) {
			delete(t.Sets, "class_gone_l4")
			delete(t.Chains, "class_gone")
		}, &Changes{Sets: names("class_gone_l4"), Chains: names("class_gone")}, false},
		{"elements changed in place in sets the changes do not name", func(t *Table) {
			put(t.Sets["ingress_v4"], addrKey("10.0.0.4"), goTo("pod_a"), "default/d")
			put(t.Sets["ingress_v4"], addrKey("10.9.9.9"), goTo("pod_a"), "added and removed again")
			t.Sets["ingress_v4"].Delete(addrKey("10.9.9.9"))
			t.Sets["peers_a"].Delete(addrKey("10.0.1.5"))
			put(t.Sets["nets_v6"], prefixKey("fd00:1::/64"), Verdict{Kind: Accept}, "changed")
		}, &Changes{}, false},
		{"a set replaced by another object is compared whole", func(t *Table) {
			s := t.Sets["peers_a"].Clone()
			put(s, addrKey("10.0.1.7"), goTo("class_x"), "in the new object")
			t.Sets["peers_a"].Delete(addrKey("10.0.1.6")) // on the old object: not in the table any more
			t.Sets["peers_a"] = s
		}, &Changes{Sets: names("peers_a")}, false},
		{"a sized map fills up to its size in place", func(t *Table) {
			put(t.Sets["peers_a"], addrKey("10.0.1.8"), Verdict{Kind: Drop}, "")
			put(t.Sets["peers_a"], addrKey("10.0.1.9"), Verdict{Kind: Drop}, "")
		}, &Changes{Sets: names("peers_a")}, false},
		{"a set's size changes (the set alone written anew: the kernel keeps a set's size)", func(t *Table) {
			t.Sets["peers_a"].Size = 8
			put(t.Sets["peers_a"], addrKey("10.0.1.10"), Verdict{Kind: Drop}, "")
		}, &Changes{Sets: names("peers_a")}, false},
		{"a set's comment changes (a Replace)", func(t *Table) {
			t.Sets["peers_a"].Comment = "renamed"
		}, &Changes{Sets: names("peers_a")}, true},
		{"a chain comment changes (a Replace)", func(t *Table) {
			t.Chains["pod_a"].Comment = "renamed"
		}, &Changes{Chains: names("pod_a")}, true},
		{"everything at once with nil changes", func(t *Table) {
			t.Chains["pod_b"] = &Chain{Name: "pod_b", Rules: []Rule{{Verdict: goTo("deny_x")}}}
			put(t.Sets["ingress_v4"], addrKey("10.0.0.2"), goTo("pod_b"), "default/b")
			put(t.Sets["ingress_v6"], addrKey("fd00::2"), goTo("pod_b"), "default/b")
			t.Sets["local_v4"].Delete(addrKey("10.0.0.1"))
		}, nil, false},
	}
	for _, st := range steps {
		st.change(desired)
		batches, replaces := c.batches, c.replaces
		if err := c.Commit(desired, st.changes); err != nil {
			t.Fatalf("%s: Commit: %v", st.name, err)
		}
		if c.batches != batches+1 {
			t.Errorf("%s: %d batches, want 1", st.name, c.batches-batches)
		}
		if replaced := c.replaces != replaces; replaced != st.replace {
			t.Errorf("%s: replaced the table = %v, want %v", st.name, replaced, st.replace)
		}
		assertKernel(t, ns, desired)
		if got, want := Render(c.Committed()), Render(desired); got != want {
			t.Fatalf("%s: mirror differs from desired:\n%s\nwant\n%s", st.name, got, want)
		}
		if drift, err := c.Verify(); err != nil || drift {
			t.Fatalf("%s: Verify = %v, %v; want no drift", st.name, drift, err)
		}
	}
	// A committed set changed in place sends what Put and Delete recorded, whether Changes
	// names it or not.
	put(desired.Sets["ingress_v4"], addrKey("10.0.0.5"), goTo("pod_a"), "named")
	put(desired.Sets["ingress_v6"], addrKey("fd00::5"), goTo("pod_a"), "not named")
	desired.Sets["peers_a"].Delete(addrKey("10.0.1.5"))
	if err := c.Commit(desired, &Changes{Sets: names("ingress_v4")}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, desired)
	// The mirror shares the caller's elements, but Committed and Verify see what the kernel
	// holds, not the caller's later edits.
	desired.Sets["ingress_v4"].Delete(addrKey("10.0.0.5"))
	put(desired.Sets["ingress_v4"], addrKey("10.0.0.7"), goTo("pod_a"), "not yet")
	put(desired.Sets["ingress_v4"], addrKey("10.0.0.1"), goTo("pod_b"), "changed, not yet")
	m := c.Committed().Sets["ingress_v4"].Elements
	if v, ok := m[addrKey("10.0.0.5")]; !ok || v.Comment != "named" {
		t.Errorf("an uncommitted delete reached the mirror")
	}
	if _, ok := m[addrKey("10.0.0.7")]; ok {
		t.Errorf("an uncommitted add reached the mirror")
	}
	if v := m[addrKey("10.0.0.1")]; v.Verdict != goTo("pod_a") {
		t.Errorf("an uncommitted change reached the mirror: %v", v)
	}
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify with uncommitted edits = %v, %v; want no drift", drift, err)
	}
	if err := c.Commit(desired, &Changes{}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, desired)
}

func slicesDelete(r []Rule, i int) []Rule { return append(r[:i:i], r[i+1:]...) }

// TestEdgeKeys: keys at the ends of their spaces round-trip through the kernel.
func TestEdgeKeys(t *testing.T) {
	c, ns := openConn(t)
	tb := NewTable("edges")
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{
		{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "all4", Map: true}}},
		{Lookups: []Lookup{{Key: KeyIP6Saddr, Set: "all6", Map: true}}},
		{Lookups: []Lookup{{Key: KeyL4ProtoDport, Set: "ports", Map: true}}},
		{Lookups: []Lookup{{Key: KeyL4ProtoDport, Set: "exact"}}, Iifname: "eth0", Verdict: Verdict{Kind: Return}},
		{Lookups: []Lookup{{Key: KeyIPDaddr, Set: "low4"}}, Counter: true, Verdict: Verdict{Kind: Accept}},
	}}
	all4 := newSet("all4", KeyIPSaddr, true, true, "")
	put(all4, prefixKey("0.0.0.0/0"), Verdict{Kind: Accept}, "everything")
	tb.Sets["all4"] = all4
	all6 := newSet("all6", KeyIP6Saddr, true, true, "")
	put(all6, prefixKey("::/1"), Verdict{Kind: Drop}, "")
	put(all6, rangeKey("8000::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"), Verdict{Kind: Accept}, "")
	tb.Sets["all6"] = all6
	ports := newSet("ports", KeyL4ProtoDport, true, true, "")
	put(ports, ElementKey{Proto: 6, Port: 0, PortEnd: 65535}, Verdict{Kind: Accept}, "")
	put(ports, ElementKey{Proto: 17, Port: 65535, PortEnd: 65535}, Verdict{Kind: Drop}, "")
	put(ports, ElementKey{Proto: 99, Port: 1, PortEnd: 2}, Verdict{Kind: Drop}, "")
	tb.Sets["ports"] = ports
	exact := newSet("exact", KeyL4ProtoDport, false, false, "")
	put(exact, ElementKey{Proto: 6, Port: 22, PortEnd: 22}, Verdict{}, "ssh")
	tb.Sets["exact"] = exact
	low4 := newSet("low4", KeyIPDaddr, false, true, "")
	put(low4, prefixKey("0.0.0.0/8"), Verdict{}, "")
	put(low4, addrKey("255.255.255.255"), Verdict{}, "broadcast")
	tb.Sets["low4"] = low4
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify = %v, %v", drift, err)
	}
}

// TestAddrSet: a set of plain addresses held in addrs (NewAddrSet) is programmed, changed in
// place (one transaction, no Replace), read back and rendered like the same set held in Elements;
// an element addrs cannot hold moves the set to Elements, and the commit still lands.
func TestAddrSet(t *testing.T) {
	c, ns := openConn(t)
	tb := NewTable("addrs")
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "sel_v4"}}, Verdict: Verdict{Kind: Accept}}}}
	s := NewAddrSet("sel_v4", KeyIPSaddr, "app == 'a'", 3)
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"} {
		s.Put(Element{ElementKey: addrKey(a)})
	}
	tb.Sets[s.Name] = s
	if s.Len() != 3 || len(s.Elements) != 0 {
		t.Fatalf("addresses held as %d in addrs, %d in Elements", s.addrs.len(), len(s.Elements))
	}
	if got, want := Render(tb), Render(tb.Clone()); got != want {
		t.Fatalf("a clone renders differently:\n%s\nwant\n%s", got, want)
	}
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)

	s.Delete(addrKey("10.0.0.2"))
	s.Put(Element{ElementKey: addrKey("10.0.0.4")})
	s.Delete(rangeKey("10.0.0.1", "10.0.0.3")) // no such element: nothing
	replaces := c.replaces
	if err := c.Commit(tb, &Changes{}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)
	if c.replaces != replaces {
		t.Errorf("an in-place change of an address set replaced the table")
	}
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify = %v, %v; want no drift", drift, err)
	}

	s.Put(Element{ElementKey: addrKey("10.0.0.9"), Value: Value{Comment: "with a comment"}})
	if s.addrs.len() != 0 || len(s.Elements) != 4 {
		t.Fatalf("after a commented element: %d in addrs, %d in Elements; want all in Elements", s.addrs.len(), len(s.Elements))
	}
	if err := c.Commit(tb, &Changes{}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify = %v, %v; want no drift", drift, err)
	}
}

// TestSetRebuiltAsItWas: a set replaced in the table by another object holding the same
// elements (nft's State rebuilds a selector set when the graph replaces it whole) sends nothing,
// and the next in-place change of the new object reaches the kernel: the mirror took the new
// object and journals its changes. (An IP address taken by a pod of other labels and given back
// lost its selector set's element when the mirror kept the old object.)
func TestSetRebuiltAsItWas(t *testing.T) {
	c, ns := openConn(t)
	tb := NewTable("rebuilt")
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "sel_v4"}}, Verdict: Verdict{Kind: Accept}}}}
	tb.Sets["sel_v4"] = NewAddrSet("sel_v4", KeyIPSaddr, "app == 'a'", 0)
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // an empty set rebuilt empty, then one of an element rebuilt with it
		s := NewAddrSet("sel_v4", KeyIPSaddr, "app == 'a'", 0)
		if i == 1 {
			s.Put(Element{ElementKey: addrKey("10.0.0.5")})
		}
		tb.Sets[s.Name] = s
		if err := c.Commit(tb, &Changes{Sets: names(s.Name)}); err != nil {
			t.Fatal(err)
		}
		assertKernel(t, ns, tb)
		s.Put(Element{ElementKey: addrKey("10.0.0.5")})
		s.Put(Element{ElementKey: addrKey(fmt.Sprintf("10.0.0.%d", 6+i))})
		if err := c.Commit(tb, &Changes{}); err != nil {
			t.Fatal(err)
		}
		assertKernel(t, ns, tb)
		if drift, err := c.Verify(); err != nil || drift {
			t.Fatalf("rebuild %d: Verify = %v, %v; want no drift", i, drift, err)
		}
		s.Delete(addrKey("10.0.0.5"))
		if err := c.Commit(tb, &Changes{}); err != nil {
			t.Fatal(err)
		}
		assertKernel(t, ns, tb)
	}
}

// TestUnjournaled: right after a commit the mirror accounts for every object of the desired
// table; a set swapped for another object, a change made and not committed, a set or chain added
// or dropped behind the commits are each named.
func TestUnjournaled(t *testing.T) {
	c, _, tb := committedSample(t, "unjournaled")
	if got := c.Unjournaled(tb); got != "" {
		t.Fatalf("right after Replace: %q, want none", got)
	}
	name := "local_v4" // the sample's plain set of IPv4 addresses
	if s := tb.Sets[name]; s == nil || s.Key != KeyIPDaddr {
		t.Fatalf("the sample table has no plain IPv4 set %s", name)
	}
	for _, tc := range []struct {
		what   string
		change func()
		want   string
	}{
		{"an element put", func() { tb.Sets[name].Put(Element{ElementKey: addrKey("192.0.2.77")}) }, "set " + name + ": changes no commit sent"},
		{"the set swapped for a copy", func() { tb.Sets[name] = tb.Sets[name].Clone() }, "set " + name + ": another object than the one committed"},
		{"a set added", func() { tb.Sets["extra"] = newSet("extra", KeyIPSaddr, false, false, "") }, "set extra: not committed"},
		{"a rule added", func() {
			tb.Chains["extra"] = &Chain{Name: "extra", Rules: []Rule{{Verdict: Verdict{Kind: Accept}}}}
		}, "chain extra: not as committed"},
	} {
		tc.change()
		if got := c.Unjournaled(tb); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.what, got, tc.want)
		}
		if err := c.Commit(tb, nil); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if got := c.Unjournaled(tb); got != "" {
			t.Errorf("%s, committed: %q, want none", tc.what, got)
		}
	}
}

// TestSetKeptOutsideTable: a set's owner may keep a set that has left the table and go on
// changing it (nft's State owns its selector sets and puts them in the table only while a group
// uses them). Once out of the committed table the set records nothing; put back, it is committed
// whole with what it holds then.
func TestSetKeptOutsideTable(t *testing.T) {
	c, ns := openConn(t)
	tb := NewTable("kept")
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "sel_v4"}}, Verdict: Verdict{Kind: Accept}}}}
	s := NewAddrSet("sel_v4", KeyIPSaddr, "app == 'a'", 0)
	s.Put(Element{ElementKey: addrKey("10.0.0.1")})
	tb.Sets[s.Name] = s
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	s.Put(Element{ElementKey: addrKey("10.0.0.2")}) // journaled: the set is committed
	s.Put(Element{ElementKey: addrKey("10.0.0.1")}) // unchanged: not journaled
	s.Delete(addrKey("10.0.0.7"))                   // absent: not journaled
	if len(s.journal.prior) != 1 {
		t.Fatalf("journal of a committed set holds %d keys, want 1 (the one changed)", len(s.journal.prior))
	}

	// out of the table, then changed by its owner
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{{Verdict: Verdict{Kind: Accept}}}}
	delete(tb.Sets, s.Name)
	if err := c.Commit(tb, &Changes{Sets: names(s.Name), Chains: names("c")}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)
	for i := 3; i < 50; i++ {
		s.Put(Element{ElementKey: addrKey(fmt.Sprintf("10.0.0.%d", i))})
	}
	s.Delete(addrKey("10.0.0.1"))
	if s.journal.prior != nil {
		t.Errorf("a set out of the table journals %d keys", len(s.journal.prior))
	}

	// back in: committed whole, then journaled again
	tb.Chains["c"] = &Chain{Name: "c", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "sel_v4"}}, Verdict: Verdict{Kind: Accept}}}}
	tb.Sets[s.Name] = s
	if err := c.Commit(tb, &Changes{Sets: names(s.Name), Chains: names("c")}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)
	s.Delete(addrKey("10.0.0.2"))
	if err := c.Commit(tb, &Changes{}); err != nil {
		t.Fatal(err)
	}
	assertKernel(t, ns, tb)
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify = %v, %v; want no drift", drift, err)
	}
}

// TestAddrSetKeys: a set of plain addresses gives back each address as it was put (IPv4, IPv6,
// an IPv4-mapped IPv6 address, which is another address), and keeps a zoned one in Elements.
func TestAddrSetKeys(t *testing.T) {
	s := NewAddrSet("s", KeyIP6Saddr, "", 0)
	plain := []netip.Addr{ip("10.1.2.3"), ip("fd00::1"), ip("::ffff:10.1.2.3"), ip("::"), ip("0.0.0.0")}
	for _, a := range plain {
		s.Put(Element{ElementKey: AddrKey(a)})
	}
	if s.addrs.len() != len(plain) || len(s.Elements) != 0 {
		t.Fatalf("%d in addrs, %d in Elements; want %d, 0", s.addrs.len(), len(s.Elements), len(plain))
	}
	got := slices.SortedFunc(s.Addresses(), netip.Addr.Compare)
	want := slices.SortedFunc(slices.Values(plain), netip.Addr.Compare)
	if !slices.Equal(got, want) {
		t.Errorf("Addresses() = %v, want %v", got, want)
	}
	for _, a := range plain {
		if _, ok := s.Get(AddrKey(a)); !ok {
			t.Errorf("Get(%s) = absent", a)
		}
	}
	if _, ok := s.Get(AddrKey(ip("10.1.2.4"))); ok {
		t.Error("Get of an address never put = present")
	}
	zoned := ip("fe80::1%eth0")
	if _, ok := s.Get(AddrKey(zoned.WithZone(""))); ok {
		t.Error("the zone-less form of an address never put is present")
	}
	s.Put(Element{ElementKey: AddrKey(zoned)})
	if _, ok := s.Get(AddrKey(zoned)); !ok || s.addrs.len() != 0 {
		t.Errorf("a zoned address: present %v, %d left in addrs; want present, all moved to Elements", ok, s.addrs.len())
	}
}
