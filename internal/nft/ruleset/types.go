package ruleset

import (
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"reflect"
	"strings"
)

// Table is the in-memory model of one `inet` table: the single source of truth the committer
// diffs against. Chains and sets are keyed by name.
type Table struct {
	Name   string
	Chains map[string]*Chain
	Sets   map[string]*Set
}

// NewTable returns an empty table.
func NewTable(name string) *Table {
	return &Table{Name: name, Chains: map[string]*Chain{}, Sets: map[string]*Set{}}
}

// Hook is a base chain's netfilter hook.
type Hook string

// The hooks nftpolicy uses.
const (
	HookForward Hook = "forward"
	HookInput   Hook = "input"
	HookOutput  Hook = "output"
	// HookPrerouting sees every packet arriving on an interface, before routing: before DNAT
	// at a priority below dstnat (-100), before conntrack below -200.
	HookPrerouting Hook = "prerouting"
)

// Base makes a chain a base chain: `type filter hook <Hook> priority <Priority>; policy accept;`.
type Base struct {
	Hook     Hook
	Priority int32
}

// Chain is a chain and its ordered rules. Base is nil for a regular chain.
type Chain struct {
	Name    string
	Comment string
	Base    *Base
	Rules   []Rule
}

// CtState is a conntrack state match.
type CtState uint8

// The conntrack matches nftpolicy uses.
const (
	CtNone               CtState = iota
	CtEstablishedRelated         // ct state established,related
	CtInvalid                    // ct state invalid
)

// Key says what a rule's lookup or a set's elements are keyed on.
type Key uint8

// Keys. A rule's lookup key loads from the packet; a set's key type is the same constant (the
// packet field decides the type: KeyIPSaddr and KeyIPDaddr sets are `ipv4_addr`, and so on).
// IPv4/IPv6 keys in a rule carry the `meta nfproto` guard the inet family needs (rendered by nft
// as `ip saddr …`).
const (
	KeyNone            Key = iota
	KeyIPSaddr             // ip saddr            (ipv4_addr)
	KeyIPDaddr             // ip daddr            (ipv4_addr)
	KeyIP6Saddr            // ip6 saddr           (ipv6_addr)
	KeyIP6Daddr            // ip6 daddr           (ipv6_addr)
	KeyL4Proto             // meta l4proto        (inet_proto)
	KeyL4ProtoDport        // meta l4proto . th dport   (inet_proto . inet_service)
	KeyIifname             // iifname             (ifname)
	KeyIifnameIPSaddr      // iifname . ip saddr  (ifname . ipv4_addr)
	KeyIifnameIP6Saddr     // iifname . ip6 saddr (ifname . ipv6_addr)
	KeyOifnameIPDaddr      // oifname . ip daddr  (ifname . ipv4_addr)
	KeyOifnameIP6Daddr     // oifname . ip6 daddr (ifname . ipv6_addr)
	// Address . protocol . destination port, exact (hash sets; no flags interval):
	KeyIPSaddrL4ProtoDport  // ip saddr . meta l4proto . th dport   (ipv4_addr . inet_proto . inet_service)
	KeyIPDaddrL4ProtoDport  // ip daddr . meta l4proto . th dport
	KeyIP6SaddrL4ProtoDport // ip6 saddr . meta l4proto . th dport (ipv6_addr . inet_proto . inet_service)
	KeyIP6DaddrL4ProtoDport // ip6 daddr . meta l4proto . th dport
	// The transport header's first 16 bits: the source port of TCP, UDP and SCTP, the type and
	// code (type<<8 | code) of ICMP and ICMPv6.
	KeyL4ProtoSport // meta l4proto . th sport   (inet_proto . inet_service)
	// The node's own traffic by interface and local address (host endpoints):
	KeyIifnameIPDaddr  // iifname . ip daddr  (ifname . ipv4_addr)
	KeyIifnameIP6Daddr // iifname . ip6 daddr (ifname . ipv6_addr)
	KeyOifnameIPSaddr  // oifname . ip saddr  (ifname . ipv4_addr)
	KeyOifnameIP6Saddr // oifname . ip6 saddr (ifname . ipv6_addr)
	KeyOifname         // oifname             (ifname)
)

