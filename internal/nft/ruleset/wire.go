package ruleset

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A batch's bytes are written here, not by google/nftables v0.3.0's Flush. Its Flush holds every
// queued message until the end, then marshals each one again and appends the copies to one
// growing slice: the queued messages, their copies and the slice's growth, several times the
// batch's size, all live at the commit, the agent's peak. Here the google/nftables
// Conn that builds a batch (Conn.enc) is dialled onto capture instead of a socket, and the batch
// flushes it after every chunk of elements: each message is written once into wire's blocks and
// dropped. The blocks go to the kernel in one sendmsg (an iovec; the kernel ends a batch with its
// datagram), on the lasting socket of Conn.nft, which then reads the acks as v0.3.0's Flush
// does.

// wireBlock is the size of a wire's blocks once it has grown; the first are smaller, so that a
// small commit (one element) allocates little.
const (
	wireFirstBlock = 4 << 10
	wireBlock      = 1 << 20
)

// nfnlHeader is the nfgenmsg of a batch's begin and end messages: AF_UNSPEC, NFNETLINK_V0 and
// the subsystem (res_id, big endian).
var nfnlHeader = [4]byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, unix.NFNL_SUBSYS_NFTABLES}

// wire is one batch as written: netlink messages back to back in blocks, the first starting with
// room for the batch's begin message.
type wire struct {
	blocks [][]byte
	seq    uint32 // of the last message written
	acks   int    // messages that ask for an ack
	// marks say which object the messages from a sequence number on change, so that a message
	// the kernel refuses is reported by the object it belongs to (KernelError).
	marks []mark
}

// mark is the object of the messages from seq on.
type mark struct {
	seq uint32
	obj Object
}

// Object names what a message of a batch changes: the table, one of its chains or one of its
// sets (its elements included).
type Object struct {
	Kind string // "table", "chain" or "set"
	Name string
}

func (o Object) String() string {
	if o.Kind == "" {
		return "the batch"
	}
	return o.Kind + " " + o.Name
}

// KernelError is a message of a batch that the kernel refused, by the object it changed.
type KernelError struct {
	Object Object
	Errno  unix.Errno
}

func (e *KernelError) Error() string {
	return fmt.Sprintf("the kernel refused a change to %s: %v", e.Object, e.Errno)
}

func (e *KernelError) Unwrap() error { return e.Errno }

// mark records that the messages written next change o.
func (w *wire) mark(o Object) {
	if n := len(w.marks); n > 0 && w.marks[n-1].obj == o {
		return
	}
	w.marks = append(w.marks, mark{seq: w.seq + 1, obj: o})
}

// objectOf is the object of the message with sequence number seq (the zero Object for the
// batch's own begin and end).
func (w *wire) objectOf(seq uint32) Object {
	i, found := slices.BinarySearchFunc(w.marks, seq, func(m mark, seq uint32) int { return cmp.Compare(m.seq, seq) })
	if !found {
		i--
	}
	if i < 0 || seq == w.seq { // w.seq: the end message, written by frame
		return Object{}
	}
	return w.marks[i].obj
}

const nlmsgHeaderLen = 16

func newWire() *wire {
	w := &wire{blocks: [][]byte{make([]byte, nlmsgHeaderLen+len(nfnlHeader), wireFirstBlock)}}
	w.seq = 1 // the begin message's, written by frame
	return w
}

// add writes m at the end of the batch, with its own sequence number. The begin and end
// messages google/nftables frames each flush with are dropped: frame writes the batch's own.
func (w *wire) add(m netlink.Message) {
	if t := m.Header.Type; t == unix.NFNL_MSG_BATCH_BEGIN || t == unix.NFNL_MSG_BATCH_END {
		return
	}
	w.put(m.Header.Type, m.Header.Flags, m.Data)
	if m.Header.Flags&netlink.Acknowledge != 0 {
		w.acks++
	}
}

func (w *wire) put(typ netlink.HeaderType, flags netlink.HeaderFlags, data []byte) {
	n := nlmsgAlign(nlmsgHeaderLen + len(data))
	last := &w.blocks[len(w.blocks)-1]
	if cap(*last)-len(*last) < n {
		size := min(2*cap(*last), wireBlock)
		w.blocks = append(w.blocks, make([]byte, 0, max(size, n)))
		last = &w.blocks[len(w.blocks)-1]
	}
	w.seq++
	b := (*last)[len(*last) : len(*last)+n]
	putHeader(b, nlmsgHeaderLen+len(data), typ, flags, w.seq)
	copy(b[nlmsgHeaderLen:], data)
	clear(b[nlmsgHeaderLen+len(data):]) // padding
	*last = (*last)[:len(*last)+n]
}

