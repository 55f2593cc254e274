package ruleset

import (
	"encoding/binary"
	"reflect"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
)

// google/nftables v0.3.0 cannot give a chain a comment: its Chain has no userdata and AddChain
// sends only name, hook, policy and type. The kernel keeps a chain comment in
// NFTA_CHAIN_USERDATA (TLV type NFTNL_UDATA_CHAIN_COMMENT), which nft 1.0.6 prints as
// `comment "…"` in the chain body. chainComments appends that attribute to the NEWCHAIN message
// AddChain has just queued, reaching the Conn's unexported message queue by reflection. Should a
// future google/nftables lay the Conn out differently, queuedMessages returns nil and a batch
// with a commented chain fails with an error saying so (TestQueuedMessages too) instead of
// corrupting anything.

const (
	nftaChainUserdata      = 12 // NFTA_CHAIN_USERDATA
	nftnlUdataChainComment = 0  // NFTNL_UDATA_CHAIN_COMMENT
)

// queuedMessages returns a pointer to the Conn's queue of batched messages, or nil when the
// layout is not the one of v0.3.0.
func queuedMessages(c *nftables.Conn) *[]netlink.Message {
	v := reflect.ValueOf(c).Elem().FieldByName("messages")
	if !v.IsValid() || v.Type() != reflect.TypeOf([]netlink.Message(nil)) {
		return nil
	}
	return (*[]netlink.Message)(unsafe.Pointer(v.UnsafeAddr()))
}

// addChainComment appends a comment to the last queued message, which must be the NEWCHAIN
// message of the chain. It reports whether it could.
func addChainComment(c *nftables.Conn, comment string) bool {
	if comment == "" {
		return true
	}
	q := queuedMessages(c)
	if q == nil || len(*q) == 0 {
		return false
	}
	ud := userdata.AppendString(nil, userdata.Type(nftnlUdataChainComment), comment)
	attr, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: nftaChainUserdata, Data: ud}})
	if err != nil {
		return false
	}
	m := &(*q)[len(*q)-1]
	m.Data = append(m.Data, attr...)
	return true
}

// nft 1.0.6 declares a concatenation without flags interval (a hash set) with neither
// NFT_SET_CONCAT nor a field-length description (NFTA_SET_DESC); google/nftables v0.3.0 sends
// both for every concatenated key. A set declared differently from nft's way is "File exists"
// to an operator's `nft -f` of our own listing, so plainConcat takes both off the NEWSET message
// AddSet has just queued.
const (
	nftaSetFlags = 3    // NFTA_SET_FLAGS
	nftaSetDesc  = 9    // NFTA_SET_DESC
	nftSetConcat = 0x80 // NFT_SET_CONCAT
	nlaTypeMask  = 0x3fff
)

// plainConcat rewrites the last queued message, which must be a NEWSET message, as nft sends a
// hash-set concatenation. It reports whether it could.
func plainConcat(c *nftables.Conn) bool {
	q := queuedMessages(c)
	if q == nil || len(*q) == 0 {
		return false
	}
	m := &(*q)[len(*q)-1]
	b := m.Data
	if len(b) < 4 {
		return false
	}
	out := append([]byte(nil), b[:4]...) // nfgenmsg header
	sawFlags := false
	for off := 4; off < len(b); {
		if off+4 > len(b) {
			return false
		}
		n := int(binary.NativeEndian.Uint16(b[off:]))
		typ := binary.NativeEndian.Uint16(b[off+2:]) & nlaTypeMask
		next := off + (n+3)&^3
		if n < 4 || off+n > len(b) || next > len(b) {
			return false
		}
		switch {
		case typ == nftaSetDesc:
		case typ == nftaSetFlags && n == 8:
			attr := append([]byte(nil), b[off:next]...)
			binary.BigEndian.PutUint32(attr[4:], binary.BigEndian.Uint32(attr[4:])&^nftSetConcat)
			out = append(out, attr...)
			sawFlags = true
		default:
			out = append(out, b[off:next]...)
		}
		off = next
	}
	if !sawFlags {
		return false
	}
	m.Data = out
	return true
}
