// Package nflog receives the packets the kernel logs to a netlink log (NFLOG) group — what an
// nftables `log group N` statement sends — in one network namespace, over netlink, and decodes
// their addresses, protocol and ports.
//
// Place in the data flow: beside the dataplane, on the agent's side. The dataplane's deny chains
// log (internal/nft, Config.DenyLog) and the agent reads them here, then names the pods and the
// policy (internal/agent). It imports nothing of the module.
//
// Protocol (NETLINK_NETFILTER, subsystem NFNL_SUBSYS_ULOG): one socket binds the group with a
// config message (NFULNL_CFG_CMD_BIND; the kernel refuses a group another socket holds, EPERM),
// asks for the packet's first CopyRange bytes (NFULNL_COPY_PACKET) and a queue threshold of one
// (each packet is sent at once instead of in batches of up to 100 a second apart). The kernel
// then sends every logged packet to that socket as an NFULNL_MSG_PACKET message whose
// NFULA_PREFIX is the log statement's prefix and NFULA_PAYLOAD the packet from its network
// header. When the socket's queue is full the kernel drops log messages (ENOBUFS on the next
// read): the reader counts that and goes on. A logged packet is never held back: logging is a
// copy, the packet's verdict does not wait for it.
package nflog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Netlink constants of NFLOG (linux/netfilter/nfnetlink_log.h), absent from x/sys/unix.
const (
	subsysULOG      = 4 // NFNL_SUBSYS_ULOG
	msgPacket       = 0 // NFULNL_MSG_PACKET
	msgConfig       = 1 // NFULNL_MSG_CONFIG
	attrCfgCmd      = 1 // NFULA_CFG_CMD
	attrCfgMode     = 2 // NFULA_CFG_MODE
	attrCfgQThresh  = 5 // NFULA_CFG_QTHRESH
	cmdBind         = 1 // NFULNL_CFG_CMD_BIND
	copyPacket      = 2 // NFULNL_COPY_PACKET
	attrPayload     = 9 // NFULA_PAYLOAD
	attrPrefix      = 10
	attrIfindexIn   = 4
	attrIfindexOut  = 5
	readBufferBytes = 4 << 20
)

// CopyRange is how many bytes of each packet Open has the kernel copy: an IPv6 header and the
// first bytes of the transport header hold the addresses, protocol and ports.
const CopyRange = 128

// Packet is one logged packet.
type Packet struct {
	// Prefix is the log statement's prefix.
	Prefix   string
	Src, Dst netip.Addr
	// Proto is the transport protocol (IPv6: the first next header).
	Proto uint8
	// Sport and Dport are set for TCP, UDP and SCTP.
	Sport, Dport uint16
	// InIfindex and OutIfindex are the input and output interfaces, 0 when none.
	InIfindex, OutIfindex uint32
}

// Reader receives the packets logged to one group. Open it, Run it once, Close it.
type Reader struct {
	conn  *netlink.Conn
	group uint16
	lost  atomic.Uint64
}

// Open binds NFLOG group in the network namespace netnsFD (< 0: the current one), each packet
// copied up to CopyRange bytes.
func Open(netnsFD int, group uint16) (*Reader, error) { return OpenRange(netnsFD, group, CopyRange) }

// OpenRange is Open with each packet copied up to copyRange bytes.
func OpenRange(netnsFD int, group uint16, copyRange uint32) (*Reader, error) {
	cfg := &netlink.Config{}
	if netnsFD >= 0 {
		cfg.NetNS = netnsFD
	}
	conn, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("nflog: opening a netlink socket: %w", err)
	}
	r := &Reader{conn: conn, group: group}
	if err := conn.SetReadBuffer(readBufferBytes); err != nil {
		conn.Close()
		return nil, fmt.Errorf("nflog: read buffer: %w", err)
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, copyRange)
	mode[4] = copyPacket
	for _, attrs := range [][]netlink.Attribute{
		{{Type: attrCfgCmd, Data: []byte{cmdBind}}},
		{{Type: attrCfgMode, Data: mode}, {Type: attrCfgQThresh, Data: binary.BigEndian.AppendUint32(nil, 1)}},
	} {
		if err := r.config(unix.AF_UNSPEC, attrs); err != nil {
			conn.Close()
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY) {
				return nil, fmt.Errorf("nflog: group %d is bound by another process: %w", group, err)
			}
			return nil, fmt.Errorf("nflog: binding group %d: %w", group, err)
		}
	}
	return r, nil
}

