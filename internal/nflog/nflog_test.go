package nflog

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// newNetns makes a network namespace with its loopback up and the nftables script loaded, and
// returns its name and an open handle; both go away with the test.
func newNetns(t *testing.T, script string) (string, int) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft")
	name := testenv.UniqueName("nflog")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	for _, args := range [][]string{{"ip", "link", "set", "lo", "up"}, {"nft", "-f", "-"}} {
		cmd := exec.Command("ip", append([]string{"netns", "exec", name}, args...)...)
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return name, int(f.Fd())
}

// TestReader: packets that nftables logs to the group arrive with their prefix, addresses,
// protocol and ports, IPv4 and IPv6; packets logged to another group do not.
func TestReader(t *testing.T) {
	ns, fd := newNetns(t, `table inet t {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr 127.0.0.1 udp dport 9 log prefix "udp4" group 5
		ip6 daddr ::1 tcp dport 81 log prefix "tcp6" group 5
		ip daddr 127.0.0.1 udp dport 10 log prefix "elsewhere" group 6
		meta l4proto 253 log group 5
	}
}
`)
	r, err := Open(fd, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(fd, 5); err == nil || !strings.Contains(err.Error(), "bound by another process") {
		t.Errorf("a second reader of the group: %v; want it refused", err)
	}
	got := make(chan Packet, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, func(p Packet) { got <- p }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	lo4, lo6 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")
	for _, tc := range []struct {
		name string
		send func() error
		want *Packet // nil: nothing logged to the group
	}{
		{"UDP over IPv4", func() error { return sendUDP("127.0.0.1:9", 4444) },
			&Packet{Prefix: "udp4", Src: lo4, Dst: lo4, Proto: 17, Sport: 4444, Dport: 9}},
		{"TCP over IPv6", func() error { return dialTCP("[::1]:81", 4445) },
			&Packet{Prefix: "tcp6", Src: lo6, Dst: lo6, Proto: 6, Sport: 4445, Dport: 81}},
		{"another group", func() error { return sendUDP("127.0.0.1:10", 4446) }, nil},
		{"another protocol, no prefix, no ports", func() error { return sendIP("ip4:253", "127.0.0.1") },
			&Packet{Src: lo4, Dst: lo4, Proto: 253}},
	} {
		if err := netns.Do(ns, tc.send); err != nil && tc.name != "TCP over IPv6" {
			t.Fatalf("%s: sending: %v", tc.name, err)
		}
		select {
		case p := <-got:
			p.InIfindex, p.OutIfindex = 0, 0
			if tc.want == nil || p != *tc.want {
				t.Errorf("%s: logged %+v, want %+v", tc.name, p, tc.want)
			}
		case <-time.After(2 * time.Second):
			if tc.want != nil {
				t.Errorf("%s: nothing logged within 2 s, want %+v", tc.name, *tc.want)
			}
		}
	}
}

func sendUDP(dst string, sport int) error {
	c, err := net.DialUDP("udp", &net.UDPAddr{Port: sport}, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst)))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("x"))
	return err
}

// dialTCP sends a SYN (nothing listens: the connection is refused).
func dialTCP(dst string, sport int) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{Port: sport}, Timeout: time.Second}
	c, err := d.Dial("tcp", dst)
	if err == nil {
		c.Close()
	}
	return err
}

// sendIP sends a bare IP packet of a protocol (network "ip4:N").
func sendIP(network, dst string) error {
	c, err := net.Dial(network, dst)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("x"))
	return err
}
