package ruleset

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/sys/unix"
)

// Packet is the first packet of a connection (conntrack state new) as a walk of the table sees
// it: the fields the table's rules and keys read.
type Packet struct {
	Iifname, Oifname string
	Src, Dst         netip.Addr
	Proto            uint8
	Sport, Dport     uint16 // for TCP, UDP and SCTP
	// ICMPType and ICMPCode, for ICMP and ICMPv6, are where TCP's source port is: th sport
	// reads type<<8 | code.
	ICMPType, ICMPCode uint8
	// Mark is the packet's mark as it enters the walk; rules that set or clear bits change it
	// for the rules after them.
	Mark uint32
}

// nfproto is p's family, as `meta nfproto` reads it.
func (p Packet) nfproto() uint8 {
	if p.Src.Unmap().Is4() {
		return unix.NFPROTO_IPV4
	}
	return unix.NFPROTO_IPV6
}

// thSport is the transport header's first 16 bits of p: its source port, or ICMP's type and code.
func (p Packet) thSport() uint16 {
	if p.Proto == unix.IPPROTO_ICMP || p.Proto == unix.IPPROTO_ICMPV6 {
		return uint16(p.ICMPType)<<8 | uint16(p.ICMPCode)
	}
	return p.Sport
}

// Step is one rule a walked packet matched, and what it did there.
type Step struct {
	Chain        string
	ChainComment string
	Rule         int    // the rule's index in the chain
	Text         string // the rule as nft lists it (RenderRule)
	// Found are the rule's set lookups, in order; a verdict map's is last and gave the verdict.
	Found []Found
	// Verdict is what the rule did: Accept, Drop, Jump or Goto a chain, Return, or VerdictNone
	// (it matched and the packet went on with the next rule: a log statement).
	Verdict Verdict
}

// Found is one set lookup of a matched rule: the set, and the element holding the packet's key
// (none when the lookup matched because the set does not hold it: `!= @set`).
type Found struct {
	Set        string
	SetComment string
	Element    *Element
	// ElementText is the element as nft lists it in its set: key, comment, verdict.
	ElementText string
}

// Walk follows packet p from chain to a verdict through the table as the kernel would: rules in
// order, a rule matching when all its matches hold (a limit counts as within its rate), a jump
// returning at the end of its chain, a goto not; a base chain's end is its policy, accept. It
// returns the steps of the rules that matched and the final verdict, Accept or Drop. A loop or a
// missing chain is an error: the table must not hold one.
func (t *Table) Walk(chain string, p Packet) ([]Step, Verdict, error) {
	type frame struct {
		chain string
		next  int
	}
	var steps []Step
	var stack []frame // where jumps return to
	cur, i := chain, 0
	for hops := 0; ; hops++ {
		if hops > 10000 {
			return steps, Verdict{}, fmt.Errorf("walking from chain %s: more than 10,000 rules; a loop?", chain)
		}
		c := t.Chains[cur]
		if c == nil {
			return steps, Verdict{}, fmt.Errorf("walking from chain %s: no chain %s", chain, cur)
		}
		if i >= len(c.Rules) {
			if len(stack) == 0 {
				return steps, Verdict{Kind: Accept}, nil // the base chain's policy
			}
			cur, i = stack[len(stack)-1].chain, stack[len(stack)-1].next
			stack = stack[:len(stack)-1]
			continue
		}
		r := c.Rules[i]
		st, ok := t.match(r, p)
		if !ok {
			i++
			continue
		}
		p.Mark = (p.Mark | r.MarkSet) &^ r.MarkClear
		st.Chain, st.ChainComment, st.Rule, st.Text = c.Name, c.Comment, i, RenderRule(r)
		steps = append(steps, st)
		switch st.Verdict.Kind {
		case Accept, Drop:
			return steps, st.Verdict, nil
		case Return:
			i = len(c.Rules)
		case Jump:
			stack = append(stack, frame{cur, i + 1})
			cur, i = st.Verdict.Chain, 0
		case Goto:
			cur, i = st.Verdict.Chain, 0
		default:
			i++
		}
	}
}

