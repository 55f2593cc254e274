package graph

import (
	"encoding/binary"
	"iter"
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// netInfo is an endpoint's addresses and named ports packed into one string: two slices would
// cost their headers and arrays, each address with a pointer for the collector to follow (≈ 140
// bytes a pod); this is one small allocation without pointers.
// Layout: the address count (uvarint), each address as its length (4 or 16) and bytes, then
// each named port as its protocol, its number (2 bytes, big endian), its name's length (uvarint)
// and name. Order is kept and exact duplicates are dropped: they contribute nothing twice to a
// set. Equal contents pack equal, so == compares them.
type netInfo string

// appendNet appends the packed form of addrs (valid, unmapped, without zone: keepEndpoint) and
// named ports to dst; neither appends nothing. The label index packs an update into its scratch buffer
// and compares it with the endpoint's before making a string of it: an update that leaves them
// unchanged allocates nothing, and the buffer grows to the largest endpoint once. Its time is
// linear in the number of addresses and ports (distinct): a pod may declare thousands of ports.
func appendNet(dst []byte, addrs []netip.Addr, ports []model.NamedPort) []byte {
	if len(addrs) == 0 && len(ports) == 0 {
		return dst
	}
	count := 0
	for range distinct(addrs) {
		count++
	}
	dst = binary.AppendUvarint(dst, uint64(count))
	for a := range distinct(addrs) {
		if a.Is4() {
			x := a.As4()
			dst = append(append(dst, 4), x[:]...)
		} else {
			x := a.As16()
			dst = append(append(dst, 16), x[:]...)
		}
	}
	for p := range distinct(ports) {
		dst = append(dst, byte(p.Protocol), byte(p.Port>>8), byte(p.Port))
		dst = binary.AppendUvarint(dst, uint64(len(p.Name)))
		dst = append(dst, p.Name...)
	}
	return dst
}

// distinctByScan is the length up to which distinct finds repeats by scanning what came before
// (no allocation); longer lists get a map.
const distinctByScan = 16

// distinct yields the elements of xs in order, each once (its first occurrence), in time linear
// in len(xs).
func distinct[T comparable](xs []T) iter.Seq[T] {
	return func(yield func(T) bool) {
		if len(xs) <= distinctByScan {
			for i, x := range xs {
				if !slices.Contains(xs[:i], x) && !yield(x) {
					return
				}
			}
			return
		}
		seen := make(map[T]struct{}, len(xs))
		for _, x := range xs {
			if _, dup := seen[x]; dup {
				continue
			}
			seen[x] = struct{}{}
			if !yield(x) {
				return
			}
		}
	}
}

// uvarint decodes the uvarint at n[i:] and returns it with the index after it.
func (n netInfo) uvarint(i int) (int, int) {
	v := 0
	for shift := 0; ; shift += 7 {
		c := n[i]
		i++
		v |= int(c&0x7f) << shift
		if c < 0x80 {
			return v, i
		}
	}
}

// addrs yields the addresses, in order.
func (n netInfo) addrs() iter.Seq[netip.Addr] {
	return func(yield func(netip.Addr) bool) {
		if n == "" {
			return
		}
		count, i := n.uvarint(0)
		for range count {
			var a netip.Addr
			if l := n[i]; l == 4 {
				a = netip.AddrFrom4([4]byte{n[i+1], n[i+2], n[i+3], n[i+4]})
			} else {
				var x [16]byte
				copy(x[:], n[i+1:i+17])
				a = netip.AddrFrom16(x)
			}
			i += 1 + int(n[i])
			if !yield(a) {
				return
			}
		}
	}
}

// namedPorts yields the named ports, in order; a name is part of n (no copy).
func (n netInfo) namedPorts() iter.Seq[model.NamedPort] {
	return func(yield func(model.NamedPort) bool) {
		for i := n.portsAt(); i < len(n); {
			p := model.NamedPort{Protocol: model.Protocol(n[i]), Port: uint16(n[i+1])<<8 | uint16(n[i+2])}
			l, j := n.uvarint(i + 3)
			p.Name, i = string(n[j:j+l]), j+l
			if !yield(p) {
				return
			}
		}
	}
}

// portsAt is the index of the first named port: after the addresses.
func (n netInfo) portsAt() int {
	if n == "" {
		return 0
	}
	count, i := n.uvarint(0)
	for range count {
		i += 1 + int(n[i])
	}
	return i
}