// frame writes the begin message into the room kept for it and appends the end message.
func (w *wire) frame() {
	putHeader(w.blocks[0], nlmsgHeaderLen+len(nfnlHeader), unix.NFNL_MSG_BATCH_BEGIN, netlink.Request, 1)
	copy(w.blocks[0][nlmsgHeaderLen:], nfnlHeader[:])
	w.put(unix.NFNL_MSG_BATCH_END, netlink.Request, nfnlHeader[:])
}

// messages reports whether anything besides the frame was written.
func (w *wire) messages() bool { return w.seq > 1 }

// size is the number of bytes written.
func (w *wire) size() int {
	n := 0
	for _, b := range w.blocks {
		n += len(b)
	}
	return n
}

func putHeader(b []byte, length int, typ netlink.HeaderType, flags netlink.HeaderFlags, seq uint32) {
	binary.NativeEndian.PutUint32(b[0:4], uint32(length))
	binary.NativeEndian.PutUint16(b[4:6], uint16(typ))
	binary.NativeEndian.PutUint16(b[6:8], uint16(flags))
	binary.NativeEndian.PutUint32(b[8:12], seq)
	binary.NativeEndian.PutUint32(b[12:16], 0) // port id: the kernel answers the socket's
}

func nlmsgAlign(n int) int { return (n + 3) &^ 3 }

// capture is the encoder Conn's netlink peer: a flush's messages are written into the current
// batch's wire, and no reply ever comes (v0.3.0's Flush then reads no acks).
func (c *Conn) capture(req []netlink.Message) ([]netlink.Message, error) {
	if req == nil {
		return nil, io.EOF
	}
	w := c.wire()
	for _, m := range req {
		w.add(m)
	}
	return nil, nil
}

// wire returns the batch being built, starting one if none is.
func (c *Conn) wire() *wire {
	if c.out == nil {
		c.out = newWire()
	}
	return c.out
}

