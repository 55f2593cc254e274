package ruleset

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// This file turns the model into google/nftables v0.3.0 objects, transcribed from what
// `nft --debug=netlink` shows nft 1.0.6 sending for the same rule text, so that `nft list`
// prints the rules back as Render writes them.

// nfSet returns the google/nftables set for s (no elements).
func nfSet(t *nftables.Table, s *Set) (*nftables.Set, error) {
	d, err := describeKey(s.Key)
	if err != nil {
		return nil, fmt.Errorf("set %s: %w", s.Name, err)
	}
	kt, concat := d.setType()
	switch {
	case s.Size > 0 && s.Interval:
		return nil, fmt.Errorf("set %s: a size on an interval set", s.Name)
	case s.Size > 0 && s.Len() > int(s.Size):
		return nil, fmt.Errorf("set %s: %d elements, more than its size %d", s.Name, s.Len(), s.Size)
	case s.Timeout && (s.Interval || s.Map || s.Len() > 0):
		return nil, fmt.Errorf("set %s: a timeout set is a plain set whose elements are not the table's", s.Name)
	}
	ns := &nftables.Set{
		Table:    t,
		Name:     s.Name,
		KeyType:  kt,
		Interval: s.Interval,
		// nft 1.0.6 flags (NFT_SET_CONCAT) and describes (field lengths) only interval
		// concatenations, the pipapo sets; a hash concatenation declared otherwise is "File
		// exists" to an operator's `nft -f` of our own listing. google/nftables v0.3.0 sends
		// both exactly when Concatenation is set.
		Concatenation: concat && s.Interval,
		IsMap:         s.Map,
		Size:          s.Size,
		Comment:       Comment(s.Comment),
		Counter:       s.Counter,
		HasTimeout:    s.Timeout,
	}
	if s.Map {
		ns.DataType = nftables.TypeVerdict
	}
	if d.shape == shapeIfname {
		// ifname is a host-byte-order string type: without this userdata nft lists its
		// elements as "".
		ns.KeyByteOrder = binaryutil.NativeEndian
	}
	return ns, nil
}

// keyArena holds the keys of a chunk of elements while it is encoded: a batch marshals each chunk
// into its message and then resets the arena, so that the keys of a whole table are not each an
// allocation of their own, all garbage by the commit: a batch holds one chunk's keys at a time.
// A nil *keyArena allocates each key.
type keyArena struct{ buf []byte }

// keyArenaBlock is the size of an arena's blocks once it has grown (the keys of a chunk of IPv6
// interval elements); the first are smaller, so that a commit of one element allocates little.
const (
	keyArenaFirstBlock = 256
	keyArenaBlock      = 2 * (chunkElements + 1) * 16
)

// bytes returns n zero bytes of the arena, valid until reset.
func (a *keyArena) bytes(n int) []byte {
	if a == nil {
		return make([]byte, n)
	}
	if cap(a.buf)-len(a.buf) < n { // a new block; the keys in the old one stay valid
		a.buf = make([]byte, 0, max(min(max(2*cap(a.buf), keyArenaFirstBlock), keyArenaBlock), n))
	}
	start := len(a.buf)
	a.buf = a.buf[:start+n]
	b := a.buf[start : start+n : start+n]
	clear(b)
	return b
}

// addr returns a's 4 or 16 bytes in the arena.
func (a *keyArena) addr(addr netip.Addr, extra int) []byte {
	if addr.Is4() {
		b := a.bytes(4 + extra)
		v := addr.As4()
		copy(b, v[:])
		return b
	}
	b := a.bytes(16 + extra)
	v := addr.As16()
	copy(b, v[:])
	return b
}

// reset lets the arena's last block be written again: the keys handed out are no longer read.
func (a *keyArena) reset() { a.buf = a.buf[:0] }

