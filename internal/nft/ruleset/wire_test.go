package ruleset

import (
	"bytes"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
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

// TestElementMessages: the element messages written straight into a batch are byte for byte
// those of google/nftables v0.3.0's SetAddElements and SetDeleteElements, for every key shape,
// maps with verdicts and comments, interval sets (with their end elements) and enough elements
// for several hundred bytes of payload.
func TestElementMessages(t *testing.T) {
	pfx := func(s string) ElementKey {
		p := netip.MustParsePrefix(s)
		return ElementKey{Addr: p.Addr(), AddrEnd: lastAddr(p)}
	}
	v4s := []ElementKey{addrKey("10.0.0.1"), addrKey("10.0.0.2"), addrKey("192.168.255.254")}
	for _, tc := range []struct {
		set  Set
		keys []ElementKey
		val  Value
	}{
		{Set{Name: "sel_a", Key: KeyIPSaddr}, v4s, Value{}},
		{Set{Name: "sel_b", Key: KeyIP6Daddr}, []ElementKey{addrKey("fd00::1"), addrKey("fd00::2")}, Value{}},
		{Set{Name: "peers", Key: KeyIPSaddr, Map: true}, v4s, Value{Verdict: goTo("grp-1"), Comment: "ns/pod-1"}},
		{Set{Name: "acc", Key: KeyIPDaddr, Map: true}, v4s, Value{Verdict: Verdict{Kind: Accept}}},
		{Set{Name: "nets", Key: KeyIPSaddr, Interval: true}, []ElementKey{pfx("10.1.0.0/16"), pfx("10.2.3.0/24"), addrKey("10.9.9.9")}, Value{Comment: "ipBlock"}},
		{Set{Name: "nets6", Key: KeyIP6Saddr, Interval: true, Map: true}, []ElementKey{pfx("fd00:1::/64")}, Value{Verdict: Verdict{Kind: Drop}}},
		{Set{Name: "protos", Key: KeyL4Proto}, []ElementKey{{Proto: 6}, {Proto: 17}, {Proto: 132}}, Value{}},
		{Set{Name: "ports", Key: KeyL4ProtoDport, Interval: true}, []ElementKey{{Proto: 6, Port: 80, PortEnd: 80}, {Proto: 17, Port: 1000, PortEnd: 2000}}, Value{}},
		{Set{Name: "ports_m", Key: KeyL4ProtoDport, Map: true}, []ElementKey{{Proto: 6, Port: 8080, PortEnd: 8080}}, Value{Verdict: Verdict{Kind: Jump, Chain: "x"}}},
		{Set{Name: "ifs", Key: KeyIifname, Map: true}, []ElementKey{{Ifname: "veth1"}, {Ifname: "nftp-abcdefgh1"}}, Value{Verdict: goTo("pod-in"), Comment: "c"}},
		{Set{Name: "spoof", Key: KeyIifnameIP6Saddr}, []ElementKey{{Ifname: "veth1", Addr: ip("fd00::7"), AddrEnd: ip("fd00::7")}}, Value{}},
		{Set{Name: "np", Key: KeyIPDaddrL4ProtoDport}, []ElementKey{{Addr: ip("10.0.0.3"), AddrEnd: ip("10.0.0.3"), Proto: 6, Port: 443, PortEnd: 443}}, Value{Comment: "named port https"}},
	} {
		s := tc.set
		ns, err := nfSet(nfTable("t"), &s)
		if err != nil {
			t.Fatal(err)
		}
		ns.ID = 7
		var els []nftables.SetElement
		for _, k := range tc.keys {
			if els, err = encodeElements(&s, Element{k, tc.val}, els, nil); err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
		}
		for _, del := range []bool{false, true} {
			var want []netlink.Message
			nc, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
				want = append(want, req...)
				return nil, nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			if del {
				err = nc.SetDeleteElements(ns, els)
			} else {
				err = nc.SetAddElements(ns, els)
			}
			if err == nil {
				err = nc.Flush()
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := elementMessage([]byte("stale bytes"), "t", ns, els)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != 3 { // begin, the elements, end
				t.Fatalf("google/nftables sent %d messages", len(want))
			}
			if !bytes.Equal(got, want[1].Data) {
				t.Errorf("set %s (delete %v):\n got %x\nwant %x", s.Name, del, got, want[1].Data)
			}
		}
	}
}