// VerdictKind is the kind of a verdict.
type VerdictKind uint8

// Verdicts.
const (
	VerdictNone VerdictKind = iota
	Accept
	Drop
	Return
	Jump
	Goto
)

// Verdict is a verdict; Chain is set for Jump and Goto.
type Verdict struct {
	Kind  VerdictKind
	Chain string
}

func (v Verdict) String() string {
	switch v.Kind {
	case Accept:
		return "accept"
	case Drop:
		return "drop"
	case Return:
		return "return"
	case Jump:
		return "jump " + v.Chain
	case Goto:
		return "goto " + v.Chain
	}
	return ""
}

// Rule is one rule, in the fixed statement order
//
//	[ct state …] [meta nfproto F] [iifname "…"] [oifname "…"] [meta mark & M == M]
//	    [meta l4proto P] [KEY [!=] @Set]… [KEY vmap @Map] [limit rate …] [log …] [counter]
//	    [notrack] [meta mark set …] [verdict] comment "…"
//
// Match fields left zero are absent. A rule with a Map has no Verdict (the map decides); a map
// lookup can only be the last of its lookups.
type Rule struct {
	CtState CtState
	// Nfproto matches the packet's family (`meta nfproto ipv4`): unix.NFPROTO_IPV4 or
	// unix.NFPROTO_IPV6; 0 is either.
	Nfproto uint8
	// Iifname matches the input interface name; a trailing "*" is a prefix match (`iifname "veth*"`).
	Iifname string
	// Oifname matches the output interface name, as Iifname does.
	Oifname string
	// MarkIs matches a packet whose mark has all these bits (`meta mark & M == M`); 0 is any.
	MarkIs uint32
	// L4Proto matches the layer 4 protocol (`meta l4proto udp`); 0 is any.
	L4Proto uint8
	// Lookups are set membership matches (`KEY @Set`, all must hold) and, when the last one has
	// Map, a verdict-map lookup (`KEY vmap @Set`).
	Lookups []Lookup
	// Limit, when set, lets only the packets within its rate past it: the others skip the rest
	// of the rule (its log, counter and verdict) and go on with the next rule.
	Limit *Limit
	// Log, when set, sends the packet to an NFLOG group.
	Log     *Log
	Counter bool
	// Notrack exempts the packet from connection tracking (`notrack`): it takes effect only
	// in a chain of priority below conntrack's (-200).
	Notrack bool
	// MarkSet sets these bits of the packet's mark (`meta mark set meta mark | M`), MarkClear
	// clears them (`meta mark set meta mark & ^M`); a rule has at most one of them.
	MarkSet, MarkClear uint32
	Verdict            Verdict
	Comment            string
}

// Limit is a rate limit in packets (`limit rate 10/second burst 5 packets`): Rate packets per
// Unit, with bursts of up to Burst packets above it (nft's default is 5).
type Limit struct {
	Rate  uint64
	Unit  LimitUnit
	Burst uint32
}

// LimitUnit is the time unit of a limit's rate.
type LimitUnit uint8

// The units nft writes.
const (
	PerSecond LimitUnit = iota + 1
	PerMinute
	PerHour
	PerDay
)

// Log sends a packet to netlink log (NFLOG) group Group with a prefix (`log prefix "…" group N`):
// a process that has bound the group receives it, nothing else does.
type Log struct {
	Group  uint16
	Prefix string
}

// MaxLogPrefix is the longest log prefix the kernel takes (NF_LOG_PREFIXLEN, less the NUL).
const MaxLogPrefix = 127

// Lookup references a named set or verdict map of the same table.
type Lookup struct {
	Key Key
	Set string
	Map bool
	// Invert matches when the key is not in the set (`KEY != @set`); sets only, not maps.
	Invert bool
}