// encodeElements returns the kernel elements for e, their keys in keys (nil: allocated). Plain
// sets and concatenated interval sets take one element (Key, and KeyEnd inclusive for
// concatenations); single-field interval sets take a start element (carrying verdict and comment)
// and an end element at the address after the range flagged IntervalEnd — omitted when the range
// runs to the end of the address space.
func encodeElements(s *Set, e Element, dst []nftables.SetElement, keys *keyArena) ([]nftables.SetElement, error) {
	k := e.ElementKey
	el := nftables.SetElement{Comment: Comment(e.Comment)}
	if s.Map {
		v, err := nfVerdict(e.Verdict)
		if err != nil {
			return dst, fmt.Errorf("set %s element %s: %w", s.Name, k, err)
		}
		el.VerdictData = v
	}
	d, err := describeKey(s.Key)
	if err != nil {
		return dst, fmt.Errorf("set %s: %w", s.Name, err)
	}
	want4 := d.is4()
	switch d.shape {
	case shapeAddr:
		end := rangeEnd(k)
		if !k.Addr.IsValid() || k.Addr.Is4() != want4 || end.Is4() != want4 || k.Addr.Is4In6() || end.Compare(k.Addr) < 0 {
			return dst, fmt.Errorf("set %s: bad address element %s", s.Name, k)
		}
		el.Key = keys.addr(k.Addr, 0)
		if !s.Interval {
			if end != k.Addr {
				return dst, fmt.Errorf("set %s: range %s in a set without flags interval", s.Name, k)
			}
			return append(dst, el), nil
		}
		dst = append(dst, el)
		if next := end.Next(); next.IsValid() {
			dst = append(dst, nftables.SetElement{Key: keys.addr(next, 0), IntervalEnd: true})
		}
		return dst, nil
	case shapeProto:
		if s.Interval {
			return dst, fmt.Errorf("set %s: interval inet_proto sets are not supported", s.Name)
		}
		el.Key = []byte{k.Proto}
		return append(dst, el), nil
	case shapeProtoPort:
		el.Key = l4ProtoDportKey(keys, k.Proto, k.Port)
		if s.Interval {
			end := k.PortEnd
			if end < k.Port {
				end = k.Port
			}
			el.KeyEnd = l4ProtoDportKey(keys, k.Proto, end)
		} else if k.PortEnd != k.Port && k.PortEnd != 0 {
			return dst, fmt.Errorf("set %s: port range %s in a set without flags interval", s.Name, k)
		}
		return append(dst, el), nil
	case shapeIfname:
		if s.Interval || k.Ifname == "" || len(k.Ifname) >= unix.IFNAMSIZ {
			return dst, fmt.Errorf("set %s: bad interface element %q", s.Name, k.Ifname)
		}
		el.Key = ifnameBytes(k.Ifname)
		return append(dst, el), nil
	case shapeIfnameAddr:
		if s.Interval || k.Ifname == "" || len(k.Ifname) >= unix.IFNAMSIZ || !k.Addr.IsValid() ||
			k.Addr.Is4() != want4 || k.Addr.Is4In6() || rangeEnd(k) != k.Addr {
			return dst, fmt.Errorf("set %s: bad interface . address element %s", s.Name, k)
		}
		el.Key = IfnameAddrKey(k.Ifname, k.Addr)
		return append(dst, el), nil
	case shapeAddrProtoPort:
		if s.Interval || !k.Addr.IsValid() || k.Addr.Is4() != want4 || k.Addr.Is4In6() || rangeEnd(k) != k.Addr ||
			(k.PortEnd != 0 && k.PortEnd != k.Port) {
			return dst, fmt.Errorf("set %s: bad address . protocol . port element %s", s.Name, k)
		}
		// each field padded to 4 bytes: the protocol byte first, the port in network order first
		el.Key = keys.addr(k.Addr, 8)
		n := len(el.Key) - 8
		el.Key[n], el.Key[n+4], el.Key[n+5] = k.Proto, byte(k.Port>>8), byte(k.Port)
		return append(dst, el), nil
	}
	return dst, fmt.Errorf("set %s: unknown key %d", s.Name, s.Key)
}

