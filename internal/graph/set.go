package graph

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"hash/maphash"
	"iter"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// set is one dataplane set: the addresses (or address . protocol . port of a named port) of the
// endpoints a matcher matches, cluster-wide, but for contested addresses: an address several
// endpoints hold is a member as its polarity says (memberOf). The members
// are not stored: they are a function of the matcher's endpoints (membersOf), listed when the set
// is emitted whole, and a change of them is found with the address index (see contribute): one
// entry per address of an endpoint, where member counts per set would hold one per membership,
// and an address is usually in several.
type set struct {
	id    dataplane.SetID
	kind  dataplane.SetKind
	desc  string
	m     *matcher
	port  string         // SetNamedPorts: the port name
	proto model.Protocol // SetNamedPorts: the protocol (ProtocolAny: every protocol)
	pol   polarity
	refs  int // compiled rules of active policies referring to it
	// size is the number of members once the set has been emitted (a fresh set is counted when
	// the flush lists it), for choosing between a delta and a replacement.
	size int
	// fresh: created since the last flush, or a contested address of it changed holders (listed
	// whole, as SetReplaced); otherwise delta holds the members added (true) or removed (false)
	// since the last flush.
	fresh bool
	delta map[dataplane.Member]bool
}

// polarity is how a set counts an address several endpoints hold: the direction in which the
// rules using it fail safe while who is behind the address is in doubt (setPolarity).
type polarity uint8

const (
	// polarityEvery: a member while every holder contributes it. For sets a rule uses
	// positively to allow: a contested address is not granted what only one holder would be.
	polarityEvery polarity = iota
	// polarityAny: a member while any holder contributes it. For sets a Deny or Pass rule uses
	// positively and sets an Allow rule uses negated (absence grants): a contested address is
	// denied what any holder would be, and granted "not in" only when no holder is in.
	polarityAny
)

