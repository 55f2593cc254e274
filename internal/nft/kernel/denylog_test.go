package kernel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nflog"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestDenyLog: with DenyLog, a denied connection into node a's pods is logged to the NFLOG
// group with its addresses and port, and the log's prefix names a deny chain whose reason and
// origin DenyChain gives; an allowed one is not logged.
func TestDenyLog(t *testing.T) {
	tc := newTrafficCluster(t)
	nodeA := tc.c.Node("a")
	fd := nodeFD(t, nodeA)
	const group = 9
	logged := readNFLOG(t, fd, group)

	byName := map[string]nfttest.Scenario{}
	for _, sc := range nfttest.Scenarios {
		byName[sc.Name] = sc
	}
	for _, c := range []struct {
		scenario, from, to string
		proto              model.Protocol
		port               uint16
		is6                bool
		reason, origin     string // "": not logged (allowed)
	}{
		{"tiers-admin-deny-and-pass", "y/b", "x/a", model.ProtocolTCP, 80, false,
			"ClusterNetworkPolicy/admin-deny-y-to-x ingress rule 1 (deny)", "rule [admin] ClusterNetworkPolicy/admin-deny-y-to-x #1 deny"},
		{"tiers-admin-deny-and-pass", "y/a", "x/a", model.ProtocolTCP, 80, true, "", ""},
		{"default-deny-ingress-x", "x/b", "x/a", model.ProtocolUDP, 80, true,
			"tier default default deny: no rule of NetworkPolicy/x/deny-all matched", "tier default [default] deny []"},
	} {
		name := c.scenario + " " + c.from + "→" + c.to
		dp, err := kernel.Open(fd, nft.Config{
			DenyLog: &nft.DenyLog{Group: group, Limit: ruleset.Limit{Rate: 100, Unit: ruleset.PerSecond}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := dp.Apply(nfttest.MessagesFor("a", tc.addrs, byName[c.scenario])); err != nil {
			t.Fatal(err)
		}
		from, to := tc.pods[c.from], tc.pods[c.to]
		ok, err := netns.Probe(context.Background(), from.NetNS, to.IP(c.is6), netnsProto(c.proto), c.port, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (c.reason == "") {
			t.Errorf("%s: connected %v, want %v", name, ok, c.reason == "")
		}
		var got *nflog.Packet
		select {
		case p := <-logged:
			got = &p
		case <-time.After(500 * time.Millisecond):
		}
		for len(logged) > 0 { // retransmissions of the same probe
			<-logged
		}
		switch {
		case c.reason == "" && got != nil:
			t.Errorf("%s: allowed, yet logged %+v", name, *got)
		case c.reason != "" && got == nil:
			t.Errorf("%s: denied, nothing logged", name)
		case got != nil:
			if got.Src != from.IP(c.is6) || got.Dst != to.IP(c.is6) || got.Proto != uint8(c.proto) || got.Dport != c.port {
				t.Errorf("%s: logged %+v", name, *got)
			}
			info, ok := dp.DenyChain(got.Prefix)
			if !ok || info.Reason != c.reason || nfttest.DescribeOrigin(info.Origin) != c.origin {
				t.Errorf("%s: prefix %q is chain %v: reason %q, origin %s; want %q, %s", name, got.Prefix, ok,
					info.Reason, nfttest.DescribeOrigin(info.Origin), c.reason, c.origin)
			}
			if !strings.HasPrefix(got.Prefix, "deny_") {
				t.Errorf("%s: prefix %q is no deny chain", name, got.Prefix)
			}
		}
		dp.Close()
	}
}
