package ruleset

import (
	"fmt"

	"github.com/google/nftables"
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
}

var keyDescs = map[Key]keyDesc{
	KeyIPSaddr:              {shapeAddr, unix.NFPROTO_IPV4, 12, "ip saddr"},
	KeyIPDaddr:              {shapeAddr, unix.NFPROTO_IPV4, 16, "ip daddr"},
	KeyIP6Saddr:             {shapeAddr, unix.NFPROTO_IPV6, 8, "ip6 saddr"},
	KeyIP6Daddr:             {shapeAddr, unix.NFPROTO_IPV6, 24, "ip6 daddr"},
	KeyL4Proto:              {shapeProto, 0, 0, "meta l4proto"},
	KeyL4ProtoDport:         {shapeProtoPort, 0, 0, "meta l4proto . th dport"},
	KeyIifname:              {shapeIfname, 0, 0, "iifname"},
	KeyIifnameIPSaddr:       {shapeIfnameAddr, unix.NFPROTO_IPV4, 12, "iifname . ip saddr"},
	KeyIifnameIP6Saddr:      {shapeIfnameAddr, unix.NFPROTO_IPV6, 8, "iifname . ip6 saddr"},
	KeyIPSaddrL4ProtoDport:  {shapeAddrProtoPort, unix.NFPROTO_IPV4, 12, "ip saddr . meta l4proto . th dport"},
	KeyIPDaddrL4ProtoDport:  {shapeAddrProtoPort, unix.NFPROTO_IPV4, 16, "ip daddr . meta l4proto . th dport"},
	KeyIP6SaddrL4ProtoDport: {shapeAddrProtoPort, unix.NFPROTO_IPV6, 8, "ip6 saddr . meta l4proto . th dport"},
	KeyIP6DaddrL4ProtoDport: {shapeAddrProtoPort, unix.NFPROTO_IPV6, 24, "ip6 daddr . meta l4proto . th dport"},
}

func describeKey(k Key) (keyDesc, error) {
	d, ok := keyDescs[k]
	if !ok {
		return keyDesc{}, fmt.Errorf("unknown key %d", k)
	}
	return d, nil
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
