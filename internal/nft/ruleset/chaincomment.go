package ruleset

import (
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
	nftaChainUserdata = 12 // NFTA_CHAIN_USERDATA
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
	ud := userdata.AppendString(nil, userdata.TypeComment, comment) // NFTNL_UDATA_CHAIN_COMMENT is 0 too
	attr, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: nftaChainUserdata, Data: ud}})
	if err != nil {
		return false
	}
	m := &(*q)[len(*q)-1]
	m.Data = append(m.Data, attr...)
	return true
}
