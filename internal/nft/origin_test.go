package nft_test

import (
	"fmt"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// TestDecide: for every scenario, pair of pods, protocol, port and family, the egress decision on
// the source's node and the ingress decision on the destination's node are what the table gives
// the packet (a walk of its forward chains) and together the scenario's truth table; and the
// origins of chosen decisions name the rule or tier default that decided.
func TestDecide(t *testing.T) {
	type want struct {
		scenario, from, to string
		proto              model.Protocol
		port               uint16
		dir                model.Direction
		origin             string
	}
	origins := []want{
		{"no-policy", "x/a", "y/b", model.ProtocolTCP, 80, model.Ingress, "no policy"},
		{"default-deny-ingress-x", "y/a", "x/a", model.ProtocolTCP, 80, model.Ingress,
			"tier default [default] deny [NetworkPolicy/x/deny-all]"},
		{"default-deny-ingress-x", "y/a", "x/a", model.ProtocolTCP, 80, model.Egress, "no policy"},
		{"allow-from-pod-a-in-x", "x/a", "x/b", model.ProtocolUDP, 80, model.Ingress, "rule [default] NetworkPolicy/x/allow-a #0 allow"},
		{"allow-from-namespace-y-tcp-80", "y/b", "x/b", model.ProtocolTCP, 81, model.Ingress,
			"tier default [default] deny [NetworkPolicy/x/allow-y]"},
		{"ingress-and-egress", "y/b", "y/a", model.ProtocolTCP, 80, model.Egress, "rule [default] NetworkPolicy/y/deny-egress-b #0 allow"},
		{"ingress-and-egress", "y/b", "x/a", model.ProtocolUDP, 80, model.Egress,
			"tier default [default] deny [NetworkPolicy/y/deny-egress-b]"},
		{"tiers-admin-deny-and-pass", "y/b", "x/a", model.ProtocolTCP, 80, model.Ingress,
			"rule [admin] ClusterNetworkPolicy/admin-deny-y-to-x #1 deny"},
		{"tiers-admin-deny-and-pass", "y/a", "x/b", model.ProtocolTCP, 80, model.Ingress,
			"rule [default] NetworkPolicy/x/allow-all #0 allow"},
	}
	addrs := fixedAddrs()
	pods := map[string]pod{}
	for _, p := range testPods {
		pods[p.key()] = p
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			dps := map[string]*nft.Dataplane{}
			for _, node := range []string{"a", "b"} {
				dp := nft.NewOffline(nft.Config{})
				if err := dp.Apply(messagesFor(node, addrs, sc)); err != nil {
					t.Fatal(err)
				}
				dps[node] = dp
			}
			// side decides one direction on its node and checks it against a walk of the table
			side := func(from, to pod, proto model.Protocol, port uint16, is6 bool, dir model.Direction) (nft.Decided, bool) {
				t.Helper()
				src, dst := from.v4, to.v4
				if is6 {
					src, dst = from.v6, to.v6
				}
				local, peer, node, chain := src, dst, from.node, "forward_egress"
				if dir == model.Ingress {
					local, peer, node, chain = dst, src, to.node, "forward_ingress"
				}
				dp := dps[node]
				d, ok := dp.Decide(dir, local, peer, proto, port)
				if !ok {
					t.Fatalf("Decide(%s, %s): no local endpoint", dir, local)
				}
				_, v, err := dp.Table().Walk(chain, ruleset.Packet{Src: src, Dst: dst, Proto: uint8(proto), Dport: port})
				if err != nil {
					t.Fatal(err)
				}
				if allowed := d.Outcome.Verdict == nft.Allow; allowed != (v.Kind == ruleset.Accept) {
					t.Errorf("%s → %s %s/%d IPv6=%v %s: decided %v (%s), the table walk ends in %s",
						from.key(), to.key(), proto, port, is6, dir, d.Outcome.Verdict, d.Outcome.Reason, v)
				}
				return d, d.Outcome.Verdict == nft.Allow
			}
			for _, from := range testPods {
				for _, to := range testPods {
					if from.key() == to.key() {
						continue
					}
					for _, pp := range []struct {
						proto model.Protocol
						port  uint16
					}{{model.ProtocolTCP, 80}, {model.ProtocolTCP, 81}, {model.ProtocolUDP, 80}} {
						for _, is6 := range []bool{false, true} {
							_, eg := side(from, to, pp.proto, pp.port, is6, model.Egress)
							_, in := side(from, to, pp.proto, pp.port, is6, model.Ingress)
							if want := sc.allowed(probe{from, to, pp.proto, pp.port, is6}); (eg && in) != want {
								t.Errorf("%s → %s %s/%d IPv6=%v: egress %v, ingress %v; want allowed %v",
									from.key(), to.key(), pp.proto, pp.port, is6, eg, in, want)
							}
						}
					}
				}
			}
			for _, w := range origins {
				if w.scenario != sc.name {
					continue
				}
				for _, is6 := range []bool{false, true} {
					d, _ := side(pods[w.from], pods[w.to], w.proto, w.port, is6, w.dir)
					if got := describeOrigin(d.Origin); got != w.origin || d.Origin.Direction != w.dir {
						t.Errorf("%s → %s %s/%d %s IPv6=%v: origin %s (%s), want %s (reason %q)",
							w.from, w.to, w.proto, w.port, w.dir, is6, got, d.Origin.Direction, w.origin, d.Outcome.Reason)
					}
				}
			}
		})
	}
}

func describeOrigin(o nft.Origin) string {
	switch o.Kind {
	case nft.OriginRule:
		return fmt.Sprintf("rule [%s] %s #%d %s", o.Tier, o.Policy, o.Rule, o.Action)
	case nft.OriginTierDefault:
		return fmt.Sprintf("tier default [%s] %s %v", o.Tier, o.Action, o.Policies)
	}
	return o.Kind.String()
}
