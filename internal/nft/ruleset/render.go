package ruleset

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// MaxCommentLen is the longest comment nft accepts (NFT_USERDATA_MAXLEN/2 in nft 1.0.6); longer
// comments are cut at a rune boundary, identically in Render and in the kernel.
const MaxCommentLen = 128

// Comment returns s as it is stored and rendered: double quotes (which nft strings cannot hold)
// become single quotes, line breaks become spaces, and it is cut to MaxCommentLen bytes.
func Comment(s string) string {
	if s == "" {
		return ""
	}
	s = cutComment(s) // first: a long reason is not scanned past what is kept
	if strings.ContainsAny(s, "\"\n\r\t") {
		s = strings.Map(func(r rune) rune {
			switch r {
			case '"':
				return '\''
			case '\n', '\r', '\t':
				return ' '
			}
			return r
		}, s)
	}
	return cutComment(s) // again: Map turns an invalid byte into a 3-byte rune
}

// cutComment cuts s to MaxCommentLen bytes at a rune boundary.
func cutComment(s string) string {
	if len(s) <= MaxCommentLen {
		return s
	}
	cut := MaxCommentLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// hookOrder is the order of base chains in Render and in a full Replace.
var hookOrder = map[Hook]int{HookForward: 0, HookInput: 1, HookOutput: 2, HookPrerouting: 3}

// sortedChains returns the chains in render order: base chains by hook (forward, input, output)
// then priority and name, then regular chains by name.
func (t *Table) sortedChains() []*Chain {
	cs := make([]*Chain, 0, len(t.Chains))
	for _, c := range t.Chains {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, compareChains)
	return cs
}

func compareChains(a, b *Chain) int {
	if (a.Base == nil) != (b.Base == nil) {
		if a.Base != nil {
			return -1
		}
		return 1
	}
	if a.Base != nil {
		if c := cmp.Compare(hookRank(a.Base.Hook), hookRank(b.Base.Hook)); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Base.Priority, b.Base.Priority); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.Name, b.Name)
}

func hookRank(h Hook) int {
	if r, ok := hookOrder[h]; ok {
		return r
	}
	return len(hookOrder)
}

func (t *Table) sortedSets() []*Set {
	ss := make([]*Set, 0, len(t.Sets))
	for _, s := range t.Sets {
		ss = append(ss, s)
	}
	slices.SortFunc(ss, func(a, b *Set) int { return cmp.Compare(a.Name, b.Name) })
	return ss
}

// SortedElements returns the set's elements ordered by key (addresses, then protocol, port,
// interface name).
func (s *Set) SortedElements() []Element {
	es := make([]Element, 0, s.Len())
	for e := range s.All() {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b Element) int { return compareKeys(a.ElementKey, b.ElementKey) })
	return es
}

func compareKeys(a, b ElementKey) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if c := a.AddrEnd.Compare(b.AddrEnd); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Proto, b.Proto); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Port, b.Port); c != 0 {
		return c
	}
	if c := cmp.Compare(a.PortEnd, b.PortEnd); c != 0 {
		return c
	}
	return cmp.Compare(a.Ifname, b.Ifname)
}

// Render returns the table in `nft -f` syntax, in the form `nft list table inet NAME` prints it
// back (modulo whitespace, counter values and the order of objects and elements): sets and maps
// by name, base chains (forward, input, output), then regular chains by name, elements sorted.
func Render(t *Table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n", t.Name)
	first := true
	sep := func() {
		if !first {
			b.WriteString("\n")
		}
		first = false
	}
	for _, s := range t.sortedSets() {
		sep()
		renderSet(&b, s)
	}
	for _, c := range t.sortedChains() {
		sep()
		renderChain(&b, c)
	}
	b.WriteString("}\n")
	return b.String()
}