// setPolarity is the polarity of a set a rule with action uses, negated or not: the one under
// which a contested address makes the rule match less when it allows and more when it denies
// or passes. A Log rule decides nothing and counts as an Allow.
func setPolarity(action model.Action, negated bool) polarity {
	restricts := action == model.ActionDeny || action == model.ActionPass
	if restricts != negated {
		return polarityAny
	}
	return polarityEvery
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func makeID(prefix, key string) dataplane.SetID {
	h := sha256.Sum256([]byte(key))
	return dataplane.SetID(prefix + idEncoding.EncodeToString(h[:])[:15])
}

// setCalculator is stage 3: the sets the compiled rules refer to, their membership as
// endpoints join and leave their matchers or change their addresses and named ports, and the
// address index. It asks the label index for matchers and their members, tells the sequencer
// which sets changed and passes endpoint changes on to the resolver.
type setCalculator struct {
	index   setIndex
	changes changes
	next    endpointListener

	sets    map[dataplane.SetID]*set
	holders addrIndex
}

// setIndex is what the set calculator asks the label index.
type setIndex interface {
	acquireMatcher(spec) *matcher
	releaseMatcher(*matcher)
	membersOf(*matcher) members
	matchedBy(*endpoint, *matcher) bool
}

func newSetCalculator(index setIndex, changes changes) *setCalculator {
	return &setCalculator{index: index, changes: changes, sets: map[dataplane.SetID]*set{}, holders: newAddrIndex()}
}

func (c *setCalculator) wire(next endpointListener) { c.next = next }

// onEndpoint updates the sets over the matchers e left or joined, with its addresses and named
// ports before the change, then, when they changed, withdraws e's old contributions to its sets
// and adds the new ones; then it tells next.
//
// Every endpoint is filed in the address index under its addresses from its add to its
// removal, in a set or not: an endpoint in no set still contests the addresses it shares. When
// e's own update adds, removes or moves addresses that another endpoint holds, the sets of every
// other holder are listed whole at the next flush (contest).
func (c *setCalculator) onEndpoint(e *endpoint, ch endpointChange) {
	net := e.net // before the change
	if ch.netChanged {
		net = ch.old
	}
	switch {
	case ch.added:
		c.holders.add(e, e.net)
		c.contest(e, e.net)
	case ch.removed:
		c.contest(e, e.net)
		c.holders.remove(e, e.net)
	case ch.netChanged:
		c.contest(e, ch.old)
		c.holders.remove(e, ch.old)
		c.holders.add(e, e.net)
		c.contest(e, e.net)
	}
	for _, m := range ch.left {
		for _, s := range m.sets {
			c.contribute(s, e, net, false)
		}
		e.inSets -= int32(len(m.sets))
	}
	for _, m := range ch.joined {
		for _, s := range m.sets {
			c.contribute(s, e, net, true)
		}
		e.inSets += int32(len(m.sets))
	}
	if ch.netChanged {
		for _, mt := range e.matches.all() {
			for _, s := range mt.sets {
				c.contribute(s, e, ch.old, false)
			}
		}
		for _, mt := range e.matches.all() {
			for _, s := range mt.sets {
				c.contribute(s, e, e.net, true)
			}
		}
	}
	c.next.onEndpoint(e, ch)
}

// setID is the ID of the set of kind over sp (port/proto for named ports) with polarity pol: a
// hash of them, where an every-polarity set's leaves the polarity out and an any-polarity
// set's starts with "any_".
func setID(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) dataplane.SetID {
	prefix, key := "a", sp.key()
	if kind == dataplane.SetNamedPorts {
		prefix, key = "p", key+"|"+strconv.Itoa(len(port))+":"+port+"|"+strconv.Itoa(int(proto))
	}
	if pol == polarityAny {
		return "any_" + makeID(prefix, key+"|any")
	}
	return makeID(prefix, key)
}

// acquireSet returns the set of kind over sp (port/proto for named ports) with polarity pol
// and one more reference, creating it if needed (its members are listed by the next flush).
// A matcher used with both polarities has two sets; they differ only in contested addresses.
func (c *setCalculator) acquireSet(sp spec, kind dataplane.SetKind, port string, proto model.Protocol, pol polarity) *set {
	id := setID(sp, kind, port, proto, pol)
	if s := c.sets[id]; s != nil {
		s.refs++
		return s
	}
	m := c.index.acquireMatcher(sp)
	desc := sp.describe()
	if kind == dataplane.SetNamedPorts {
		desc += " port " + port
		if proto != model.ProtocolAny {
			desc += "/" + strings.ToLower(proto.String())
		}
	}
	if pol == polarityAny {
		desc += " (any holder)"
	}
	s := &set{id: id, kind: kind, desc: desc, m: m, port: port, proto: proto, pol: pol, refs: 1, fresh: true}
	m.sets = append(m.sets, s)
	for e := range c.index.membersOf(m).all {
		e.inSets++
	}
	c.sets[id] = s
	c.changes.setChanged(id)
	return s
}

func (c *setCalculator) releaseSet(s *set) {
	s.refs--
	if s.refs > 0 {
		return
	}
	delete(c.sets, s.id)
	c.changes.setChanged(s.id)
	m := s.m
	for i, x := range m.sets {
		if x == s {
			m.sets = append(m.sets[:i], m.sets[i+1:]...)
			break
		}
	}
	for e := range c.index.membersOf(m).all {
		e.inSets--
	}
	c.index.releaseMatcher(m)
}

// contest lists whole, at the next flush, every every-polarity set of the other endpoints
// holding an address of net: e's update changes who claims it, and so whether it is a member
// (memberOf). An any-polarity set's membership changes only with e's own contribution, which
// contribute handles. It is called while e is filed under net. Usually no address of net is
// shared and this costs one lookup per address.
func (c *setCalculator) contest(e *endpoint, net netInfo) {
	for a := range net.addrs() {
		if !c.holders.shared(a) {
			continue
		}
		for h := range c.holders.of(a) {
			if h == e {
				continue
			}
			for _, m := range h.matches.all() {
				for _, s := range m.sets {
					if s.pol == polarityEvery {
						c.relist(s)
					}
				}
			}
		}
	}
}

// relist makes s listed whole by the next flush.
func (c *setCalculator) relist(s *set) {
	s.fresh = true
	s.delta = nil
	c.changes.setChanged(s.id)
}

// memberOf reports whether mb, which an endpoint of s contributes, is a member of s. An
// address several endpoints hold (a pod's IP reused by its successor before its delete
// arrives, a status written late) is one of an every-polarity set only while every holder
// contributes it, so a packet from or to it is allowed by a rule only if it would be for each
// pod that may be behind it; of an any-polarity set while one holder does (the endpoint that
// contributes mb), so it is denied by a rule if it would be for one of them. An address one
// endpoint holds is a member of both.
func (c *setCalculator) memberOf(s *set, mb dataplane.Member) bool {
	if s.pol == polarityAny || !c.holders.shared(mb.Addr) {
		return true
	}
	for h := range c.holders.of(mb.Addr) {
		if !c.contributes(s, h, mb) {
			return false
		}
	}
	return true
}

// message is the set's message for the next flush: SetReplaced when it is new, was not sent
// or its delta is larger than it, else SetMembersChanged with its delta, nil when nothing
// changed; exists is false when the set is gone. The set's delta is consumed.
func (c *setCalculator) message(id dataplane.SetID, sent bool) (msg dataplane.Message, exists bool) {
	s := c.sets[id]
	if s == nil {
		return nil, false
	}
	switch {
	case s.fresh || !sent || len(s.delta) > s.size:
		ms := c.members(s)
		s.size = len(ms)
		msg = dataplane.SetReplaced{ID: id, Kind: s.kind, Description: s.desc, Members: ms}
	case len(s.delta) > 0:
		var mc dataplane.SetMembersChanged
		mc.ID = id
		for mb, in := range s.delta {
			if in {
				mc.Added = append(mc.Added, mb)
			} else {
				mc.Removed = append(mc.Removed, mb)
			}
		}
		sortMembers(mc.Added)
		sortMembers(mc.Removed)
		msg = mc
	}
	s.fresh = false
	s.delta = nil
	return msg, true
}

// resolves reports whether np is the set's named port.
func (s *set) resolves(np model.NamedPort) bool {
	return np.Name == s.port && (s.proto == model.ProtocolAny || np.Protocol == s.proto)
}

// hasPort reports whether one of net's named ports is the set's named port as proto/port.
func (s *set) hasPort(net netInfo, proto model.Protocol, port uint16) bool {
	for np := range net.namedPorts() {
		if s.resolves(np) && np.Protocol == proto && np.Port == port {
			return true
		}
	}
	return false
}

// contribution yields the members of s of an endpoint with net, each once: appendNet drops repeated addresses and named
// ports, and two named ports the set resolves to one protocol and port would be the same.
func (s *set) contribution(net netInfo) iter.Seq[dataplane.Member] {
	return func(yield func(dataplane.Member) bool) {
		for a := range net.addrs() {
			if s.kind == dataplane.SetAddrs {
				if !yield(dataplane.Member{Addr: a}) {
					return
				}
				continue
			}
			for np := range net.namedPorts() {
				if !s.resolves(np) {
					continue
				}
				if !yield(dataplane.Member{Addr: a, Protocol: np.Protocol, Port: np.Port}) {
					return
				}
			}
		}
	}
}

// contributes reports whether h is one of s's endpoints and has mb among its members of s, given
// that h holds mb's address.
func (c *setCalculator) contributes(s *set, h *endpoint, mb dataplane.Member) bool {
	if !c.index.matchedBy(h, s.m) {
		return false
	}
	return s.kind == dataplane.SetAddrs || s.hasPort(h.net, mb.Protocol, mb.Port)
}

// members lists the set's members from its matcher's endpoints. It walks them twice, to count
// and then to fill a list of that size: a list grown as it is filled would leave as much again
// in garbage (32 bytes a member; a first flush lists every member of every set) at the agent's
// peak, where the second walk costs time linear in the members and allocates nothing. A list
// that may hold a member twice — a named-port set's, or one with an address several endpoints
// hold, listed once per holder — is sorted and its repeats dropped; any other, nearly every
// address set, is left in the order of the walk, which the dataplane does not read (it files
// members by address), so that a first flush does not sort every member of every set.
func (c *setCalculator) members(s *set) []dataplane.Member {
	n := 0
	for e := range c.index.membersOf(s.m).all {
		for range s.contribution(e.net) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]dataplane.Member, 0, n)
	repeats := s.kind != dataplane.SetAddrs
	for e := range c.index.membersOf(s.m).all {
		for mb := range s.contribution(e.net) {
			shared := c.holders.shared(mb.Addr)
			if shared && !c.memberOf(s, mb) {
				continue
			}
			out = append(out, mb)
			repeats = repeats || shared
		}
	}
	if !repeats {
		return out
	}
	sortMembers(out)
	return slices.Compact(out) // endpoints sharing an address
}

