package fqdn

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// segment is an IPv4 (or IPv6) packet of a TCP segment from port 53 carrying data.
func segment(is6 bool, data []byte) []byte {
	tcp := make([]byte, 20, 20+len(data))
	binary.BigEndian.PutUint16(tcp, 53)
	tcp[12] = 5 << 4
	tcp = append(tcp, data...)
	if is6 {
		ip := make([]byte, 40)
		ip[0], ip[6] = 6<<4, unix.IPPROTO_TCP
		binary.BigEndian.PutUint16(ip[4:], uint16(len(tcp)))
		return append(ip, tcp...)
	}
	ip := make([]byte, 20)
	ip[0], ip[9] = 4<<4|5, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
	return append(ip, tcp...)
}

// TestTCPMessage: a segment's data is a message when it is one whole message behind its length;
// otherwise it is data not parsed; a segment without data has none.
func TestTCPMessage(t *testing.T) {
	msg := []byte("0123456789")
	framed := append(binary.BigEndian.AppendUint16(nil, uint16(len(msg))), msg...)
	for _, is6 := range []bool{false, true} {
		if got, whole := tcpMessage(segment(is6, framed)); !whole || !bytes.Equal(got, msg) {
			t.Errorf("IPv6 %v, a whole message: %q, %v", is6, got, whole)
		}
		if got, whole := tcpMessage(segment(is6, framed[:7])); whole || got == nil {
			t.Errorf("IPv6 %v, the start of a message: %q, %v; want data, not whole", is6, got, whole)
		}
		if got, whole := tcpMessage(segment(is6, append(framed, framed...))); whole || got == nil {
			t.Errorf("IPv6 %v, two messages: %q, %v; want data, not whole", is6, got, whole)
		}
		if got, whole := tcpMessage(segment(is6, nil)); whole || got != nil {
			t.Errorf("IPv6 %v, no data: %q, %v", is6, got, whole)
		}
	}
}
