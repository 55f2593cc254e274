package ruleset

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// google/nftables v0.3.0 reads set elements back without their verdicts (its element decoder
// knows NFTA_DATA_VALUE only) — so Verify dumps elements itself, on a second netlink socket of
// its own, and compares key, verdict and comment of every element.

// dumpBuffer is the fixed receive buffer of the dump socket: larger than any dump datagram (the
// kernel caps those at 32 KiB), and offered to every recvmsg, so the kernel fills datagrams fully.
const dumpBuffer = 64 << 10

// dialDumpSocket opens a socket for element dumps (dumpElements) in the network namespace
// netnsFD (< 0: the current one), which offers dumpBuffer to every recvmsg.
func dialDumpSocket(netnsFD int) (*netlink.Conn, error) {
	cfg := &netlink.Config{MessageBufferSize: dumpBuffer}
	if netnsFD >= 0 {
		cfg.NetNS = netnsFD
	}
	nl, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening netlink dump socket: %w", err)
	}
	if err := nl.SetReadBuffer(readBuffer); err != nil {
		nl.Close()
		return nil, fmt.Errorf("netlink dump read buffer: %w", err)
	}
	return nl, nil
}

func (c *Conn) dialDump() error {
	nl, err := dialDumpSocket(c.netnsFD)
	if err != nil {
		return err
	}
	if c.dump != nil {
		_ = c.dump.Close()
	}
	c.dump = nl
	return nil
}

// readElements dumps the elements of set name in table as comparable strings (see elementString).
func (c *Conn) readElements(table, name string) ([]string, error) {
	var out []string
	err := dumpElements(c.dump, table, name, func(el *netlink.AttributeDecoder) {
		if s, ok := decodeElement(el); ok {
			out = append(out, s)
		}
	})
	if err != nil {
		if derr := c.dialDump(); derr != nil { // never reuse a socket a dump failed on
			err = fmt.Errorf("%w (and reopening: %v)", err, derr)
		}
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// dumpElements dumps the elements of set name in table on nl and calls each with every element's
// attributes.
func dumpElements(nl *netlink.Conn, table, name string, each func(*netlink.AttributeDecoder)) error {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{
		{Type: unix.NFTA_SET_ELEM_LIST_TABLE, Data: []byte(table + "\x00")},
		{Type: unix.NFTA_SET_ELEM_LIST_SET, Data: []byte(name + "\x00")},
	})
	if err != nil {
		return err
	}
	req := netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETSETELEM),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
	}
	msgs, err := nl.Execute(req)
	if err != nil {
		return fmt.Errorf("dumping elements of set %s: %w", name, err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return err
		}
		for ad.Next() {
			if ad.Type() != unix.NFTA_SET_ELEM_LIST_ELEMENTS {
				continue
			}
			ad.Nested(func(list *netlink.AttributeDecoder) error {
				for list.Next() {
					list.Nested(func(el *netlink.AttributeDecoder) error {
						each(el)
						return nil
					})
				}
				return nil
			})
		}
		if err := ad.Err(); err != nil {
			return fmt.Errorf("decoding elements of set %s: %w", name, err)
		}
	}
	return nil
}

// readElem is an element as read back.
type readElem struct {
	key, keyEnd []byte
	end         bool
	code        int32
	chain       string
	hasVerdict  bool
	comment     string
}

func decodeElement(ad *netlink.AttributeDecoder) (string, bool) {
	var e readElem
	dataValue := func(b []byte) []byte {
		d, err := netlink.NewAttributeDecoder(b)
		if err != nil {
			return nil
		}
		var v []byte
		for d.Next() {
			if d.Type() == unix.NFTA_DATA_VALUE {
				v = d.Bytes()
			}
		}
		return v
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_ELEM_KEY:
			e.key = dataValue(ad.Bytes())
		case nftables.NFTA_SET_ELEM_KEY_END:
			e.keyEnd = dataValue(ad.Bytes())
		case unix.NFTA_SET_ELEM_FLAGS:
			e.end = binary.BigEndian.Uint32(ad.Bytes())&unix.NFT_SET_ELEM_INTERVAL_END != 0
		case unix.NFTA_SET_ELEM_USERDATA:
			e.comment, _ = userdata.GetString(ad.Bytes(), userdata.NFTNL_UDATA_SET_ELEM_COMMENT)
		case unix.NFTA_SET_ELEM_DATA:
			e.code, e.chain, e.hasVerdict = elementVerdict(ad.Bytes())
		}
	}
	if e.end && len(bytes.Trim(e.key, "\x00")) == 0 {
		return "", false // nft's all-zero end sentinel
	}
	return e.String(), true
}

