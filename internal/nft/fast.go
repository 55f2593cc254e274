package nft

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The fast representation of a known peer. A peer's class is usually "what any other address
// there gets, plus a few ports allowed" (a NetworkPolicy allowing TCP 80 from a selector). Such
// a peer needs no goto element in the group's peers map: one element per allowed port in the
// group's <group>_allow set (address . protocol . port, a plain hash set), looked up first and
// accepting; every other packet of the peer falls through to the nets map and the default, which
// give it exactly what its class gives. Adding a plain element costs the kernel the same at any
// table size; a goto element makes it validate the whole jump graph of the table, in time
// proportional to its verdict-map elements. So pod joins and leaves of such peers stay cheap at
// any table size.

// maxFastPorts bounds the elements one fast peer adds.
const maxFastPorts = 16

// protoPort is one allowed destination port of a fast peer, with the reason that allows it.
type protoPort struct {
	proto  model.Protocol
	port   uint16
	reason string
}

type fastResult struct {
	ports []protoPort
	ok    bool
}

// fallClass is the class the group's chain gives an address that is in no exact map: the nets
// interval holding it, else the default.
func (d *Decision) fallClass(a netip.Addr) string {
	i, found := slices.BinarySearchFunc(d.Intervals, a, func(iv Interval, a netip.Addr) int {
		switch {
		case iv.To.Less(a):
			return -1
		case a.Less(iv.From):
			return 1
		}
		return 0
	})
	if found {
		return d.Intervals[i].Class
	}
	return d.Default
}

// fast reports whether a peer of class key ck whose address falls through to class fk can be
// represented by allowed ports alone, and which. Results are memoised per pair of classes.
func (cp *compiled) fast(ck, fk string) fastResult {
	if cp.fastMemo == nil {
		cp.fastMemo = map[[2]string]fastResult{}
	}
	if r, ok := cp.fastMemo[[2]string{ck, fk}]; ok {
		return r
	}
	r := fastPorts(cp.Classes[ck], cp.Classes[fk])
	cp.fastMemo[[2]string{ck, fk}] = r
	return r
}

// fastPorts compares class c with the fall-through class f everywhere: where they differ, c must
// allow a single port of a port protocol.
func fastPorts(c, f *Class) fastResult {
	if c == nil || f == nil {
		return fastResult{}
	}
	if c == f {
		return fastResult{ok: true}
	}
	protos := map[model.Protocol]bool{255: true}
	for p := range c.Protos {
		protos[p] = true
	}
	for p := range f.Protos {
		protos[p] = true
	}
	for p := range protos {
		if !hasPorts(p) && outcome(c, p, 0, 0) != outcome(f, p, 0, 0) {
			return fastResult{}
		}
	}
	if !slices.Equal(icmpSegs(c), icmpSegs(f)) || len(c.SrcPorts)+len(f.SrcPorts) > 0 {
		return fastResult{} // the allow set holds destination ports: no ICMP key, no source port
	}
	var out []protoPort
	for _, p := range portProtocols {
		cuts := []uint32{0}
		for _, cl := range []*Class{c, f} {
			for _, s := range cl.Ports {
				if s.Proto == p {
					cuts = append(cuts, uint32(s.First), uint32(s.Last)+1)
				}
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for first, last := range spans(cuts) {
			oc, of := outcome(c, p, 0, first), outcome(f, p, 0, first)
			if oc == of {
				continue
			}
			if oc.Verdict != Allow || oc.Logs != "" || first != last || len(out) == maxFastPorts {
				return fastResult{}
			}
			out = append(out, protoPort{proto: p, port: first, reason: oc.Reason})
		}
	}
	return fastResult{ports: out, ok: true}
}

// icmpSegs are a class's segments of ICMP keys (protocols without ports).
func icmpSegs(c *Class) []PortSeg {
	var out []PortSeg
	for _, s := range c.Ports {
		if !hasPorts(s.Proto) {
			out = append(out, s)
		}
	}
	return out
}

// outcome is what class c gives a packet (Decision.Lookup's class step).
func outcome(c *Class, proto model.Protocol, sport, port uint16) Outcome {
	if o, ok := c.Protos[proto]; ok {
		return o
	}
	for _, s := range c.SrcPorts {
		if s.Proto == proto && s.First <= sport && sport <= s.Last {
			return outcome(s.Class, proto, sport, port)
		}
	}
	for _, s := range c.Ports {
		if s.Proto == proto && s.First <= port && port <= s.Last {
			return s.Outcome
		}
	}
	return c.Other
}

// kernelLookup is what the group's chain does with a packet, fast path included: the allow set,
// the peers map (peers that are not fast), the nets map, the default. Tests compare it with the
// model.
func (cp *compiled) kernelLookup(peer netip.Addr, proto model.Protocol, sport, port uint16) Outcome {
	peer = peer.Unmap()
	fk := cp.fallClass(peer)
	ck, known := cp.Peers[peer]
	if !known {
		return outcome(cp.Classes[fk], proto, sport, port)
	}
	r := cp.fast(ck, fk)
	if !r.ok {
		return outcome(cp.Classes[ck], proto, sport, port)
	}
	for _, pp := range r.ports {
		if pp.proto == proto && pp.port == port {
			return Outcome{Verdict: Allow, Reason: pp.reason}
		}
	}
	return outcome(cp.Classes[fk], proto, sport, port)
}
