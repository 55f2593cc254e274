package ruleset

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// The encodings of a table's parts that another table of the node reuses (the bridge companion,
// internal/nft/kernel), so that an element, a key type or a match means the same bytes in both.

// IfnameAddrKey is the key of an `ifname . address` element: the name NUL-padded to IFNAMSIZ,
// then the address.
func IfnameAddrKey(ifname string, a netip.Addr) []byte {
	return append(ifnameBytes(ifname), a.AsSlice()...)
}

// IfnameAddrType is the key type of an `ifname . ipv4_addr` set (is6: `ifname . ipv6_addr`), a
// concatenation.
func IfnameAddrType(is6 bool) nftables.SetDatatype {
	if is6 {
		return ifnameIP6Type
	}
	return ifnameIPType
}

// IfnamePrefixMatch matches an interface name that starts with prefix (`iifname "veth*"`, key
// expr.MetaKeyIIFNAME or expr.MetaKeyOIFNAME): a comparison of the prefix's bytes only.
func IfnamePrefixMatch(key expr.MetaKey, prefix string) []expr.Any {
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte(prefix)}}
}

// LookupExprs loads key and looks it up in set (invert: `!= @set`), without the `meta nfproto`
// guard an address key has in an inet rule: the caller matches the family (the bridge family by
// the frame's protocol).
func LookupExprs(key Key, set string, invert bool) ([]expr.Any, error) {
	d, err := describeKey(key)
	if err != nil {
		return nil, fmt.Errorf("lookup of set %s: %w", set, err)
	}
	load := keyLoad(d)
	if d.fam != 0 {
		load = load[2:]
	}
	return append(load, &expr.Lookup{SourceRegister: 1, SetName: set, Invert: invert}), nil
}
