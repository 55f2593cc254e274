package netns

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Sink is a UDP socket in a namespace that tells whether a datagram arrived: a one-way probe for
// traffic whose reply could not come back (a spoofed source address).
type Sink struct {
	conn *net.UDPConn
	got  chan []byte
}

// ListenSink opens a sink on addr (a free port) in the namespace; Close it when done.
func ListenSink(netnsName string, addr netip.Addr) (*Sink, error) {
	var conn *net.UDPConn
	err := Do(netnsName, func() error {
		var err error
		conn, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sink on %s in %s: %w", addr, netnsName, err)
	}
	s := &Sink{conn: conn, got: make(chan []byte, 64)}
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.got <- append([]byte(nil), buf[:n]...)
		}
	}()
	return s, nil
}

// Close closes the sink.
func (s *Sink) Close() error { return s.conn.Close() }

// Receives sends three datagrams from the namespace fromNetNS with source address src (which
// must be configured there) to dst at the sink's port, and reports whether one arrived within
// 400 ms.
func (s *Sink) Receives(fromNetNS string, src, dst netip.Addr) (bool, error) {
	token := make([]byte, 16)
	rand.Read(token)
	port := uint16(s.conn.LocalAddr().(*net.UDPAddr).Port)
	err := Do(fromNetNS, func() error {
		c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)),
			net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, port)))
		if err != nil {
			return err
		}
		defer c.Close()
		for range 3 {
			if _, err := c.Write(token); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("sending from %s as %s: %w", fromNetNS, src, err)
	}
	deadline := time.After(400 * time.Millisecond)
	for {
		select {
		case b := <-s.got:
			if bytes.Equal(b, token) {
				return true, nil
			}
		case <-deadline:
			return false, nil
		}
	}
}