// l4ProtoDportKey is `inet_proto . inet_service` with each field padded to 4 bytes.
func l4ProtoDportKey(keys *keyArena, proto uint8, port uint16) []byte {
	b := keys.bytes(8)
	b[0] = proto
	binary.BigEndian.PutUint16(b[4:], port)
	return b
}

func ifnameBytes(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func nfVerdict(v Verdict) (*expr.Verdict, error) {
	switch v.Kind {
	case Accept:
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case Return:
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	case Jump, Goto:
		if v.Chain == "" {
			return nil, fmt.Errorf("verdict %s without a chain", v)
		}
		k := expr.VerdictJump
		if v.Kind == Goto {
			k = expr.VerdictGoto
		}
		return &expr.Verdict{Kind: k, Chain: v.Chain}, nil
	}
	return nil, fmt.Errorf("no verdict")
}

// ruleExprs returns the expressions of r, in the order nft 1.0.6 emits them for
//
//	[ct state …] [meta nfproto F] [iifname "…"] [oifname "…"] [meta mark & M == M] [meta l4proto P]
//	    [KEY [!=] @S]… [KEY vmap @M] [limit] [log] [counter] [notrack] [meta mark set …] [verdict]
func ruleExprs(r Rule) ([]expr.Any, error) {
	var ex []expr.Any
	for _, part := range []func(Rule) ([]expr.Any, error){ctStateExprs, nfprotoExprs, ifnameExprs, markIsExprs,
		l4ProtoExprs, lookupExprs, limitLogExprs, counterVerdictExprs} {
		e, err := part(r)
		if err != nil {
			return nil, err
		}
		ex = append(ex, e...)
	}
	return ex, nil
}

// ctStateExprs match the rule's conntrack state.
func ctStateExprs(r Rule) ([]expr.Any, error) {
	switch r.CtState {
	case CtNone:
		return nil, nil
	case CtEstablishedRelated, CtInvalid:
		mask := expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED
		if r.CtState == CtInvalid {
			mask = expr.CtStateBitINVALID
		}
		return []expr.Any{
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(0)},
		}, nil
	}
	return nil, fmt.Errorf("unknown ct state match %d", r.CtState)
}

// ifnameExprs match the rule's input and output interface names (a trailing * matches a prefix).
func ifnameExprs(r Rule) ([]expr.Any, error) {
	var ex []expr.Any
	for _, m := range []struct {
		name string
		key  expr.MetaKey
		what string
	}{{r.Iifname, expr.MetaKeyIIFNAME, "iifname"}, {r.Oifname, expr.MetaKeyOIFNAME, "oifname"}} {
		n := m.name
		if n == "" {
			continue
		}
		if len(n) >= unix.IFNAMSIZ {
			return nil, fmt.Errorf("%s %q: too long", m.what, n)
		}
		if n[len(n)-1] == '*' {
			if len(n) == 1 {
				return nil, fmt.Errorf("%s %q: empty prefix", m.what, n)
			}
			ex = append(ex, IfnamePrefixMatch(m.key, n[:len(n)-1])...)
			continue
		}
		ex = append(ex, &expr.Meta{Key: m.key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameBytes(n)})
	}
	return ex, nil
}

// nfprotoExprs match the rule's family.
func nfprotoExprs(r Rule) ([]expr.Any, error) {
	switch r.Nfproto {
	case 0:
		return nil, nil
	case unix.NFPROTO_IPV4, unix.NFPROTO_IPV6:
		return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.Nfproto}}}, nil
	}
	return nil, fmt.Errorf("meta nfproto %d: not ipv4 or ipv6", r.Nfproto)
}

// markIsExprs match the bits of the packet's mark the rule requires.
func markIsExprs(r Rule) ([]expr.Any, error) {
	if r.MarkIs == 0 {
		return nil, nil
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binaryutil.NativeEndian.PutUint32(r.MarkIs), Xor: binaryutil.NativeEndian.PutUint32(0)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(r.MarkIs)}}, nil
}

