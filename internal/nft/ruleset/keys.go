package ruleset

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// shape is what a key's elements hold, whatever packet field a rule loads for it.
type shape uint8

const (
	shapeAddr          shape = iota + 1 // address
	shapeProto                          // inet_proto
	shapeProtoPort                      // inet_proto . inet_service
	shapeIfname                         // ifname
	shapeIfnameAddr                     // ifname . address
	shapeAddrProtoPort                  // address . inet_proto . inet_service (hash sets only)
)

// keyDesc describes a Key: the shape of its elements, the family and network-header offset of
// its address field, and how nft prints it in a rule. Everything else (set types, loads,
// element encodings) follows from these.
type keyDesc struct {
	shape shape
	fam   byte   // unix.NFPROTO_IPV4 or _IPV6 for keys with an address, else 0
	off   uint32 // the address's offset in the network header
	expr  string
	oif   bool // an ifname field is the output interface's (else the input interface's)
	// sport: the port field is the transport header's first 16 bits (th sport; ICMP's type and
	// code), else its next 16 (th dport).
	sport bool
}

var keyDescs = map[Key]keyDesc{
	KeyIPSaddr:              {shape: shapeAddr, fam: unix.NFPROTO_IPV4, off: 12, expr: "ip saddr"},
	KeyIPDaddr:              {shape: shapeAddr, fam: unix.NFPROTO_IPV4, off: 16, expr: "ip daddr"},
	KeyIP6Saddr:             {shape: shapeAddr, fam: unix.NFPROTO_IPV6, off: 8, expr: "ip6 saddr"},
	KeyIP6Daddr:             {shape: shapeAddr, fam: unix.NFPROTO_IPV6, off: 24, expr: "ip6 daddr"},
	KeyL4Proto:              {shape: shapeProto, fam: 0, off: 0, expr: "meta l4proto"},
	KeyL4ProtoDport:         {shape: shapeProtoPort, fam: 0, off: 0, expr: "meta l4proto . th dport"},
	KeyL4ProtoSport:         {shape: shapeProtoPort, fam: 0, off: 0, expr: "meta l4proto . th sport", sport: true},
	KeyIifname:              {shape: shapeIfname, fam: 0, off: 0, expr: "iifname"},
	KeyOifname:              {shape: shapeIfname, fam: 0, off: 0, expr: "oifname", oif: true},
	KeyIifnameIPSaddr:       {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV4, off: 12, expr: "iifname . ip saddr"},
	KeyIifnameIP6Saddr:      {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV6, off: 8, expr: "iifname . ip6 saddr"},
	KeyOifnameIPDaddr:       {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV4, off: 16, expr: "oifname . ip daddr", oif: true},
	KeyOifnameIP6Daddr:      {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV6, off: 24, expr: "oifname . ip6 daddr", oif: true},
	KeyIifnameIPDaddr:       {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV4, off: 16, expr: "iifname . ip daddr"},
	KeyIifnameIP6Daddr:      {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV6, off: 24, expr: "iifname . ip6 daddr"},
	KeyOifnameIPSaddr:       {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV4, off: 12, expr: "oifname . ip saddr", oif: true},
	KeyOifnameIP6Saddr:      {shape: shapeIfnameAddr, fam: unix.NFPROTO_IPV6, off: 8, expr: "oifname . ip6 saddr", oif: true},
	KeyIPSaddrL4ProtoDport:  {shape: shapeAddrProtoPort, fam: unix.NFPROTO_IPV4, off: 12, expr: "ip saddr . meta l4proto . th dport"},
	KeyIPDaddrL4ProtoDport:  {shape: shapeAddrProtoPort, fam: unix.NFPROTO_IPV4, off: 16, expr: "ip daddr . meta l4proto . th dport"},
	KeyIP6SaddrL4ProtoDport: {shape: shapeAddrProtoPort, fam: unix.NFPROTO_IPV6, off: 8, expr: "ip6 saddr . meta l4proto . th dport"},
	KeyIP6DaddrL4ProtoDport: {shape: shapeAddrProtoPort, fam: unix.NFPROTO_IPV6, off: 24, expr: "ip6 daddr . meta l4proto . th dport"},
}

func describeKey(k Key) (keyDesc, error) {
	d, ok := keyDescs[k]
	if !ok {
		return keyDesc{}, fmt.Errorf("unknown key %d", k)
	}
	return d, nil
}

// ifnameKey is the meta key an ifname field loads.
func (d keyDesc) ifnameKey() expr.MetaKey {
	if d.oif {
		return expr.MetaKeyOIFNAME
	}
	return expr.MetaKeyIIFNAME
}

func (d keyDesc) is4() bool { return d.fam == unix.NFPROTO_IPV4 }

// addrLen is the length of the key's address field.
func (d keyDesc) addrLen() uint32 {
	if d.is4() {
		return 4
	}
	return 16
}

// typeName is the set type as nft lists it.
func (d keyDesc) typeName() string {
	addr := "ipv6_addr"
	if d.is4() {
		addr = "ipv4_addr"
	}
	switch d.shape {
	case shapeAddr:
		return addr
	case shapeProto:
		return "inet_proto"
	case shapeProtoPort:
		return "inet_proto . inet_service"
	case shapeIfname:
		return "ifname"
	case shapeIfnameAddr:
		return "ifname . " + addr
	}
	return addr + " . inet_proto . inet_service"
}

var (
	l4ProtoDportType = nftables.MustConcatSetType(nftables.TypeInetProto, nftables.TypeInetService)
	ifnameIPType     = nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIPAddr)
	ifnameIP6Type    = nftables.MustConcatSetType(nftables.TypeIFName, nftables.TypeIP6Addr)
	ipProtoPortType  = nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetProto, nftables.TypeInetService)
	ip6ProtoPortType = nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetProto, nftables.TypeInetService)
)

// setType is the google/nftables key type of a set, and whether it is a concatenation.
func (d keyDesc) setType() (nftables.SetDatatype, bool) {
	pick := func(v4, v6 nftables.SetDatatype) nftables.SetDatatype {
		if d.is4() {
			return v4
		}
		return v6
	}
	switch d.shape {
	case shapeAddr:
		return pick(nftables.TypeIPAddr, nftables.TypeIP6Addr), false
	case shapeProto:
		return nftables.TypeInetProto, false
	case shapeProtoPort:
		return l4ProtoDportType, true
	case shapeIfname:
		return nftables.TypeIFName, false
	case shapeIfnameAddr:
		return pick(ifnameIPType, ifnameIP6Type), true
	}
	return pick(ipProtoPortType, ip6ProtoPortType), true
}