// Set is a named set or, with Map, a verdict map (`typeof KEY : verdict`). Interval sets
// (`flags interval`) hold ranges; their elements must be disjoint (the kernel rejects overlaps).
// A set holds its elements in Elements, or, made by NewAddrSet, in a compact map of addresses;
// its methods (Len, Get, All, Entries, Addresses, Put, Delete) read and write either.
type Set struct {
	Name     string
	Key      Key
	Map      bool
	Interval bool
	Comment  string
	// Size, when not 0, is the most elements the kernel lets the set hold (`size N`) and the
	// number its hash table is laid out for from the start, so that a set made with many
	// elements in one transaction is not re-hashed as it grows. Sets without interval only; a
	// set holding more elements than its size is an error, and so is a size on an interval set.
	// The kernel keeps a set's size for its life: a Commit that changes it deletes the set and
	// adds it anew with every element, the chains that look it up flushed and refilled.
	Size uint32
	// Counter gives every element a counter of the packets that matched it (`counter` in the
	// set's declaration): a lookup that finds the element counts the packet there, at the cost
	// of the element's counter memory. ReadCounts reads them.
	Counter bool
	// Timeout declares the set `flags timeout` and gives its elements to another owner (the
	// agent's DNS observer, internal/fqdn), which adds them with timeouts the kernel expires:
	// the set holds none here (Elements stays empty), and the Conn never adds, deletes, compares
	// or verifies its elements. A Replace carries the kernel's elements, with the time each has
	// left, into the new table, so a repair keeps them.
	Timeout bool
	// Elements maps each element's key to its value: the key is held once, not again in the
	// value (≈ 112 bytes a map entry; a key in Value too would add ≈ 72).
	Elements map[ElementKey]Value
	// addrs holds the elements of a set of plain addresses (NewAddrSet: an address key, no map,
	// no interval, elements without comments) instead of Elements: a key of 4 bytes an IPv4
	// element and 16 an IPv6 one, without pointers for the collector to scan, against ≈ 112
	// bytes an element in Elements. A Put of anything else moves them to Elements.
	addrs *addrSet
	// journal, once the set is committed, records the committed state of each key that Put or
	// Delete changed since: the Conn's mirror shares this set's elements instead of copying
	// them. Nil for a set not (yet) committed, and for clones.
	journal *journal
}

// NewAddrSet returns an empty set of plain addresses with room for n (see Set.addrs).
func NewAddrSet(name string, key Key, comment string, n int) *Set {
	as := &addrSet{}
	if key == KeyIPSaddr || key == KeyIPDaddr {
		as.v4 = make(map[[4]byte]struct{}, n)
	} else {
		as.v6 = make(map[[16]byte]struct{}, n)
	}
	return &Set{Name: name, Key: key, Comment: comment, addrs: as}
}

// addrSet is a set of addresses without zones: IPv4 ones in v4, the others (IPv6, IPv4-mapped
// IPv6, which are different elements) in v6. Either map is made at its first address.
type addrSet struct {
	v4 map[[4]byte]struct{}
	v6 map[[16]byte]struct{}
}

// len is the number of addresses (0 for nil: no addrSet).
func (as *addrSet) len() int {
	if as == nil {
		return 0
	}
	return len(as.v4) + len(as.v6)
}

func (as *addrSet) has(a netip.Addr) bool {
	if a.Is4() {
		_, ok := as.v4[a.As4()]
		return ok
	}
	_, ok := as.v6[a.As16()]
	return ok
}

func (as *addrSet) add(a netip.Addr) {
	if a.Is4() {
		if as.v4 == nil {
			as.v4 = map[[4]byte]struct{}{}
		}
		as.v4[a.As4()] = struct{}{}
		return
	}
	if as.v6 == nil {
		as.v6 = map[[16]byte]struct{}{}
	}
	as.v6[a.As16()] = struct{}{}
}

func (as *addrSet) delete(a netip.Addr) {
	if a.Is4() {
		delete(as.v4, a.As4())
	} else {
		delete(as.v6, a.As16())
	}
}

// all yields the addresses, in map order (none for nil: no addrSet).
func (as *addrSet) all() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		if as == nil {
			return
		}
		for b := range as.v4 {
			if !yield(netip.AddrFrom4(b)) {
				return
			}
		}
		for b := range as.v6 {
			if !yield(netip.AddrFrom16(b)) {
				return
			}
		}
	}
}

