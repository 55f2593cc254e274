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

// readNFLOG binds NFLOG group in the namespace of fd and returns the packets logged to it, until
// the test ends.
func readNFLOG(t *testing.T, fd int, group uint16) <-chan nflog.Packet {
	t.Helper()
	r, err := nflog.Open(fd, group)
	if err != nil {
		t.Fatal(err)
	}
	logged := make(chan nflog.Packet, 64)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, func(p nflog.Packet) { logged <- p }) }()
	t.Cleanup(func() { cancel(); <-done })
	return logged
}

// TestLogRule: with a deny log, a Log rule logs the packets it matches to the NFLOG group under
// a prefix that DenyChain resolves to the Log rule, and changes no verdict: TCP 80 from y/a to
// x/a is allowed and logged, TCP 81 denied and logged twice (the Log rule, then the deny chain),
// and TCP 80 from x/b, which the Log rule does not match, allowed and not logged. IPv4 and IPv6.
func TestLogRule(t *testing.T) {
	tc := newTrafficCluster(t)
	fd := nodeFD(t, tc.c.Node("a"))
	const group = 9
	logged := readNFLOG(t, fd, group)

	sc := nfttest.Named("log-then-allow-tcp-80")
	dp, err := kernel.Open(fd, nft.Config{DenyLog: &nft.DenyLog{Group: group, Limit: ruleset.Limit{Rate: 100, Unit: ruleset.PerSecond}}})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if err := dp.Apply(nfttest.MessagesFor("a", tc.addrs, sc)); err != nil {
		t.Fatal(err)
	}
	const logReason = "NetworkPolicy/x/log-and-allow ingress rule 0 (log)"
	for _, is6 := range []bool{false, true} {
		for _, c := range []struct {
			from    string
			port    uint16
			allowed bool
			logs    []string // the reasons logged, in order: a Log rule's, then a deny chain's
		}{
			{"y/a", 80, true, []string{logReason}},
			{"y/a", 81, false, []string{logReason, "tier default default deny: no rule of NetworkPolicy/x/log-and-allow matched"}},
			{"x/b", 80, true, nil},
		} {
			from, to := tc.pods[c.from], tc.pods["x/a"]
			ok, err := netns.Probe(context.Background(), from.NetNS, to.IP(is6), netns.TCP, c.port, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.allowed {
				t.Errorf("%s → x/a tcp/%d IPv6=%v: connected %v, want %v", c.from, c.port, is6, ok, c.allowed)
			}
			var got []string
			deadline := time.After(500 * time.Millisecond)
		read:
			for {
				select {
				case p := <-logged:
					if p.Src != from.IP(is6) || p.Proto != uint8(model.ProtocolTCP) || p.Dport != c.port {
						t.Errorf("%s → x/a tcp/%d: logged %+v", c.from, c.port, p)
					}
					info, ok := dp.DenyChain(p.Prefix)
					if !ok {
						t.Errorf("%s → x/a tcp/%d: prefix %q resolves to nothing", c.from, c.port, p.Prefix)
					}
					if info.Logged != strings.HasPrefix(p.Prefix, "log_") {
						t.Errorf("prefix %q: Logged %v", p.Prefix, info.Logged)
					}
					got = append(got, info.Reason)
				case <-deadline:
					break read
				}
			}
			if len(got) > len(c.logs) && len(c.logs) > 0 {
				got = got[:len(c.logs)] // a retransmission logs again
			}
			if strings.Join(got, "|") != strings.Join(c.logs, "|") {
				t.Errorf("%s → x/a tcp/%d IPv6=%v: logged %q, want %q", c.from, c.port, is6, got, c.logs)
			}
		}
	}
}
