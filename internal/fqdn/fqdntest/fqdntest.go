// Package fqdntest is the DNS server and client the tests of fqdn and agent share: a Zone
// answered on UDP (Serve) or TCP (ServeTCP) port 53 of addresses in a test network namespace,
// and Lookup (LookupTCP) from another.
package fqdntest

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// Zone is a test DNS server's data: for each name (canonical: lower case, no trailing dot) its
// CNAME target or its addresses, every record with TTL seconds.
type Zone struct {
	TTL   uint32
	CNAME map[string]string
	Addrs map[string][]netip.Addr
	// Flood, when not 0: a name starting with "flood" gets Flood addresses of 198.18.0.0/15,
	// new ones in each answer (up to 256 answers).
	Flood int
	// floods counts the flood answers.
	floods atomic.Uint32
}

// Respond answers one query from z, following CNAMEs (at most 8); a name z does not hold gets
// an answer without records.
func (z *Zone) Respond(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true})
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	name := q.Name
	for range 8 {
		target, ok := z.CNAME[fqdn.Canonical(name.String())]
		if !ok {
			break
		}
		next := dnsmessage.MustNewName(target + ".")
		if err := b.CNAMEResource(dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: z.TTL}, dnsmessage.CNAMEResource{CNAME: next}); err != nil {
			return nil, err
		}
		name = next
	}
	addrs := z.Addrs[fqdn.Canonical(name.String())]
	if z.Flood > 0 && strings.HasPrefix(name.String(), "flood") {
		n := byte(z.floods.Add(1))
		for i := range z.Flood {
			addrs = append(addrs, netip.AddrFrom4([4]byte{198, 18, n, byte(i)}))
		}
	}
	for _, a := range addrs {
		rh := dnsmessage.ResourceHeader{Name: name, Class: dnsmessage.ClassINET, TTL: z.TTL}
		switch {
		case a.Is4() && q.Type == dnsmessage.TypeA:
			err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
		case a.Is6() && q.Type == dnsmessage.TypeAAAA:
			err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// Serve answers queries from z on UDP port 53 of addrs in the namespace until the test ends.
func Serve(t testing.TB, netnsName string, z *Zone, addrs ...netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		var pc net.PacketConn
		err := netns.Do(netnsName, func() (err error) {
			pc, err = net.ListenPacket("udp", netip.AddrPortFrom(a, 53).String())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pc.Close() })
		go func() {
			buf := make([]byte, 1500)
			for {
				n, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				if resp, err := z.Respond(buf[:n]); err == nil {
					pc.WriteTo(resp, from)
				}
			}
		}()
	}
}

// ServeTCP answers queries from z over TCP on port 53 of addrs in the namespace (each message
// behind its 2-byte length, RFC 1035 §4.2.2; an answer in one write, so one segment) until the
// test ends.
func ServeTCP(t testing.TB, netnsName string, z *Zone, addrs ...netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		var l net.Listener
		err := netns.Do(netnsName, func() (err error) {
			l, err = net.Listen("tcp", netip.AddrPortFrom(a, 53).String())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer conn.Close()
					conn.SetDeadline(time.Now().Add(5 * time.Second))
					for {
						query, err := readTCPMessage(conn)
						if err != nil {
							return
						}
						resp, err := z.Respond(query)
						if err != nil {
							return
						}
						if _, err := conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(resp))), resp...)); err != nil {
							return
						}
					}
				}()
			}
		}()
	}
}

// readTCPMessage reads one length-prefixed DNS message.
func readTCPMessage(r io.Reader) ([]byte, error) {
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint16(n[:]))
	_, err := io.ReadFull(r, msg)
	return msg, err
}

// exchangeTCP sends query to server's TCP port 53 from the namespace and returns the answer.
func exchangeTCP(netnsName string, server netip.Addr, query []byte, timeout time.Duration) ([]byte, error) {
	var conn net.Conn
	err := netns.Do(netnsName, func() (err error) {
		conn, err = net.DialTimeout("tcp", netip.AddrPortFrom(server, 53).String(), timeout)
		return err
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(query))), query...)); err != nil {
		return nil, err
	}
	return readTCPMessage(conn)
}

// Lookup asks server for name's addresses of the family from the namespace and returns them as
// the answer arrives.
func Lookup(t testing.TB, netnsName string, server netip.Addr, name string, is6 bool) []netip.Addr {
	t.Helper()
	return lookup(t, name, is6, func(query []byte) ([]byte, error) {
		return netns.ExchangeUDP(netnsName, netip.AddrPortFrom(server, 53), query, 3*time.Second)
	})
}

// LookupTCP is Lookup over TCP.
func LookupTCP(t testing.TB, netnsName string, server netip.Addr, name string, is6 bool) []netip.Addr {
	t.Helper()
	return lookup(t, name, is6, func(query []byte) ([]byte, error) { return exchangeTCP(netnsName, server, query, 3*time.Second) })
}

// lookup asks for name's addresses of the family through exchange.
func lookup(t testing.TB, name string, is6 bool, exchange func(query []byte) ([]byte, error)) []netip.Addr {
	t.Helper()
	qtype := dnsmessage.TypeA
	if is6 {
		qtype = dnsmessage.TypeAAAA
	}
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: uint16(rand.Uint32()), RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		t.Fatal(err)
	}
	if err := b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(strings.TrimSuffix(name, ".") + "."), Type: qtype, Class: dnsmessage.ClassINET}); err != nil {
		t.Fatal(err)
	}
	query, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := exchange(query)
	if err != nil {
		t.Fatalf("looking up %s: %v", name, err)
	}
	a, err := fqdn.ParseAnswer(resp)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []netip.Addr
	for _, r := range a.Records {
		addrs = append(addrs, r.Addr)
	}
	return addrs
}