// contribute records that e's members of s (from net) arrive (in) or leave, e having just
// joined or left s's matcher (or changed its addresses or ports). A member no other endpoint
// holds arrives or leaves with e; a contested one (another endpoint holds its address: the
// address index lists them) makes the set listed whole by the next flush, where memberOf
// decides. A fresh set is listed whole by the next flush.
func (c *setCalculator) contribute(s *set, e *endpoint, net netInfo, in bool) {
	if s.fresh {
		return
	}
	for mb := range s.contribution(net) {
		if c.heldElsewhere(e, mb.Addr) {
			c.relist(s)
			return
		}
		if in {
			s.size++
		} else {
			s.size--
		}
		if s.delta == nil {
			s.delta = map[dataplane.Member]bool{}
		}
		if was, ok := s.delta[mb]; ok && was != in {
			delete(s.delta, mb)
		} else {
			s.delta[mb] = in
		}
		c.changes.setChanged(s.id)
	}
}

// heldElsewhere reports whether an endpoint other than e holds a.
func (c *setCalculator) heldElsewhere(e *endpoint, a netip.Addr) bool {
	if !c.holders.shared(a) && c.holders.first[c.holders.digest(a)] == e {
		return false
	}
	for h := range c.holders.of(a) {
		if h != e {
			return true
		}
	}
	return false
}

