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
// endpoints a matcher matches, cluster-wide. The members are not stored: they are a function of
// the matcher's endpoints (membersOf), listed when the set is emitted whole, and a change of them
// is found with the address index (see contribute): one entry per address in any set, where
// member counts per set would hold one per membership, and an address is usually in several.
type set struct {
	id    dataplane.SetID
	kind  dataplane.SetKind
	desc  string
	m     *matcher
	port  string         // SetNamedPorts: the port name
	proto model.Protocol // SetNamedPorts: the protocol (ProtocolAny: every protocol)
	refs  int            // compiled rules of active policies referring to it
	// size is the number of members once the set has been emitted (a fresh set is counted when
	// the flush lists it), for choosing between a delta and a replacement.
	size int
	// fresh: created since the last flush (emitted as SetReplaced); otherwise delta holds the
	// members added (true) or removed (false) since the last flush.
	fresh bool
	delta map[dataplane.Member]bool
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func makeID(prefix, key string) dataplane.SetID {
	h := sha256.Sum256([]byte(key))
	return dataplane.SetID(prefix + idEncoding.EncodeToString(h[:])[:15])
}

// acquireSet returns the set of kind over sp (port/proto for named ports) with one more
// reference, creating it if needed (its members are listed by the next flush).
func (g *Graph) acquireSet(sp spec, kind dataplane.SetKind, port string, proto model.Protocol) *set {
	k := sp.key()
	var id dataplane.SetID
	if kind == dataplane.SetAddrs {
		id = makeID("a", k)
	} else {
		id = makeID("p", k+"|"+strconv.Itoa(len(port))+":"+port+"|"+strconv.Itoa(int(proto)))
	}
	if s := g.sets[id]; s != nil {
		s.refs++
		return s
	}
	m := g.acquireMatcher(sp)
	desc := sp.describe()
	if kind == dataplane.SetNamedPorts {
		desc += " port " + port
		if proto != model.ProtocolAny {
			desc += "/" + strings.ToLower(proto.String())
		}
	}
	s := &set{id: id, kind: kind, desc: desc, m: m, port: port, proto: proto, refs: 1, fresh: true}
	m.sets = append(m.sets, s)
	for e := range g.membersOf(m) {
		g.addInSets(e, 1)
	}
	g.sets[id] = s
	g.dirtySets[id] = struct{}{}
	return s
}

func (g *Graph) releaseSet(s *set) {
	s.refs--
	if s.refs > 0 {
		return
	}
	delete(g.sets, s.id)
	g.dirtySets[s.id] = struct{}{}
	m := s.m
	for i, x := range m.sets {
		if x == s {
			m.sets = append(m.sets[:i], m.sets[i+1:]...)
			break
		}
	}
	for e := range g.membersOf(m) {
		g.addInSets(e, -1)
	}
	g.releaseMatcher(m)
}

// addInSets adds n to e.inSets, filing e in the address index while it is in a set: only those
// endpoints can contribute a member, and a node whose policies refer to few endpoints should
// not index the whole cluster's addresses.
func (g *Graph) addInSets(e *endpoint, n int) {
	was := e.inSets > 0
	e.inSets += int32(n)
	switch now := e.inSets > 0; {
	case now && !was:
		g.holders.add(e)
	case was && !now:
		g.holders.remove(e)
	}
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

// contribution yields e's members of s, each once: appendNet drops repeated addresses and named
// ports, and two named ports the set resolves to one protocol and port would be the same.
func (s *set) contribution(e *endpoint) iter.Seq[dataplane.Member] {
	return func(yield func(dataplane.Member) bool) {
		for a := range e.net.addrs() {
			if s.kind == dataplane.SetAddrs {
				if !yield(dataplane.Member{Addr: a}) {
					return
				}
				continue
			}
			for np := range e.net.namedPorts() {
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
func (g *Graph) contributes(s *set, h *endpoint, mb dataplane.Member) bool {
	if !h.matches.has(s.m, g.idx.pos) {
		return false
	}
	return s.kind == dataplane.SetAddrs || s.hasPort(h.net, mb.Protocol, mb.Port)
}

// members lists the set's members, sorted, from its matcher's endpoints. It walks them twice,
// to count and then to fill a list of that size: a list grown as it is filled would leave as
// much again in garbage (32 bytes a member; a first flush lists every member of every set) at
// the agent's peak, where the second walk costs time linear in the members and allocates nothing.
func (s *set) members(g *Graph) []dataplane.Member {
	n := 0
	for e := range g.membersOf(s.m) {
		for range s.contribution(e) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]dataplane.Member, 0, n)
	for e := range g.membersOf(s.m) {
		out = slices.AppendSeq(out, s.contribution(e))
	}
	sortMembers(out)
	return slices.Compact(out) // endpoints sharing an address
}

// contribute records that e's members of s arrive (in) or leave, e having just joined or left
// s's matcher (or changed its addresses or ports). A member arrives or leaves with e only if no
// other endpoint of the matcher contributes it: two endpoints share an address transiently (a
// pod's IP reused by its successor before its delete arrives), and the address index lists the
// other holders. A fresh set is listed whole by the next flush.
func (g *Graph) contribute(s *set, e *endpoint, in bool) {
	if s.fresh {
		return
	}
	for mb := range s.contribution(e) {
		if g.contributedElsewhere(s, e, mb) {
			continue
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
		g.dirtySets[s.id] = struct{}{}
	}
}

// contributedElsewhere reports whether an endpoint of s other than e contributes mb.
func (g *Graph) contributedElsewhere(s *set, e *endpoint, mb dataplane.Member) bool {
	for h := range g.holders.of(mb.Addr) {
		if h != e && g.contributes(s, h, mb) {
			return true
		}
	}
	return false
}

// addrIndex is which endpoints hold each address, of the endpoints in a set (see contribute
// and addInSets). An address has one holder but while a pod's IP is reused before the old
// pod's delete arrives, so the first holder is a map entry of 16 bytes per address, keyed by a
// 64-bit digest of the address (an IPv4 address is its own), and the others are in a map that
// is almost always empty. Two addresses may share a digest: of yields only the holders that
// hold the address, so a shared digest costs a lookup, never a wrong answer. Endpoint addresses
// are unmapped (keepEndpoint).
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

// add files e under its addresses.
func (x *addrIndex) add(e *endpoint) {
	for a := range e.net.addrs() {
		k := x.digest(a)
		switch h := x.first[k]; {
		case h == nil:
			x.first[k] = e
		case h != e && !slices.Contains(x.others[k], e):
			x.others[k] = append(x.others[k], e)
		}
	}
}

// remove takes e out from under its addresses; another holder of a digest becomes its first.
func (x *addrIndex) remove(e *endpoint) {
	for a := range e.net.addrs() {
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

// holds reports whether a is one of e's addresses.
func (e *endpoint) holds(a netip.Addr) bool {
	for b := range e.net.addrs() {
		if b == a {
			return true
		}
	}
	return false
}