func renderSet(b *strings.Builder, s *Set) {
	kind := "set"
	if s.Map {
		kind = "map"
	}
	fmt.Fprintf(b, "\t%s %s {\n", kind, s.Name)
	fmt.Fprintf(b, "\t\ttype %s", keyType(s.Key))
	if s.Map {
		b.WriteString(" : verdict")
	}
	b.WriteString("\n")
	if s.Size > 0 {
		fmt.Fprintf(b, "\t\tsize %d\n", s.Size)
	}
	if s.Interval {
		b.WriteString("\t\tflags interval\n")
	}
	if s.Timeout {
		b.WriteString("\t\tflags timeout\n")
	}
	if s.Counter {
		b.WriteString("\t\tcounter\n")
	}
	if c := Comment(s.Comment); c != "" {
		fmt.Fprintf(b, "\t\tcomment %q\n", c)
	}
	if s.Len() > 0 {
		b.WriteString("\t\telements = { ")
		for i, e := range s.SortedElements() {
			if i > 0 {
				b.WriteString(",\n\t\t\t     ")
			}
			b.WriteString(renderElement(s, e))
		}
		b.WriteString(" }\n")
	}
	b.WriteString("\t}\n")
}

func renderElement(s *Set, e Element) string {
	var b strings.Builder
	b.WriteString(renderKey(s.Key, e.ElementKey))
	if s.Counter {
		b.WriteString(" counter") // nft adds the values, which listings compare without
	}
	if c := Comment(e.Comment); c != "" {
		fmt.Fprintf(&b, " comment %q", c)
	}
	if s.Map {
		b.WriteString(" : ")
		b.WriteString(e.Verdict.String())
	}
	return b.String()
}

// renderKey prints a key the way nft lists it: a single address, a prefix when the range is one,
// else first-last; a protocol by name; ports as numbers.
func renderKey(k Key, e ElementKey) string {
	switch keyDescs[k].shape {
	case shapeAddr:
		return renderRange(e.Addr, rangeEnd(e))
	case shapeProto:
		return protoName(e.Proto)
	case shapeProtoPort:
		if e.PortEnd > e.Port {
			return fmt.Sprintf("%s . %d-%d", protoName(e.Proto), e.Port, e.PortEnd)
		}
		return fmt.Sprintf("%s . %d", protoName(e.Proto), e.Port)
	case shapeIfname:
		return fmt.Sprintf("%q", e.Ifname)
	case shapeIfnameAddr:
		return fmt.Sprintf("%q . %s", e.Ifname, e.Addr)
	case shapeAddrProtoPort:
		return fmt.Sprintf("%s . %s . %d", e.Addr, protoName(e.Proto), e.Port)
	}
	return e.String()
}

func rangeEnd(e ElementKey) netip.Addr {
	if !e.AddrEnd.IsValid() {
		return e.Addr
	}
	return e.AddrEnd
}

func renderRange(from, to netip.Addr) string {
	if from == to {
		return from.String()
	}
	if p, ok := rangePrefix(from, to); ok {
		return p.String()
	}
	return from.String() + "-" + to.String()
}