// notrackMarkExprs are the rule's notrack and mark statements.
func notrackMarkExprs(r Rule) ([]expr.Any, error) {
	var ex []expr.Any
	if r.Notrack {
		ex = append(ex, &expr.Notrack{})
	}
	if r.MarkSet != 0 && r.MarkClear != 0 {
		return nil, fmt.Errorf("a rule both sets and clears mark bits")
	}
	if r.MarkSet != 0 || r.MarkClear != 0 {
		mask, xor := ^r.MarkSet, r.MarkSet // (mark & ^M) ^ M = mark | M
		if r.MarkClear != 0 {
			mask, xor = ^r.MarkClear, 0
		}
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(mask), Xor: binaryutil.NativeEndian.PutUint32(xor)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1})
	}
	return ex, nil
}

// l4ProtoExprs match the rule's layer-4 protocol.
func l4ProtoExprs(r Rule) ([]expr.Any, error) {
	if r.L4Proto == 0 {
		return nil, nil
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{r.L4Proto}}}, nil
}

// lookupExprs load each lookup's key and look it up; a verdict map only last.
func lookupExprs(r Rule) ([]expr.Any, error) {
	var ex []expr.Any
	var guarded byte // the family whose `meta nfproto` guard this rule already has
	for i, l := range r.Lookups {
		if l.Set == "" {
			return nil, fmt.Errorf("lookup without a set")
		}
		if l.Map && i != len(r.Lookups)-1 {
			return nil, fmt.Errorf("lookup of map %s: a verdict map must be the rule's last lookup", l.Set)
		}
		d, err := describeKey(l.Key)
		if err != nil {
			return nil, fmt.Errorf("lookup of set %s: %w", l.Set, err)
		}
		load := keyLoad(d)
		if fam := d.fam; fam != 0 {
			// nft guards a rule's first address load only: later loads of the same family
			// would list as an explicit `meta nfproto` match
			if fam == guarded {
				load = load[2:]
			} else if guarded != 0 {
				return nil, fmt.Errorf("lookup of set %s: IPv4 and IPv6 keys in one rule", l.Set)
			}
			guarded = fam
		}
		ex = append(ex, load...)
		lk := &expr.Lookup{SourceRegister: 1, SetName: l.Set, Invert: l.Invert}
		if l.Map && l.Invert {
			return nil, fmt.Errorf("lookup of map %s: a verdict map cannot be inverted", l.Set)
		}
		if l.Map {
			lk.IsDestRegSet = true
			lk.DestRegister = 0
		}
		ex = append(ex, lk)
	}
	return ex, nil
}

// limitLogExprs are the rule's rate limit and its log statement.
func limitLogExprs(r Rule) ([]expr.Any, error) {
	var ex []expr.Any
	if l := r.Limit; l != nil {
		unit, ok := limitUnits[l.Unit]
		if !ok || l.Rate == 0 {
			return nil, fmt.Errorf("limit rate %d per unit %d", l.Rate, l.Unit)
		}
		burst := l.Burst
		if burst == 0 {
			burst = 5 // nft's default, which the kernel takes for 0 and lists back
		}
		ex = append(ex, &expr.Limit{Type: expr.LimitTypePkts, Rate: l.Rate, Unit: unit, Burst: burst})
	}
	if l := r.Log; l != nil {
		if len(l.Prefix) > MaxLogPrefix || strings.ContainsRune(l.Prefix, 0) {
			return nil, fmt.Errorf("log prefix %q: longer than %d bytes or with a NUL", l.Prefix, MaxLogPrefix)
		}
		key := uint32(1 << unix.NFTA_LOG_GROUP)
		if l.Prefix != "" {
			key |= 1 << unix.NFTA_LOG_PREFIX
		}
		ex = append(ex, &expr.Log{Key: key, Group: l.Group, Data: []byte(l.Prefix)})
	}
	return ex, nil
}

