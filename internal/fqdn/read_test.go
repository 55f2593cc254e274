package fqdn_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestReadElements: the addresses a SetWriter commits come back from the kernel with their
// timeout and the time they have left; a pattern whose sets the table lacks holds nothing.
func TestReadElements(t *testing.T) {
	ns := netns.NewBare(t, "fqdnread", netns.LoopbackDown)
	const pattern = "*.example.com"
	s4, s6 := fqdn.SetName(pattern, false), fqdn.SetName(pattern, true)
	netns.Nft(t, ns.Name, fmt.Sprintf("add table inet %[1]s\n"+
		"add set inet %[1]s %[2]s { type ipv4_addr; flags timeout; }\n"+
		"add set inet %[1]s %[3]s { type ipv6_addr; flags timeout; }\n", testTable, s4, s6), "-f", "-")
	w, err := fqdn.NewSetWriter(ns.FD, testTable)
	must(t, err)
	defer w.Close()
	must(t, w.Write([]fqdn.Change{
		{Pattern: pattern, Addr: netip.MustParseAddr("192.0.2.7"), Timeout: time.Minute},
		{Pattern: pattern, Addr: netip.MustParseAddr("192.0.2.1"), Timeout: 2 * time.Minute},
		{Pattern: pattern, Addr: netip.MustParseAddr("2001:db8::1"), Timeout: 30 * time.Second},
	}))
	got, err := fqdn.ReadElements(ns.FD, testTable, pattern)
	must(t, err)
	want := []struct {
		addr    string
		timeout time.Duration
	}{{"192.0.2.1", 2 * time.Minute}, {"192.0.2.7", time.Minute}, {"2001:db8::1", 30 * time.Second}}
	if len(got) != len(want) {
		t.Fatalf("ReadElements = %v, want %v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if g.Addr.String() != w.addr || g.Timeout != w.timeout || g.Expires <= w.timeout-10*time.Second || g.Expires > w.timeout {
			t.Errorf("element %d = %+v, want %s with timeout %s and nearly all of it left", i, g, w.addr, w.timeout)
		}
	}
	none, err := fqdn.ReadElements(ns.FD, testTable, "other.example.com")
	if err != nil || len(none) != 0 {
		t.Errorf("ReadElements of an undeclared pattern = %v, %v; want nothing", none, err)
	}
}
