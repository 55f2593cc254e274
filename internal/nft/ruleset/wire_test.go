package ruleset

import (
	"bytes"
	"slices"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// TestWire: a batch written into a wire's blocks reads back as the begin message, the messages
// given (without the begin and end messages each flush frames them with) in order with their
// types, flags and data, and the end message; payloads of every length are padded, and a message
// larger than a block gets a block of its own.
func TestWire(t *testing.T) {
	begin := netlink.Message{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_BEGIN, Flags: netlink.Request}, Data: nfnlHeader[:]}
	end := netlink.Message{Header: netlink.Header{Type: unix.NFNL_MSG_BATCH_END, Flags: netlink.Request}, Data: nfnlHeader[:]}
	var in []netlink.Message
	for i, size := range []int{0, 1, 2, 3, 4, 5, 4000, 100, wireBlock + 7, 33, 3 * wireBlock / 4, 3 * wireBlock / 4, 9} {
		flags := netlink.Request | netlink.Acknowledge
		if i%3 == 0 {
			flags = netlink.Request
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(i + j)
		}
		in = append(in, netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | i)}, Data: data})
		in[i].Header.Flags = flags
	}
	w := newWire()
	// as two flushes of the encoder deliver them
	for _, part := range [][]netlink.Message{in[:5], in[5:]} {
		for _, m := range append(append([]netlink.Message{begin}, part...), end) {
			w.add(m)
		}
	}
	if !w.messages() {
		t.Fatal("messages() = false after adds")
	}
	w.frame()
	if len(w.blocks) < 4 {
		t.Errorf("%d blocks; want the payloads spread over at least 4", len(w.blocks))
	}
	var got []netlink.Message
	buf := bytes.Join(w.blocks, nil)
	for len(buf) > 0 {
		var m netlink.Message
		if err := m.UnmarshalBinary(buf); err != nil {
			t.Fatalf("message %d: %v", len(got), err)
		}
		if int(m.Header.Length) != nlmsgHeaderLen+len(m.Data) {
			t.Errorf("message %d: length %d for %d bytes of data", len(got), m.Header.Length, len(m.Data))
		}
		got = append(got, m)
		buf = buf[nlmsgAlign(int(m.Header.Length)):]
	}
	want := append(append([]netlink.Message{begin}, in...), end)
	if len(got) != len(want) {
		t.Fatalf("read back %d messages, want %d", len(got), len(want))
	}
	acks := 0
	for i, m := range got {
		if m.Header.Type != want[i].Header.Type || m.Header.Flags != want[i].Header.Flags || !bytes.Equal(m.Data, want[i].Data) {
			t.Errorf("message %d: type %#x flags %v, %d bytes; want type %#x flags %v, %d bytes", i,
				m.Header.Type, m.Header.Flags, len(m.Data), want[i].Header.Type, want[i].Header.Flags, len(want[i].Data))
		}
		if m.Header.Sequence != uint32(i+1) {
			t.Errorf("message %d: sequence %d, want %d", i, m.Header.Sequence, i+1)
		}
		if m.Header.Flags&netlink.Acknowledge != 0 {
			acks++
		}
	}
	if w.acks != acks {
		t.Errorf("acks = %d, want %d", w.acks, acks)
	}
	if !slices.Equal(got[0].Data, nfnlHeader[:]) {
		t.Errorf("begin message data %v", got[0].Data)
	}
	if newWire().messages() {
		t.Error("an empty wire reports messages")
	}
}