// send writes the batch to the kernel in one sendmsg and reads one ack or error per message that
// asked for one, as v0.3.0's Flush does (echoed rules and other replies are skipped). EPERM and
// ENOBUFS end the reading at once: the kernel reports them once.
func (c *Conn) send(w *wire) error {
	w.frame()
	raw, err := c.sock.SyscallConn()
	if err != nil {
		return fmt.Errorf("netlink socket: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		_, serr = unix.SendmsgBuffers(int(fd), w.blocks, nil, sa, 0)
		return serr != unix.EAGAIN && serr != unix.EINTR
	}); err != nil {
		return fmt.Errorf("sendmsg: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("sendmsg: %w", serr)
	}
	w.blocks = nil // the kernel has its copy
	if errs := c.readAcks(raw, w); errs != nil {
		return fmt.Errorf("conn.Receive: %w", errs)
	}
	return nil
}

// ackBuffer holds one ack datagram: an error echoes the message it refuses (an element chunk is
// at most chunkBytes and a little).
const ackBuffer = 256 << 10

// readAcks reads one ack or error per message of w that asked for one, on the socket itself
// (mdlayher/netlink's Receive turns an error into an error value without the sequence number it
// answers, which names the refused message). EPERM and ENOBUFS end the reading at once: the
// kernel reports them once. Every refused message is a KernelError naming its object.
func (c *Conn) readAcks(raw syscall.RawConn, w *wire) error {
	if c.acks == nil {
		c.acks = make([]byte, ackBuffer)
	}
	var errs error
	for left := w.acks; left > 0; {
		var n int
		var rerr error
		if err := raw.Read(func(fd uintptr) bool {
			n, _, _, _, rerr = unix.Recvmsg(int(fd), c.acks, nil, 0)
			return rerr != unix.EAGAIN && rerr != unix.EINTR
		}); err != nil {
			return errors.Join(errs, fmt.Errorf("netlink receive: %w", err))
		}
		if rerr != nil {
			if errors.Is(rerr, unix.EPERM) || errors.Is(rerr, unix.ENOBUFS) {
				return errors.Join(errs, fmt.Errorf("netlink receive: %w", rerr))
			}
			errs = errors.Join(errs, fmt.Errorf("netlink receive: %w", rerr))
			left--
			continue
		}
		for b := c.acks[:n]; len(b) >= nlmsgHeaderLen; {
			l := int(binary.NativeEndian.Uint32(b[0:4]))
			if l < nlmsgHeaderLen || l > len(b) {
				return errors.Join(errs, fmt.Errorf("netlink receive: malformed message of %d bytes", l))
			}
			if typ := binary.NativeEndian.Uint16(b[4:6]); typ == unix.NLMSG_ERROR && l >= nlmsgHeaderLen+4+nlmsgHeaderLen {
				left--
				data := b[nlmsgHeaderLen:l]
				if code := int32(binary.NativeEndian.Uint32(data[0:4])); code != 0 {
					seq := binary.NativeEndian.Uint32(data[4+8 : 4+12])
					errs = errors.Join(errs, &KernelError{Object: w.objectOf(seq), Errno: unix.Errno(-code)})
				}
			}
			b = b[min(nlmsgAlign(l), len(b)):]
		}
	}
	return errs
}

// Set elements are encoded here straight into a batch's wire, byte for byte as v0.3.0's
// SetAddElements and SetDeleteElements would (TestElementMessages compares them); those build
// every element as attribute values, marshal each level into a new slice and the message again
// (a few hundred bytes of garbage per element).

// elementMessage returns the payload of a NEWSETELEM or DELSETELEM message for els of set s in
// table, appended to dst[:0].
func elementMessage(dst []byte, table string, s *nftables.Set, els []nftables.SetElement) ([]byte, error) {
	b := append(dst[:0], unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0)
	b = appendAttrString(b, unix.NFTA_SET_ELEM_LIST_SET, s.Name)
	b = appendAttrU32(b, unix.NFTA_SET_ELEM_LIST_SET_ID, s.ID)
	b = appendAttrString(b, unix.NFTA_SET_ELEM_LIST_TABLE, table)
	list := beginNest(&b, unix.NFTA_SET_ELEM_LIST_ELEMENTS)
	for i, e := range els {
		if len(e.Val) > 0 {
			return dst, fmt.Errorf("set %s: element data values are not encoded", s.Name)
		}
		item := beginNest(&b, uint16(i+1))
		if e.IntervalEnd {
			b = appendAttrU32(b, unix.NFTA_SET_ELEM_FLAGS|unix.NLA_F_NESTED, unix.NFT_SET_ELEM_INTERVAL_END)
		}
		key := beginNest(&b, unix.NFTA_SET_ELEM_KEY)
		b = appendAttr(b, unix.NFTA_DATA_VALUE, e.Key)
		endNest(b, key)
		if e.Timeout > 0 { // a timeout set's element carried over by a Replace
			b = binary.NativeEndian.AppendUint16(b, 12)
			b = binary.NativeEndian.AppendUint16(b, unix.NFTA_SET_ELEM_TIMEOUT)
			b = binary.BigEndian.AppendUint64(b, uint64(e.Timeout.Milliseconds()))
		}
		if len(e.KeyEnd) > 0 {
			end := beginNest(&b, nftaSetElemKeyEnd)
			b = appendAttr(b, unix.NFTA_DATA_VALUE, e.KeyEnd)
			endNest(b, end)
		}
		if v := e.VerdictData; v != nil {
			data := beginNest(&b, unix.NFTA_SET_ELEM_DATA)
			verdict := beginNest(&b, unix.NFTA_DATA_VERDICT)
			b = appendAttrU32(b, unix.NFTA_VERDICT_CODE, uint32(v.Kind))
			if v.Chain != "" {
				b = appendAttrString(b, unix.NFTA_VERDICT_CHAIN, v.Chain)
			}
			endNest(b, verdict)
			endNest(b, data)
		}
		if e.Comment != "" {
			start := len(b)
			b = append(b, 0, 0, 0, 0)
			b = userdata.AppendString(b, userdata.NFTNL_UDATA_SET_ELEM_COMMENT, e.Comment)
			putAttrHeader(b[start:], len(b)-start, unix.NFTA_SET_ELEM_USERDATA)
			b = pad(b)
		}
		endNest(b, item)
	}
	if len(b)-list.start > 0xffff {
		return dst, fmt.Errorf("set %s: %d elements do not fit one message", s.Name, len(els))
	}
	endNest(b, list)
	return b, nil
}

const nftaSetElemKeyEnd = 10 // NFTA_SET_ELEM_KEY_END, which x/sys/unix lacks

func appendAttr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	return pad(append(b, data...))
}

// appendAttrU32 appends an attribute holding v in network byte order (no slice made for it: it
// runs for every element of a verdict map).
func appendAttrU32(b []byte, typ uint16, v uint32) []byte {
	b = binary.NativeEndian.AppendUint16(b, 8)
	b = binary.NativeEndian.AppendUint16(b, typ)
	return binary.BigEndian.AppendUint32(b, v)
}

func appendAttrString(b []byte, typ uint16, s string) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(s)+1))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, s...)
	return pad(append(b, 0))
}

// beginNest appends the header of a nested attribute typ and returns where it starts; endNest
// writes its length once its attributes follow it.
type nest struct {
	start int
	typ   uint16
}

func beginNest(b *[]byte, typ uint16) nest {
	n := nest{len(*b), typ | unix.NLA_F_NESTED}
	*b = append(*b, 0, 0, 0, 0)
	return n
}

func endNest(b []byte, n nest) { putAttrHeader(b[n.start:], len(b)-n.start, n.typ) }

func putAttrHeader(b []byte, length int, typ uint16) {
	binary.NativeEndian.PutUint16(b[0:2], uint16(length))
	binary.NativeEndian.PutUint16(b[2:4], typ)
}

func pad(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}
