package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestSCTPProbe proves the raw SCTP prober on two namespaces joined by a veth: every INIT
// arrives with no ruleset; with an nftables rule dropping SCTP to port 80 in the receiver
// (next to one dropping TCP to 81), exactly the SCTP/80 cell toward it is blocked, on IPv4 and
// IPv6, and conntrack took the packets as valid SCTP (the rule sits after a ct state invalid
// drop).
func TestSCTPProbe(t *testing.T) {
	testenv.RequireCommand(t, "ip", "nft")
	na, nb := netns.NewBare(t, "sa", netns.LoopbackUp), netns.NewBare(t, "sb", netns.LoopbackUp)
	a, b := na.Name, nb.Name
	va, vb := testenv.UniqueName("va"), testenv.UniqueName("vb")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("ip", "link", "add", va, "netns", a, "type", "veth", "peer", "name", vb, "netns", b)
	addrs := map[string][2]string{a: {"10.250.0.1/24", "fd00:250::1/64"}, b: {"10.250.0.2/24", "fd00:250::2/64"}}
	for ns, dev := range map[string]string{a: va, b: vb} {
		run("ip", "-n", ns, "addr", "add", addrs[ns][0], "dev", dev)
		run("ip", "-n", ns, "addr", "add", addrs[ns][1], "dev", dev, "nodad")
		run("ip", "-n", ns, "link", "set", dev, "up")
	}
	fds := map[string]int{a: na.FD, b: nb.FD}
	ends := func(is6 bool) []sctpEnd {
		var out []sctpEnd
		for _, ns := range []string{a, b} {
			ip := netip.MustParsePrefix(addrs[ns][0]).Addr()
			if is6 {
				ip = netip.MustParsePrefix(addrs[ns][1]).Addr()
			}
			out = append(out, sctpEnd{Key: ns, NetNS: fds[ns], IP: ip})
		}
		return out
	}
	ctx := context.Background()
	matrix := func(is6 bool, port uint16) string {
		t.Helper()
		m, err := probeSCTPMatrix(ctx, ends(is6), port, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("a->b %v, b->a %v", m[[2]string{a, b}], m[[2]string{b, a}])
	}
	// A new veth passes nothing until the kernel has brought it up: wait for the first INIT.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if matrix(false, 80) == "a->b true, b->a true" && matrix(true, 80) == "a->b true, b->a true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with no ruleset, INITs do not arrive: IPv4 %s; IPv6 %s", matrix(false, 80), matrix(true, 80))
		}
		time.Sleep(100 * time.Millisecond)
	}
	netns.Nft(t, b, `table inet probe {
	chain in {
		type filter hook input priority 0; policy accept;
		ct state invalid drop
		tcp dport 81 drop
		sctp dport 80 drop
	}
}
`, "-f", "-")
	for _, tc := range []struct {
		is6  bool
		port uint16
		want string
	}{
		{false, 80, "a->b false, b->a true"},
		{false, 81, "a->b true, b->a true"},
		{true, 80, "a->b false, b->a true"},
		{true, 81, "a->b true, b->a true"},
	} {
		if got := matrix(tc.is6, tc.port); got != tc.want {
			t.Errorf("IPv6=%v SCTP/%d: %s, want %s", tc.is6, tc.port, got, tc.want)
		}
	}
}
