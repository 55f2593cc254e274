package ruleset

import (
	"fmt"
	"testing"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// BenchmarkCommitOneElement: with 2,000 sets of 100 elements committed, each iteration adds or
// removes one element through Commit naming one set (one netlink transaction). The "bare"
// variant sends the same one-element batch straight through google/nftables (the floor: netlink
// round trip and kernel commit) for comparison.
func BenchmarkCommitOneElement(b *testing.B) {
	b.Run("commit", func(b *testing.B) { benchOneElement(b, false, 2000, 100) })
	b.Run("bare", func(b *testing.B) { benchOneElement(b, true, 2000, 100) })
	// a set changed in place costs the keys changed, whatever its size
	b.Run("commit-set100k", func(b *testing.B) { benchOneElement(b, false, 8, 100_000) })
}

func benchOneElement(b *testing.B, bare bool, sets, elements int) {
	c, _ := openConn(b)
	tb := NewTable("bench")
	tb.Chains["pod"] = &Chain{Name: "pod", Rules: []Rule{{Counter: true, Verdict: Verdict{Kind: Drop}}}}
	for s := range sets {
		set := newSet(fmt.Sprintf("sel_%d", s), KeyIPSaddr, true, false, fmt.Sprintf("selector %d", s))
		for e := range elements {
			i := s*elements + e
			put(set, addrKey(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff)), goTo("pod"), "")
		}
		tb.Sets[set.Name] = set
	}
	if err := c.Replace(tb); err != nil {
		b.Fatal(err)
	}
	k := addrKey("10.200.0.1")
	changes := &Changes{Sets: names("sel_7")}
	set := tb.Sets["sel_7"]
	if bare {
		ns, err := nfSet(nfTable("bench"), set)
		if err != nil {
			b.Fatal(err)
		}
		el, err := encodeElements(set, Element{k, Value{Verdict: goTo("pod"), Comment: "joined"}}, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%2 == 0 {
				err = c.enc.SetAddElements(ns, el)
			} else {
				err = c.enc.SetDeleteElements(ns, []nftables.SetElement{{Key: el[0].Key}})
			}
			if err == nil {
				err = c.flush()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			put(set, k, goTo("pod"), "joined")
		} else {
			set.Delete(k)
		}
		if err := c.Commit(tb, changes); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if n := len(c.Committed().Sets["sel_7"].Elements); n != len(set.Elements) {
		b.Fatalf("mirror has %d elements, want %d", n, len(set.Elements))
	}
}

// BenchmarkReadCounters: a metrics scrape's read of a table of 600 counting chains (P3's
// cluster has ≈ 600 group and class chains): ReadCounts once.
func BenchmarkReadCounters(b *testing.B) {
	c, _ := openConn(b)
	tb := NewTable("counts")
	var chains []string
	for i := range 600 {
		name := fmt.Sprintf("deny_%d", i)
		tb.Chains[name] = &Chain{Name: name, Rules: []Rule{{Counter: true, Verdict: Verdict{Kind: Drop}, Comment: "denied"}}}
		chains = append(chains, name)
	}
	if err := c.Replace(tb); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		counts, err := ReadCounts(c.netnsFD, "counts", chains, nil)
		if err != nil || len(counts) != len(chains) {
			b.Fatalf("ReadCounts: %d counts, %v", len(counts), err)
		}
	}
}

// BenchmarkReadCountsSet: a metrics scrape's read of one counting set of 50,000 elements (the
// allow-side counters of --count-allowed): ReadCounts once.
func BenchmarkReadCountsSet(b *testing.B) {
	c, _ := openConn(b)
	tb := NewTable("counts")
	allow := newSet("allow", KeyIPDaddrL4ProtoDport, false, false, "")
	allow.Counter = true
	for i := range 50_000 {
		a := ip(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&0xff, i&0xff))
		put(allow, ElementKey{Addr: a, AddrEnd: a, Proto: unix.IPPROTO_TCP, Port: 80, PortEnd: 80}, Verdict{}, "")
	}
	tb.Sets[allow.Name] = allow
	if err := c.Replace(tb); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		counts, err := ReadCounts(c.netnsFD, "counts", nil, []string{allow.Name})
		if err != nil || len(counts) != len(allow.Elements) {
			b.Fatalf("ReadCounts: %d counts, %v", len(counts), err)
		}
	}
}