// rangePrefix returns the prefix that covers exactly [from, to], if there is one.
func rangePrefix(from, to netip.Addr) (netip.Prefix, bool) {
	for bits := 0; bits <= from.BitLen(); bits++ {
		p := netip.PrefixFrom(from, bits).Masked()
		if p.Addr() != from {
			continue
		}
		if lastAddr(p) == to {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().AsSlice()
	for i := p.Bits(); i < len(a)*8; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	r, _ := netip.AddrFromSlice(a)
	return r
}

// protoNames are the names nft 1.0.6 prints for inet_proto values (from /etc/protocols).
var protoNames = map[uint8]string{
	1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 33: "dccp", 47: "gre", 50: "esp", 51: "ah",
	58: "ipv6-icmp", 132: "sctp", 136: "udplite",
}

func protoName(p uint8) string {
	if n, ok := protoNames[p]; ok {
		return n
	}
	return fmt.Sprint(p)
}

func keyType(k Key) string {
	d, err := describeKey(k)
	if err != nil {
		return fmt.Sprintf("invalid_key_%d", k)
	}
	return d.typeName()
}

func keyExpr(k Key) string {
	d, err := describeKey(k)
	if err != nil {
		return fmt.Sprintf("invalid_key_%d", k)
	}
	return d.expr
}

// priorityString prints a base chain priority as nft 1.0.6 lists it: relative to a standard
// priority name when within 10 of it, else as a number.
func priorityString(h Hook, p int32) string {
	type std struct {
		name string
		prio int32
	}
	stds := []std{{"raw", -300}, {"mangle", -150}, {"filter", 0}, {"security", 50}}
	switch h {
	case HookOutput:
		stds = append(stds, std{"dstnat", -100})
	case HookInput:
		stds = append(stds, std{"srcnat", 100})
	case HookPrerouting:
		stds = append(stds, std{"dstnat", -100})
	}
	for _, s := range stds {
		off := p - s.prio
		switch {
		case off == 0:
			return s.name
		case off > 0 && off <= 10:
			return fmt.Sprintf("%s + %d", s.name, off)
		case off < 0 && off >= -10:
			return fmt.Sprintf("%s - %d", s.name, -off)
		}
	}
	return fmt.Sprint(p)
}

func renderChain(b *strings.Builder, c *Chain) {
	fmt.Fprintf(b, "\tchain %s {\n", c.Name)
	if cm := Comment(c.Comment); cm != "" {
		fmt.Fprintf(b, "\t\tcomment %q\n", cm)
	}
	if c.Base != nil {
		fmt.Fprintf(b, "\t\ttype filter hook %s priority %s; policy accept;\n", c.Base.Hook, priorityString(c.Base.Hook, c.Base.Priority))
	}
	for _, r := range c.Rules {
		fmt.Fprintf(b, "\t\t%s\n", RenderRule(r))
	}
	b.WriteString("\t}\n")
}

// RenderRule returns one rule in nft syntax.
func RenderRule(r Rule) string {
	var parts []string
	switch r.CtState {
	case CtEstablishedRelated:
		parts = append(parts, "ct state established,related")
	case CtInvalid:
		parts = append(parts, "ct state invalid")
	}
	switch r.Nfproto {
	case unix.NFPROTO_IPV4:
		parts = append(parts, "meta nfproto ipv4")
	case unix.NFPROTO_IPV6:
		parts = append(parts, "meta nfproto ipv6")
	}
	if r.Iifname != "" {
		parts = append(parts, fmt.Sprintf("iifname %q", r.Iifname))
	}
	if r.Oifname != "" {
		parts = append(parts, fmt.Sprintf("oifname %q", r.Oifname))
	}
	if r.MarkIs != 0 {
		parts = append(parts, fmt.Sprintf("meta mark & 0x%08x == 0x%08x", r.MarkIs, r.MarkIs))
	}
	if r.L4Proto != 0 {
		parts = append(parts, "meta l4proto "+protoName(r.L4Proto))
	}
	for _, l := range r.Lookups {
		if l.Map {
			parts = append(parts, fmt.Sprintf("%s vmap @%s", keyExpr(l.Key), l.Set))
		} else if l.Invert {
			parts = append(parts, fmt.Sprintf("%s != @%s", keyExpr(l.Key), l.Set))
		} else {
			parts = append(parts, fmt.Sprintf("%s @%s", keyExpr(l.Key), l.Set))
		}
	}
	if l := r.Limit; l != nil {
		parts = append(parts, l.String())
	}
	if l := r.Log; l != nil {
		parts = append(parts, l.String())
	}
	if r.Counter {
		parts = append(parts, "counter")
	}
	if r.Notrack {
		parts = append(parts, "notrack")
	}
	if r.MarkSet != 0 {
		parts = append(parts, fmt.Sprintf("meta mark set meta mark | 0x%08x", r.MarkSet))
	}
	if r.MarkClear != 0 {
		parts = append(parts, fmt.Sprintf("meta mark set meta mark & 0x%08x", ^r.MarkClear))
	}
	if v := r.Verdict.String(); v != "" {
		parts = append(parts, v)
	}
	if c := Comment(r.Comment); c != "" {
		parts = append(parts, fmt.Sprintf("comment %q", c))
	}
	return strings.Join(parts, " ")
}

// String is the unit as nft writes it: second, minute, hour, day.
func (u LimitUnit) String() string {
	return map[LimitUnit]string{PerSecond: "second", PerMinute: "minute", PerHour: "hour", PerDay: "day"}[u]
}

// String is the limit as nft lists it: the burst only when it is not nft's default, 5.
func (l Limit) String() string {
	s := fmt.Sprintf("limit rate %d/%s", l.Rate, l.Unit)
	if l.Burst != 5 && l.Burst != 0 {
		s += fmt.Sprintf(" burst %d packets", l.Burst)
	}
	return s
}

// String is the log statement as nft lists it.
func (l Log) String() string {
	if l.Prefix == "" {
		return fmt.Sprintf("log group %d", l.Group)
	}
	return fmt.Sprintf("log prefix %q group %d", l.Prefix, l.Group)
}

// Stats counts the table's objects.
func (t *Table) Stats() Stats {
	var s Stats
	s.Chains = len(t.Chains)
	s.Sets = len(t.Sets)
	for _, c := range t.Chains {
		s.Rules += len(c.Rules)
	}
	for _, st := range t.Sets {
		s.Elements += st.Len()
	}
	return s
}

// Clone returns a deep copy of the table.
func (t *Table) Clone() *Table {
	if t == nil {
		return nil
	}
	n := &Table{Name: t.Name, Chains: make(map[string]*Chain, len(t.Chains)), Sets: make(map[string]*Set, len(t.Sets))}
	for k, c := range t.Chains {
		n.Chains[k] = c.Clone()
	}
	for k, s := range t.Sets {
		n.Sets[k] = s.Clone()
	}
	return n
}

// Clone returns a deep copy of the chain.
func (c *Chain) Clone() *Chain {
	if c == nil {
		return nil
	}
	n := *c
	if c.Base != nil {
		b := *c.Base
		n.Base = &b
	}
	n.Rules = make([]Rule, len(c.Rules))
	for i, r := range c.Rules {
		n.Rules[i] = r.clone()
	}
	return &n
}

func (r Rule) clone() Rule {
	r.Lookups = slices.Clone(r.Lookups)
	return r
}

// Clone returns a deep copy of the set.
func (s *Set) Clone() *Set {
	if s == nil {
		return nil
	}
	n := *s
	n.journal = nil
	n.Elements = maps.Clone(s.Elements) // copies the table wholesale: ≈ 4× faster than inserting
	n.addrs = s.addrs.clone()
	if n.Elements == nil && n.addrs == nil {
		n.Elements = map[ElementKey]Value{}
	}
	return &n
}

// Equal reports whether two rules are the same.
func (r Rule) Equal(o Rule) bool {
	return slices.Equal(r.Lookups, o.Lookups) && r.L4Proto == o.L4Proto && r.CtState == o.CtState && r.Iifname == o.Iifname && r.Oifname == o.Oifname && r.Counter == o.Counter &&
		r.Nfproto == o.Nfproto && r.MarkIs == o.MarkIs && r.Notrack == o.Notrack && r.MarkSet == o.MarkSet && r.MarkClear == o.MarkClear &&
		r.Verdict == o.Verdict && Comment(r.Comment) == Comment(o.Comment) && equalPtr(r.Limit, o.Limit) && equalPtr(r.Log, o.Log)
}

// equalPtr reports whether two optional statements are both absent or equal.
func equalPtr[T comparable](a, b *T) bool { return a == b || a != nil && b != nil && *a == *b }

// sameProps reports whether two sets have the same properties (everything but the elements).
func (s *Set) sameProps(o *Set) bool {
	return s.Name == o.Name && s.Key == o.Key && s.Map == o.Map && s.Interval == o.Interval &&
		s.Size == o.Size && s.Counter == o.Counter && s.Timeout == o.Timeout && Comment(s.Comment) == Comment(o.Comment)
}

// sameSizeless reports whether two sets differ in their size alone.
func (s *Set) sameSizeless(o *Set) bool {
	return s.Size != o.Size && s.sameProps(&Set{Name: o.Name, Key: o.Key, Map: o.Map, Interval: o.Interval,
		Size: s.Size, Counter: o.Counter, Timeout: o.Timeout, Comment: o.Comment})
}

// sameProps reports whether two chains have the same name, comment and base.
func (c *Chain) sameProps(o *Chain) bool {
	if (c.Base == nil) != (o.Base == nil) || (c.Base != nil && *c.Base != *o.Base) {
		return false
	}
	return c.Name == o.Name && Comment(c.Comment) == Comment(o.Comment)
}
