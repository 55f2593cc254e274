package kernel_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// dialFrom connects from the namespace to dst over TCP or UDP from source port sport and
// reports whether the Serve server's answer arrives: for TCP a connection and its reply, for UDP
// the echo of a datagram.
func dialFrom(t *testing.T, netnsName string, proto model.Protocol, dst netip.AddrPort, sport uint16) bool {
	t.Helper()
	network := "tcp"
	if proto == model.ProtocolUDP {
		network = "udp"
	}
	local := netip.AddrPortFrom(netip.IPv4Unspecified(), sport)
	if dst.Addr().Is6() {
		local = netip.AddrPortFrom(netip.IPv6Unspecified(), sport)
	}
	ok := false
	err := netns.Do(netnsName, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(local), Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
			if err != nil {
				return err
			}
			return serr
		}}
		if network == "udp" {
			d.LocalAddr = net.UDPAddrFromAddrPort(local)
		}
		conn, err := d.DialContext(ctx, network, dst.String())
		if err != nil {
			return nil // refused or timed out: blocked
		}
		defer conn.Close()
		dl, _ := ctx.Deadline()
		conn.SetDeadline(dl)
		if network == "tcp" {
			buf := make([]byte, 64)
			n, _ := io.ReadAtLeast(conn, buf, 1)
			ok = n > 0
			return nil
		}
		token := []byte("nftpolicy-sport-probe")
		buf := make([]byte, 64)
		for ctx.Err() == nil && !ok {
			if _, err := conn.Write(token); err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if n, err := conn.Read(buf); err == nil && bytes.Equal(buf[:n], token) {
				ok = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestSourcePortTraffic enforces the source-port scenario on both nodes: TCP and UDP to x/a
// port 80 pass from source ports 5300-5399 only, IPv4 and IPv6, same node and across nodes;
// port 81 from an allowed source port and any port from another source port do not, and other
// pods take everything.
func TestSourcePortTraffic(t *testing.T) {
	tc := newTrafficCluster(t)
	sc := nfttest.Named("from-source-ports")
	tc.enforce(t, sc)
	byKey := nfttest.PodsByKey()
	sport := uint16(5300)
	for _, is6 := range []bool{false, true} {
		for _, proto := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP} {
			for _, c := range []struct {
				to   string
				port uint16
				from uint16 // source port: 0 takes the next allowed one
			}{{"x/a", 80, 0}, {"x/a", 81, 0}, {"x/a", 80, 5400}, {"x/a", 80, 5299}, {"y/a", 80, 5400}} {
				for from := range tc.pods {
					if from == c.to {
						continue
					}
					sp := c.from
					if sp == 0 { // a fresh allowed source port each time: no lingering connection
						sp, sport = sport, sport+1
					}
					dst := netip.AddrPortFrom(tc.pods[c.to].IP(is6), c.port)
					got := dialFrom(t, tc.pods[from].NetNS, proto, dst, sp)
					want := sc.Allowed(nfttest.Probe{From: byKey[from], To: byKey[c.to], Proto: proto, Port: c.port, SrcPort: sp, Is6: is6})
					if got != want {
						t.Errorf("%s → %s %s %d→%d: connected %v, want %v", from, dst, proto, sp, c.port, got, want)
					}
				}
			}
		}
	}
}
