package graph

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// set is one dataplane set: the addresses (or address . protocol . port of a named port) of the
// endpoints a matcher matches, cluster-wide.
type set struct {
	id    SetID
	kind  SetKind
	desc  string
	m     *matcher
	port  string         // SetNamedPorts: the port name
	proto model.Protocol // SetNamedPorts: the protocol (ProtocolAny: every protocol)
	refs  int            // compiled rules of active policies referring to it
	// members counts, per member, the contributions of matched endpoints (two endpoints may
	// transiently share an address).
	members map[memberKey]int32
	// fresh: created since the last flush (emitted as SetReplaced); otherwise delta holds the
	// members added (true) or removed (false) since the last flush.
	fresh bool
	delta map[Member]bool
}

// memberKey is a Member as set.members holds it: 20 bytes without pointers (a netip.Addr is 24
// with one), so a member costs 24 bytes of map instead of 40 and the collector skips the map (at
// 100,000 pods the graph's member counts were 25 MB).
type memberKey struct {
	addr  [16]byte
	is4   bool
	proto model.Protocol
	port  uint16
}

func keyOf(mb Member) memberKey {
	return memberKey{addr: mb.Addr.As16(), is4: mb.Addr.Is4(), proto: mb.Protocol, port: mb.Port}
}

func (k memberKey) member() Member {
	a := netip.AddrFrom16(k.addr)
	if k.is4 {
		a = a.Unmap()
	}
	return Member{Addr: a, Protocol: k.proto, Port: k.port}
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func makeID(prefix, key string) SetID {
	h := sha256.Sum256([]byte(key))
	return SetID(prefix + idEncoding.EncodeToString(h[:])[:15])
}

// acquireSet returns the set of kind over sp (port/proto for named ports) with one more
// reference, creating it from the matcher's members if needed.
func (g *Graph) acquireSet(sp spec, kind SetKind, port string, proto model.Protocol) *set {
	k := sp.key()
	var id SetID
	if kind == SetAddrs {
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
	if kind == SetNamedPorts {
		desc += " port " + port
		if proto != model.ProtocolAny {
			desc += "/" + strings.ToLower(proto.String())
		}
	}
	s := &set{id: id, kind: kind, desc: desc, m: m, port: port, proto: proto, refs: 1,
		members: map[memberKey]int32{}, fresh: true}
	m.sets = append(m.sets, s)
	for e := range m.members {
		g.contribute(s, e, true)
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
	g.releaseMatcher(m)
}

// contribute adds (in) or withdraws e's members of s.
func (g *Graph) contribute(s *set, e *endpoint, in bool) {
	if s.kind == SetAddrs {
		for _, a := range e.addrs {
			g.count(s, Member{Addr: a}, in)
		}
		return
	}
	for _, np := range e.namedPorts {
		if np.Name != s.port || (s.proto != model.ProtocolAny && np.Protocol != s.proto) {
			continue
		}
		for _, a := range e.addrs {
			g.count(s, Member{Addr: a, Protocol: np.Protocol, Port: np.Port}, in)
		}
	}
}

func (g *Graph) count(s *set, mb Member, in bool) {
	k := keyOf(mb)
	n := s.members[k]
	if in {
		s.members[k] = n + 1
		if n > 0 {
			return
		}
	} else {
		if n > 1 {
			s.members[k] = n - 1
			return
		}
		delete(s.members, k)
	}
	if s.fresh {
		return
	}
	if s.delta == nil {
		s.delta = map[Member]bool{}
	}
	if was, ok := s.delta[mb]; ok && was != in {
		delete(s.delta, mb)
	} else {
		s.delta[mb] = in
	}
	g.dirtySets[s.id] = struct{}{}
}
