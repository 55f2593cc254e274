package ruleset

import (
	"net/netip"
	"regexp"
	"testing"
)

// TestResizedSetWrittenAlone: a set whose size alone changed (one that outgrew it) is written
// anew in one incremental batch — the chains that look it up flushed and refilled, the set
// deleted and added with every element — without a Replace and without touching the table's
// other sets; the kernel then holds the desired table. The batch's objects are read as the
// kernel reports them to another connection's Monitor.
func TestResizedSetWrittenAlone(t *testing.T) {
	c, ns := openConn(t)
	const name = "resize"
	tb := NewTable(name)
	tb.Chains["uses_big"] = &Chain{Name: "uses_big", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "big"}}, Verdict: Verdict{Kind: Accept}}}}
	tb.Chains["uses_other"] = &Chain{Name: "uses_other", Rules: []Rule{{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "other"}}, Verdict: Verdict{Kind: Accept}}}}
	big, other := NewAddrSet("big", KeyIPSaddr, "", 0), NewAddrSet("other", KeyIPSaddr, "", 0)
	big.Size = 4
	addr := func(i int) ElementKey {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		return ElementKey{Addr: a, AddrEnd: a}
	}
	for i := range 4 {
		big.Put(Element{ElementKey: addr(i)})
		other.Put(Element{ElementKey: addr(1000 + i)})
	}
	tb.Sets["big"], tb.Sets["other"] = big, other
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}

	out := watchFromAnother(t, ns, name)

	for i := 4; i < 6; i++ {
		big.Put(Element{ElementKey: addr(i)})
	}
	big.Size = 8
	commitInOneBatch(t, c, ns, tb, &Changes{Sets: map[string]struct{}{"big": {}}}, out, "the resize", []ObjectChange{
		{Op: "delete", Kind: "rule", Name: "uses_big", Count: 1},
		{Op: "delete", Kind: "set", Name: "big", Count: 1},
		{Op: "add", Kind: "set", Name: "big", Count: 1},
		{Op: "add", Kind: "element", Name: "big", Count: 6},
		{Op: "add", Kind: "rule", Name: "uses_big", Count: 1},
	})
	if got := nftIn(t, ns, "", "list", "set", "inet", name, "big"); !regexp.MustCompile(`(?m)^\s*size 8$`).MatchString(got) {
		t.Errorf("the kernel lists the set as\n%s\nwant size 8", got)
	}
	// a further element goes in place
	big.Put(Element{ElementKey: addr(7)})
	commitInOneBatch(t, c, ns, tb, &Changes{}, out, "the element after", []ObjectChange{{Op: "add", Kind: "element", Name: "big", Count: 1}})
}