// clone copies the maps wholesale (maps.Clone, cheaper than inserting key by key); nil stays nil.
func (as *addrSet) clone() *addrSet {
	if as == nil {
		return nil
	}
	return &addrSet{v4: maps.Clone(as.v4), v6: maps.Clone(as.v6)}
}

// journal holds the committed state of the keys changed since a set's last commit. Its prior
// is nil once the set has left the committed table (end): its owner may keep and change the
// set (nft's State does), which records nothing then.
type journal struct {
	prior map[ElementKey]prior
}

// end stops the journal of a set that has left the committed table.
func (j *journal) end() {
	if j != nil {
		j.prior = nil
	}
}

// prior is a key's committed state: its value, or absent.
type prior struct {
	v       Value
	present bool
}

// plainAddr reports whether e can live in addrs: a single address without a value.
func plainAddr(e Element) bool {
	return e.Value == Value{} && e.Addr.IsValid() && e.Addr.Zone() == "" && e.ElementKey == AddrKey(e.Addr)
}

// Uncommitted reports whether the set holds changes a Commit has not taken yet: it was never
// committed, or Put or Delete changed it since (its journal recorded a key). O(1).
func (s *Set) Uncommitted() bool { return s.journal == nil || len(s.journal.prior) > 0 }

// Len returns the number of elements.
func (s *Set) Len() int { return len(s.Elements) + s.addrs.len() }

// Get returns the value of key k's element, if the set has one.
func (s *Set) Get(k ElementKey) (Value, bool) {
	if s.addrs != nil {
		if k != AddrKey(k.Addr) || k.Addr.Zone() != "" {
			return Value{}, false
		}
		return Value{}, s.addrs.has(k.Addr)
	}
	v, ok := s.Elements[k]
	return v, ok
}