// config sends one acknowledged config message for the group.
func (r *Reader) config(family uint8, attrs []netlink.Attribute) error {
	data, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return err
	}
	hdr := []byte{family, unix.NFNETLINK_V0, byte(r.group >> 8), byte(r.group)}
	_, err = r.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(subsysULOG<<8 | msgConfig), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(hdr, data...),
	})
	return err
}

// Lost counts the log messages the kernel dropped because the socket's queue was full.
func (r *Reader) Lost() uint64 { return r.lost.Load() }

// Run calls handle for every logged packet, in the order the kernel sent them, until ctx ends
// (then it returns nil) or the socket fails.
func (r *Reader) Run(ctx context.Context, handle func(Packet)) error {
	return r.RunCopy(ctx, func(p Packet, _ Copy) { handle(p) })
}

// Copy is what the kernel copied of one packet, as far as the copy range reached (OpenRange). It
// shares the receive buffer: valid during the handler's call only.
type Copy struct {
	// Raw is the packet from its network header.
	Raw []byte
	// UDPPayload is what follows the UDP header of a UDP packet; nil for other protocols.
	UDPPayload []byte
}

// RunCopy is Run with what the kernel copied of each packet.
func (r *Reader) RunCopy(ctx context.Context, handle func(Packet, Copy)) error {
	stop := context.AfterFunc(ctx, func() { _ = r.conn.Close() })
	defer stop()
	for {
		msgs, err := r.conn.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, unix.ENOBUFS) {
			r.lost.Add(1) // at least one; the kernel does not say how many
			continue
		}
		if err != nil {
			return fmt.Errorf("nflog: reading group %d: %w", r.group, err)
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(subsysULOG<<8|msgPacket) || len(m.Data) < 4 {
				continue
			}
			if p, c, ok := decode(m.Data[4:]); ok {
				handle(p, c)
			}
		}
	}
}

// Close releases the socket (the kernel unbinds the group with it).
func (r *Reader) Close() error { return r.conn.Close() }

// decode reads a packet message's attributes and the packet's copy.
func decode(b []byte) (Packet, Copy, bool) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return Packet{}, Copy{}, false
	}
	var p Packet
	var payload []byte
	for ad.Next() {
		switch ad.Type() {
		case attrPrefix:
			p.Prefix = string(trimNUL(ad.Bytes()))
		case attrPayload:
			payload = ad.Bytes()
		case attrIfindexIn:
			p.InIfindex = binary.BigEndian.Uint32(ad.Bytes())
		case attrIfindexOut:
			p.OutIfindex = binary.BigEndian.Uint32(ad.Bytes())
		}
	}
	if ad.Err() != nil {
		return Packet{}, Copy{}, false
	}
	udp, ok := decodeIP(payload, &p)
	return p, Copy{Raw: payload, UDPPayload: udp}, ok
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}

// decodeIP reads addresses, protocol and ports from a packet starting at its network header,
// and returns a UDP packet's payload.
func decodeIP(b []byte, p *Packet) (udpPayload []byte, ok bool) {
	if len(b) < 1 {
		return nil, false
	}
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		ihl := int(b[0]&0x0f) * 4
		if len(b) < 20 || ihl < 20 {
			return nil, false
		}
		p.Proto = b[9]
		p.Src, p.Dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
		if ihl <= len(b) {
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return nil, false
		}
		p.Proto = b[6]
		p.Src, p.Dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
		l4 = b[40:]
	default:
		return nil, false
	}
	switch p.Proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP:
		if len(l4) >= 4 {
			p.Sport, p.Dport = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
		}
		if p.Proto == unix.IPPROTO_UDP && len(l4) >= 8 {
			udpPayload = l4[8:]
		}
	}
	return udpPayload, true
}
