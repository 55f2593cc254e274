package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestPolicyPackets: with CountAllowed, real connections into node a's x/a are counted per
// policy and verdict where they are decided — a listed group's accepting rule, a map group's
// class map element, deny chains — and Packets names in Policies the tier, policy and direction.
func TestPolicyPackets(t *testing.T) {
	tc := newTrafficCluster(t)
	fd := nodeFD(t, tc.c.Node("a"))
	byName := map[string]nfttest.Scenario{}
	for _, sc := range nfttest.Scenarios {
		byName[sc.Name] = sc
	}
	type flow struct {
		from  string
		times int
	}
	for _, c := range []struct {
		scenario string
		flows    []flow
		want     map[nft.PolicyCount]uint64
	}{
		{"allow-from-namespace-y-tcp-80", []flow{{"y/a", 2}, {"x/b", 1}}, map[nft.PolicyCount]uint64{ // listed
			{Tier: "default", Policy: "NetworkPolicy/x/allow-y", Direction: "ingress", Verdict: "allow"}: 2,
			{Tier: "default", Verdict: "deny"}: 1,
		}},
		{"tiers-admin-deny-and-pass", []flow{{"y/a", 3}, {"y/b", 2}}, map[nft.PolicyCount]uint64{ // map shape
			{Tier: "default", Policy: "NetworkPolicy/x/allow-all", Direction: "ingress", Verdict: "allow"}:           3,
			{Tier: "admin", Policy: "ClusterNetworkPolicy/admin-deny-y-to-x", Direction: "ingress", Verdict: "deny"}: 2,
		}},
	} {
		dp, err := kernel.Open(fd, nft.Config{CountAllowed: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := dp.Apply(nfttest.MessagesFor("a", tc.addrs, byName[c.scenario])); err != nil {
			t.Fatal(err)
		}
		for _, f := range c.flows {
			for range f.times {
				if _, err := netns.Probe(context.Background(), tc.pods[f.from].NetNS, tc.pods["x/a"].IP(false), netns.TCP, 80,
					300*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
		}
		packets, err := dp.Packets()
		if err != nil {
			t.Fatal(err)
		}
		got := packets.Policies
		for k, v := range got {
			if v == 0 {
				delete(got, k)
			}
		}
		if len(got) != len(c.want) {
			t.Errorf("%s: counted %v, want %v", c.scenario, got, c.want)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %+v counted %d, want %d (all: %v)", c.scenario, k, got[k], v, got)
			}
		}
		dp.Close()
	}
}