// match reports whether rule r matches p and, if so, its step: the verdict (the rule's own, or
// its verdict map's element's) and the element that decided.
func (t *Table) match(r Rule, p Packet) (Step, bool) {
	if r.CtState != CtNone { // a new connection: neither established, related nor invalid
		return Step{}, false
	}
	if !ifnameMatch(r.Iifname, p.Iifname) || !ifnameMatch(r.Oifname, p.Oifname) {
		return Step{}, false
	}
	if r.L4Proto != 0 && r.L4Proto != p.Proto {
		return Step{}, false
	}
	if r.MarkIs != 0 && p.Mark&r.MarkIs != r.MarkIs {
		return Step{}, false
	}
	if r.Nfproto != 0 && r.Nfproto != p.nfproto() {
		return Step{}, false
	}
	st := Step{Verdict: r.Verdict}
	for _, l := range r.Lookups {
		s := t.Sets[l.Set]
		if s == nil {
			return Step{}, false
		}
		e, found := s.lookup(l.Key, p)
		if found == l.Invert {
			return Step{}, false
		}
		f := Found{Set: l.Set, SetComment: s.Comment}
		if found {
			f.Element, f.ElementText = &e, renderElement(s, e)
		}
		st.Found = append(st.Found, f)
		if l.Map {
			st.Verdict = e.Verdict
		}
	}
	return st, true
}

func ifnameMatch(pattern, name string) bool {
	if pattern == "" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// lookup finds the element of s that holds packet p's value of key k.
func (s *Set) lookup(k Key, p Packet) (Element, bool) {
	want, ok := packetKey(k, p)
	if !ok {
		return Element{}, false
	}
	if !s.Interval {
		v, ok := s.Get(want)
		return Element{want, v}, ok
	}
	for ek, v := range s.Entries() {
		if holds(ek, want) {
			return Element{ek, v}, true
		}
	}
	return Element{}, false
}

// holds reports whether element key e (ranges inclusive) holds the single value want.
func holds(e, want ElementKey) bool {
	in := func(a, from, to netip.Addr) bool {
		if !to.IsValid() {
			to = from
		}
		return from.Compare(a) <= 0 && a.Compare(to) <= 0
	}
	if e.Ifname != want.Ifname || e.Proto != want.Proto || e.Addr.IsValid() != want.Addr.IsValid() {
		return false
	}
	if e.Addr.IsValid() && !in(want.Addr, e.Addr, e.AddrEnd) {
		return false
	}
	return e.Port <= want.Port && want.Port <= max(e.Port, e.PortEnd)
}

// packetKey is what a rule's load of key k reads from p, as an element key; false when the rule
// cannot load it (an address of the other family: the `meta nfproto` guard fails).
func packetKey(k Key, p Packet) (ElementKey, bool) {
	d, err := describeKey(k)
	if err != nil {
		return ElementKey{}, false
	}
	var ek ElementKey
	if d.fam != 0 {
		a := p.Dst
		if d.off == 12 && d.fam == unix.NFPROTO_IPV4 || d.off == 8 && d.fam == unix.NFPROTO_IPV6 {
			a = p.Src
		}
		if !a.IsValid() || a.Is4() != d.is4() {
			return ElementKey{}, false
		}
		ek.Addr, ek.AddrEnd = a, a
	}
	switch d.shape {
	case shapeProto:
		ek.Proto = p.Proto
	case shapeProtoPort, shapeAddrProtoPort:
		ek.Proto, ek.Port, ek.PortEnd = p.Proto, p.Dport, p.Dport
		if d.sport {
			ek.Port, ek.PortEnd = p.thSport(), p.thSport()
		}
	case shapeIfname, shapeIfnameAddr:
		ek.Ifname = p.Iifname
		if d.oif {
			ek.Ifname = p.Oifname
		}
	}
	return ek, true
}