// addrIndex is which endpoints hold each address, of every endpoint (see onEndpoint). An
// address has one holder but while a pod's IP is reused before the old pod's delete arrives,
// so the first holder is a map entry of 16 bytes per address, keyed by a 64-bit digest of the
// address (an IPv4 address is its own), and the others are in a map that is almost always
// empty. Two addresses may share a digest: of yields only the holders that hold the address, so
// a shared digest costs a lookup, never a wrong answer. Endpoint addresses are unmapped
// (keepEndpoint).
type addrIndex struct {
	first  map[uint64]*endpoint
	others map[uint64][]*endpoint
	seed   maphash.Seed
}

func newAddrIndex() addrIndex {
	return addrIndex{first: map[uint64]*endpoint{}, others: map[uint64][]*endpoint{}, seed: maphash.MakeSeed()}
}

// digest is a's key: an IPv4 address's 32 bits, above them a flag and 63 bits of hash for IPv6.
func (x *addrIndex) digest(a netip.Addr) uint64 {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:]))
	}
	return maphash.Comparable(x.seed, a.As16()) | 1<<63
}

// of yields the endpoints holding a.
func (x *addrIndex) of(a netip.Addr) iter.Seq[*endpoint] {
	return func(yield func(*endpoint) bool) {
		k := x.digest(a)
		h := x.first[k]
		if h == nil {
			return
		}
		if h.holds(a) && !yield(h) {
			return
		}
		for _, h := range x.others[k] {
			if h.holds(a) && !yield(h) {
				return
			}
		}
	}
}

// shared reports whether a's digest has more than one holder: false means a has at most one.
// While no address has a second holder, as almost always, it hashes nothing.
func (x *addrIndex) shared(a netip.Addr) bool {
	return len(x.others) > 0 && len(x.others[x.digest(a)]) > 0
}

// add files e under the addresses of net (e's, or the ones it had).
func (x *addrIndex) add(e *endpoint, net netInfo) {
	for a := range net.addrs() {
		k := x.digest(a)
		switch h := x.first[k]; {
		case h == nil:
			x.first[k] = e
		case h != e && !slices.Contains(x.others[k], e):
			x.others[k] = append(x.others[k], e)
		}
	}
}

// remove takes e out from under the addresses of net (e's, or the ones it had); another holder
// of a digest becomes its first.
func (x *addrIndex) remove(e *endpoint, net netInfo) {
	for a := range net.addrs() {
		k := x.digest(a)
		hs := x.others[k]
		if x.first[k] == e {
			if len(hs) == 0 {
				delete(x.first, k)
				continue
			}
			x.first[k] = hs[0]
			hs = slices.Delete(hs, 0, 1)
		} else if i := slices.Index(hs, e); i >= 0 {
			hs = slices.Delete(hs, i, i+1)
		} else {
			continue // two addresses of e with one digest
		}
		if len(hs) == 0 {
			delete(x.others, k)
		} else {
			x.others[k] = hs
		}
	}
}
