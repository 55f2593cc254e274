package ruleset

import (
	"fmt"
	"net/netip"
	"testing"
)

// TestRemadeChainWrittenAlone: a chain whose comment changed (a group chain whose name passed
// to a group of other policies) is remade in one incremental batch — the rules and map elements
// that jump to it deleted, the chain deleted and added anew with its rules, those rules and
// elements put back — without a Replace and without touching the table's other sets and
// elements; the kernel then holds the desired table. The batch's objects are read as the
// kernel reports them to another connection's Monitor.
func TestRemadeChainWrittenAlone(t *testing.T) {
	c, ns := openConn(t)
	const name = "remake"
	tb := NewTable(name)
	addr := func(i int) ElementKey {
		a := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		return ElementKey{Addr: a, AddrEnd: a}
	}
	tb.Chains["in_grp"] = &Chain{Name: "in_grp", Comment: "ingress: default/a", Rules: []Rule{
		{Lookups: []Lookup{{Key: KeyIPSaddr, Set: "peers"}}, Verdict: Verdict{Kind: Accept}},
		{Verdict: Verdict{Kind: Drop}},
	}}
	tb.Chains["in_other"] = &Chain{Name: "in_other", Comment: "ingress: default/b", Rules: []Rule{{Verdict: Verdict{Kind: Drop}}}}
	tb.Chains["entry"] = &Chain{Name: "entry", Rules: []Rule{
		{Lookups: []Lookup{{Key: KeyIPDaddr, Set: "dispatch", Map: true}}},
		{Verdict: Verdict{Kind: Jump, Chain: "in_grp"}, Comment: "the rest"},
	}}
	dispatch := &Set{Name: "dispatch", Key: KeyIPDaddr, Map: true, Elements: map[ElementKey]Value{}}
	for i := range 4 {
		to := "in_other"
		if i < 2 {
			to = "in_grp"
		}
		dispatch.Put(Element{ElementKey: addr(i), Value: Value{Verdict: Verdict{Kind: Goto, Chain: to}, Comment: fmt.Sprint("pod ", i)}})
	}
	peers := NewAddrSet("peers", KeyIPSaddr, "", 0)
	for i := range 100 {
		peers.Put(Element{ElementKey: addr(1000 + i)})
	}
	tb.Sets["dispatch"], tb.Sets["peers"] = dispatch, peers
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}

	out := watchFromAnother(t, ns, name)

	// the name passes to a group of other policies, which gains a member and loses one
	tb.Chains["in_grp"].Comment = "ingress: default/c default/d"
	dispatch.Put(Element{ElementKey: addr(4), Value: Value{Verdict: Verdict{Kind: Goto, Chain: "in_grp"}, Comment: "pod 4"}})
	dispatch.Delete(addr(1))
	commitInOneBatch(t, c, ns, tb, &Changes{Sets: names("dispatch"), Chains: names("in_grp")}, out, "the remake", []ObjectChange{
		{Op: "delete", Kind: "rule", Name: "entry", Count: 2},
		{Op: "delete", Kind: "element", Name: "dispatch", Count: 2},
		{Op: "delete", Kind: "rule", Name: "in_grp", Count: 2},
		{Op: "delete", Kind: "chain", Name: "in_grp", Count: 1},
		{Op: "add", Kind: "chain", Name: "in_grp", Count: 1},
		{Op: "add", Kind: "element", Name: "dispatch", Count: 2},
		{Op: "add", Kind: "rule", Name: "in_grp", Count: 2},
		{Op: "add", Kind: "rule", Name: "entry", Count: 2},
	})
	// a further change goes in place
	dispatch.Put(Element{ElementKey: addr(5), Value: Value{Verdict: Verdict{Kind: Goto, Chain: "in_grp"}, Comment: "pod 5"}})
	commitInOneBatch(t, c, ns, tb, &Changes{}, out, "the element after", []ObjectChange{{Op: "add", Kind: "element", Name: "dispatch", Count: 1}})
}