// counterVerdictExprs are the rule's counter and its verdict (none after a verdict map).
func counterVerdictExprs(r Rule) ([]expr.Any, error) {
	var ex []expr.Any
	if r.Counter {
		ex = append(ex, &expr.Counter{})
	}
	nm, err := notrackMarkExprs(r)
	if err != nil {
		return nil, err
	}
	ex = append(ex, nm...)
	if r.Verdict.Kind != VerdictNone {
		if n := len(r.Lookups); n > 0 && r.Lookups[n-1].Map {
			return nil, fmt.Errorf("a verdict-map rule cannot carry verdict %s", r.Verdict)
		}
		v, err := nfVerdict(r.Verdict)
		if err != nil {
			return nil, err
		}
		ex = append(ex, v)
	}
	return ex, nil
}

// limitUnits are the kernel's units of a limit's rate.
var limitUnits = map[LimitUnit]expr.LimitTime{
	PerSecond: expr.LimitTimeSecond, PerMinute: expr.LimitTimeMinute, PerHour: expr.LimitTimeHour, PerDay: expr.LimitTimeDay,
}

// keyLoad loads a lookup key into register 1 (and the following registers for the fields of a
// concatenation), a key with an address after its two-expression `meta nfproto` guard.
func keyLoad(d keyDesc) []expr.Any {
	var ex []expr.Any
	if d.fam != 0 {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{d.fam}})
	}
	addr := func(reg uint32) expr.Any {
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseNetworkHeader, Offset: d.off, Len: d.addrLen()}
	}
	dport := func(reg uint32) expr.Any {
		off := uint32(2)
		if d.sport {
			off = 0
		}
		return &expr.Payload{DestRegister: reg, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: 2}
	}
	switch d.shape {
	case shapeAddr:
		return append(ex, addr(1))
	case shapeProto:
		return append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1})
	case shapeProtoPort:
		return append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			// nft pads the 1-byte protocol to its 4-byte concatenation field this way.
			&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 1, Size: 2},
			dport(9))
	case shapeIfname:
		return append(ex, &expr.Meta{Key: d.ifnameKey(), Register: 1})
	case shapeIfnameAddr:
		// the 16-byte ifname fills register 1; the address follows in register 2
		return append(ex, &expr.Meta{Key: d.ifnameKey(), Register: 1}, addr(2))
	}
	// as nft 1.0.6 loads it: the address in register 1, then the protocol and the port in the
	// next 32-bit registers (nft names the one after a 16-byte address "reg 2")
	protoReg, portReg := uint32(9), uint32(10)
	if !d.is4() {
		protoReg, portReg = 2, 13
	}
	return append(ex, addr(1), &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: protoReg}, dport(portReg))
}

// ruleUserData is the rule's userdata: its comment TLV (what `nft list` prints as comment "…").
func ruleUserData(r Rule) []byte {
	c := Comment(r.Comment)
	if c == "" {
		return nil
	}
	return userdata.AppendString(nil, userdata.TypeComment, c)
}

// nfChain returns the google/nftables chain for c.
func nfChain(t *nftables.Table, c *Chain) (*nftables.Chain, error) {
	nc := &nftables.Chain{Table: t, Name: c.Name}
	if c.Base != nil {
		var h nftables.ChainHook
		switch c.Base.Hook {
		case HookForward:
			h = *nftables.ChainHookForward
		case HookInput:
			h = *nftables.ChainHookInput
		case HookOutput:
			h = *nftables.ChainHookOutput
		case HookPrerouting:
			h = *nftables.ChainHookPrerouting
		default:
			return nil, fmt.Errorf("chain %s: unknown hook %q", c.Name, c.Base.Hook)
		}
		prio := nftables.ChainPriority(c.Base.Priority)
		policy := nftables.ChainPolicyAccept
		nc.Hooknum = &h
		nc.Priority = &prio
		nc.Type = nftables.ChainTypeFilter
		nc.Policy = &policy
	}
	return nc, nil
}