// elementVerdict reads the verdict of an element's NFTA_SET_ELEM_DATA, if it holds one.
func elementVerdict(b []byte) (code int32, chain string, ok bool) {
	d, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return 0, "", false
	}
	for d.Next() {
		if d.Type() != unix.NFTA_DATA_VERDICT {
			continue
		}
		ok = true
		v, err := netlink.NewAttributeDecoder(d.Bytes())
		if err != nil {
			continue
		}
		for v.Next() {
			switch v.Type() {
			case unix.NFTA_VERDICT_CODE:
				code = int32(binary.BigEndian.Uint32(v.Bytes()))
			case unix.NFTA_VERDICT_CHAIN:
				chain = string(bytes.TrimRight(v.Bytes(), "\x00"))
			}
		}
	}
	return code, chain, ok
}

// String is the comparable form of an element: key, key end, end flag, verdict, comment.
func (e readElem) String() string {
	s := fmt.Sprintf("%x-%x", e.key, e.keyEnd)
	if e.end {
		s += "/end"
	}
	if e.hasVerdict {
		s += fmt.Sprintf(" : %d %s", e.code, e.chain)
	}
	if e.comment != "" {
		s += fmt.Sprintf(" comment %q", e.comment)
	}
	return s
}

// expectedElements returns what readElements should return for s as last committed.
func expectedElements(s *Set) ([]string, error) {
	var all []nftables.SetElement
	var err error
	for k, v := range s.committedElements() {
		if all, err = encodeElements(s, Element{k, v}, all, nil); err != nil {
			return nil, err
		}
	}
	out := make([]string, 0, len(all))
	for _, e := range all {
		r := readElem{key: e.Key, keyEnd: e.KeyEnd, end: e.IntervalEnd, comment: e.Comment}
		if e.VerdictData != nil {
			r.hasVerdict, r.code, r.chain = true, int32(e.VerdictData.Kind), e.VerdictData.Chain
		}
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out, nil
}

// timedElements reads, from the kernel's table of desired's name, the elements of each timeout
// set that desired declares too, each with the time it has left (its timeout): what a Replace
// carries into the new table, so that replacing the table does not forget what another owner
// (the agent's DNS observer) wrote. A set the kernel lacks has none; an element about to expire
// is left to expire.
func (c *Conn) timedElements(desired *Table) (map[string][]nftables.SetElement, error) {
	var out map[string][]nftables.SetElement
	for name, s := range desired.Sets {
		if !s.Timeout {
			continue
		}
		var els []nftables.SetElement
		err := dumpElements(c.dump, desired.Name, name, func(ad *netlink.AttributeDecoder) {
			var e nftables.SetElement
			for ad.Next() {
				switch ad.Type() {
				case unix.NFTA_SET_ELEM_KEY:
					if d, err := netlink.NewAttributeDecoder(ad.Bytes()); err == nil {
						for d.Next() {
							if d.Type() == unix.NFTA_DATA_VALUE {
								e.Key = d.Bytes()
							}
						}
					}
				case unix.NFTA_SET_ELEM_EXPIRATION:
					e.Timeout = time.Duration(binary.BigEndian.Uint64(ad.Bytes())) * time.Millisecond
				}
			}
			if len(e.Key) > 0 && e.Timeout >= time.Millisecond {
				els = append(els, e)
			}
		})
		switch {
		case errors.Is(err, unix.ENOENT):
			continue // no such table or set yet
		case err != nil:
			if derr := c.dialDump(); derr != nil { // never reuse a socket a dump failed on
				err = fmt.Errorf("%w (and reopening: %v)", err, derr)
			}
			return nil, fmt.Errorf("reading the elements of timeout set %s: %w", name, err)
		}
		if len(els) > 0 {
			if out == nil {
				out = map[string][]nftables.SetElement{}
			}
			out[name] = els
		}
	}
	return out, nil
}

// timed queues adds of a timeout set's carried elements, with their timeouts, in chunks.
func (b *batch) timed(s *Set, els []nftables.SetElement) error {
	if len(els) == 0 {
		return nil
	}
	if err := b.object("set", s.Name); err != nil {
		return err
	}
	ns, err := b.nfSet(s)
	if err != nil {
		return err
	}
	for chunk := range slices.Chunk(els, chunkElements) {
		if b.scratch, err = elementMessage(b.scratch, b.table.Name, ns, chunk); err != nil {
			return err
		}
		if err := b.put(unix.NFT_MSG_NEWSETELEM, b.scratch); err != nil {
			return err
		}
	}
	return nil
}
