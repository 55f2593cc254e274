package kernel_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"

	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// icmpConn is a raw ICMP (or ICMPv6) socket in a pod's namespace.
func icmpConn(t *testing.T, netnsName string, is6 bool) *icmp.PacketConn {
	t.Helper()
	c, err := netns.ICMPConn(netnsName, is6)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sendICMP sends one ICMP packet of type typ and code from conn to dst, carrying mark, and
// reports whether the raw socket recv in the destination's namespace sees it arrive.
func sendICMP(t *testing.T, conn, recv *icmp.PacketConn, dst netip.Addr, typ, code uint8, mark []byte) bool {
	t.Helper()
	var mt icmp.Type = ipv4.ICMPType(typ)
	if dst.Is6() {
		mt = ipv6.ICMPType(typ)
	}
	msg := icmp.Message{Type: mt, Code: int(code), Body: &icmp.Echo{ID: int(mark[len(mark)-1]), Seq: 1, Data: mark}}
	b, err := msg.Marshal(nil) // ICMPv6: the kernel fills the checksum of a raw socket's packets
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteTo(b, &net.IPAddr{IP: dst.AsSlice()}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	deadline := time.Now().Add(400 * time.Millisecond)
	for {
		if err := recv.SetReadDeadline(deadline); err != nil {
			t.Fatal(err)
		}
		n, _, err := recv.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(buf[:n], mark) {
			return true
		}
	}
}

// TestICMPTraffic enforces the ICMP scenario on both nodes and sends, between every pair of
// pods and in both families, echo requests of codes 0 (what ping sends) and 1 and a request of
// another type that conntrack takes as new (timestamp, ICMPv6 node information query): x/a takes
// echo requests only, y's pods take everything but echo requests of code 0. Each packet counts
// as delivered when the destination's raw socket sees it.
func TestICMPTraffic(t *testing.T) {
	tc := newTrafficCluster(t)
	sc := nfttest.Named("icmp-echo-only-and-code-deny")
	tc.enforce(t, sc)
	byKey := nfttest.PodsByKey()
	seq := byte(0)
	for _, is6 := range []bool{false, true} {
		proto, echo := nfttest.Echo(is6)
		other := uint8(13)
		if is6 {
			other = 139
		}
		conns := map[string]*icmp.PacketConn{}
		for key, p := range tc.pods {
			conns[key] = icmpConn(t, p.NetNS, is6)
		}
		for _, ic := range []struct{ typ, code uint8 }{{echo, 0}, {echo, 1}, {other, 0}} {
			for from := range tc.pods {
				for to, pod := range tc.pods {
					if from == to {
						continue
					}
					seq++
					mark := []byte(fmt.Sprintf("nftpolicy-icmp-%s-%s-%d", from, to, seq))
					got := sendICMP(t, conns[from], conns[to], pod.IP(is6), ic.typ, ic.code, append(mark, seq))
					want := sc.Allowed(nfttest.Probe{From: byKey[from], To: byKey[to], Proto: proto, ICMPType: ic.typ, ICMPCode: ic.code, Is6: is6})
					if got != want {
						t.Errorf("%s → %s %s type %d code %d: delivered %v, want %v", from, to, proto, ic.typ, ic.code, got, want)
					}
				}
			}
		}
	}
	// TCP and UDP as the scenario's truth table says: x/a takes none
	tc.check(t, sc)
}