// Entries yields the set's elements as key and value, in map order.
func (s *Set) Entries() iter.Seq2[ElementKey, Value] {
	return func(yield func(ElementKey, Value) bool) {
		for a := range s.addrs.all() {
			if !yield(AddrKey(a), Value{}) {
				return
			}
		}
		for k, v := range s.Elements {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Addresses yields the addresses of a set's single-address elements, in map order (all its
// elements for a set of plain addresses).
func (s *Set) Addresses() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		for a := range s.addrs.all() {
			if !yield(a) {
				return
			}
		}
		for k := range s.Elements {
			if k.Addr.IsValid() && k == AddrKey(k.Addr) && !yield(k.Addr) {
				return
			}
		}
	}
}

// All yields the set's elements, in map order.
func (s *Set) All() iter.Seq[Element] {
	return func(yield func(Element) bool) {
		for k, v := range s.Entries() {
			if !yield(Element{k, v}) {
				return
			}
		}
	}
}

// Put adds e to the set or replaces the element of its key. Once the set is committed, its
// elements change only through Put and Delete: the commit sends what they recorded, and a direct
// write to Elements or addrs would be missed (until Verify repairs it).
func (s *Set) Put(e Element) {
	if v, ok := s.Get(e.ElementKey); ok && v == e.Value {
		return // unchanged: nothing to journal
	}
	s.record(e.ElementKey)
	if s.addrs != nil {
		if plainAddr(e) {
			s.addrs.add(e.Addr)
			return
		}
		s.spill()
	}
	if s.Elements == nil {
		s.Elements = map[ElementKey]Value{}
	}
	s.Elements[e.ElementKey] = e.Value
}

// spill moves the elements of addrs to Elements (a Put that addrs cannot hold). The journal
// keeps its meaning: it records keys, whatever holds them.
func (s *Set) spill() {
	es := make(map[ElementKey]Value, s.addrs.len()+1)
	for a := range s.addrs.all() {
		es[AddrKey(a)] = Value{}
	}
	s.Elements, s.addrs = es, nil
}

// Delete removes the element of key k, if any (see Put).
func (s *Set) Delete(k ElementKey) {
	if _, ok := s.Get(k); !ok {
		return // absent: nothing to journal
	}
	s.record(k)
	if s.addrs != nil {
		if k == AddrKey(k.Addr) && k.Addr.Zone() == "" {
			s.addrs.delete(k.Addr)
		}
		return
	}
	delete(s.Elements, k)
}

func (s *Set) record(k ElementKey) {
	if s.journal == nil || s.journal.prior == nil {
		return
	}
	if _, ok := s.journal.prior[k]; ok {
		return
	}
	v, ok := s.Get(k)
	s.journal.prior[k] = prior{v, ok}
}

// committedElements yields the set's elements as last committed: its elements with the changes
// its journal recorded undone.
func (s *Set) committedElements() iter.Seq2[ElementKey, Value] {
	return func(yield func(ElementKey, Value) bool) {
		var changed map[ElementKey]prior
		if s.journal != nil {
			changed = s.journal.prior
		}
		for k, v := range s.Entries() {
			if _, ok := changed[k]; ok {
				continue
			}
			if !yield(k, v) {
				return
			}
		}
		for k, p := range changed {
			if p.present && !yield(k, p.v) {
				return
			}
		}
	}
}

// committedElement returns key k's element as last committed.
func (s *Set) committedElement(k ElementKey) (Value, bool) {
	if s.journal != nil {
		if p, ok := s.journal.prior[k]; ok {
			return p.v, p.present
		}
	}
	return s.Get(k)
}

// sameStorage reports whether s and o hold their elements in the same maps.
func (s *Set) sameStorage(o *Set) bool {
	ptr := func(m any) uintptr { return uintptr(reflect.ValueOf(m).UnsafePointer()) }
	return ptr(s.Elements) == ptr(o.Elements) && ptr(s.addrs) == ptr(o.addrs)
}

// ElementKey identifies an element within its set.
type ElementKey struct {
	Addr, AddrEnd netip.Addr // address keys; AddrEnd == Addr for a single address
	Proto         uint8      // inet_proto keys
	Port, PortEnd uint16     // inet_service keys; PortEnd == Port for a single port
	Ifname        string
}

// AddrKey is the key of a single address: AddrEnd equal to Addr, the one spelling the package
// and its users write (an unset AddrEnd is read the same way, but is a different map key).
func AddrKey(a netip.Addr) ElementKey { return ElementKey{Addr: a, AddrEnd: a} }

// Value is what a set element holds besides its key: its verdict (set in verdict maps) and its
// comment.
type Value struct {
	Verdict Verdict
	Comment string
}

// Element is a set element: its key and its value.
type Element struct {
	ElementKey
	Value
}

func (k ElementKey) String() string {
	var parts []string
	if k.Ifname != "" {
		parts = append(parts, fmt.Sprintf("%q", k.Ifname))
	}
	switch {
	case k.Addr.IsValid() && k.AddrEnd != k.Addr && k.AddrEnd.IsValid():
		parts = append(parts, k.Addr.String()+"-"+k.AddrEnd.String())
	case k.Addr.IsValid():
		parts = append(parts, k.Addr.String())
	}
	switch {
	case len(parts) > 0 && k.Proto == 0:
	case k.PortEnd != k.Port && k.PortEnd != 0:
		parts = append(parts, fmt.Sprintf("%d . %d-%d", k.Proto, k.Port, k.PortEnd))
	default:
		parts = append(parts, fmt.Sprintf("%d . %d", k.Proto, k.Port))
	}
	return strings.Join(parts, " . ")
}

// Changes names the objects a Commit must look at besides the committed sets changed in place
// (Put, Delete), which their journals name: sets added, replaced by another object or removed,
// and chains (rules and properties) that may differ between the committed and the desired
// table. Objects named here but absent from the desired table are deleted. A nil *Changes means
// "everything". A set changed in place costs O(keys changed); a set replaced by another object
// is compared whole, O(elements of the set): a map lookup per element.
type Changes struct {
	Sets   map[string]struct{}
	Chains map[string]struct{}
}

// Stats counts the objects of a committed table, for the gauges.
type Stats struct {
	Chains, Rules, Sets, Elements int
}
