package nft_test

import (
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
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
	addrs := nfttest.FixedAddrs()
	pods := map[string]nfttest.Pod{}
	for _, p := range nfttest.Pods {
		pods[p.Key()] = p
	}
	for _, sc := range nfttest.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			dps := map[string]*nft.Builder{}
			for _, node := range []string{"a", "b"} {
				dp := nft.NewBuilder(nft.Config{})
				dp.Apply(nfttest.MessagesFor(node, addrs, sc))
				dps[node] = dp
			}
			// side decides one direction on its node and checks it against a walk of the table
			side := func(from, to nfttest.Pod, proto model.Protocol, port uint16, is6 bool, dir model.Direction) (nft.Decided, bool) {
				t.Helper()
				src, dst := from.V4, to.V4
				if is6 {
					src, dst = from.V6, to.V6
				}
				local, peer, node, chain := src, dst, from.Node, nft.ChainForwardEgress
				if dir == model.Ingress {
					local, peer, node, chain = dst, src, to.Node, nft.ChainForwardIngress
				}
				dp := dps[node]
				d, ok := dp.Decide(dir, local, peer, proto, 0, port)
				if !ok {
					t.Fatalf("Decide(%s, %s): no local endpoint", dir, local)
				}
				pkt := ruleset.Packet{Src: src, Dst: dst, Proto: uint8(proto), Dport: port}
				if proto == model.ProtocolICMP || proto == model.ProtocolICMPv6 { // port is the ICMPKey
					pkt = ruleset.Packet{Src: src, Dst: dst, Proto: uint8(proto), ICMPType: uint8(port >> 8), ICMPCode: uint8(port)}
				}
				_, v, err := dp.Table().Walk(chain, pkt)
				if err != nil {
					t.Fatal(err)
				}
				if allowed := d.Outcome.Verdict == nft.Allow; allowed != (v.Kind == ruleset.Accept) {
					t.Errorf("%s → %s %s/%d IPv6=%v %s: decided %v (%s), the table walk ends in %s",
						from.Key(), to.Key(), proto, port, is6, dir, d.Outcome.Verdict, d.Outcome.Reason, v)
				}
				return d, d.Outcome.Verdict == nft.Allow
			}
			for _, from := range nfttest.Pods {
				for _, to := range nfttest.Pods {
					if from.Key() == to.Key() {
						continue
					}
					for _, pp := range []struct {
						proto model.Protocol
						port  uint16
					}{{model.ProtocolTCP, 80}, {model.ProtocolTCP, 81}, {model.ProtocolUDP, 80}} {
						for _, is6 := range []bool{false, true} {
							_, eg := side(from, to, pp.proto, pp.port, is6, model.Egress)
							_, in := side(from, to, pp.proto, pp.port, is6, model.Ingress)
							if want := sc.Allowed(nfttest.Probe{From: from, To: to, Proto: pp.proto, Port: pp.port, Is6: is6}); (eg && in) != want {
								t.Errorf("%s → %s %s/%d IPv6=%v: egress %v, ingress %v; want allowed %v",
									from.Key(), to.Key(), pp.proto, pp.port, is6, eg, in, want)
							}
						}
					}
					// echo requests of codes 0 and 1, and the echo reply type
					for _, ic := range []struct{ v4, v6, code uint8 }{{8, 128, 0}, {8, 128, 1}, {0, 129, 0}} {
						for _, is6 := range []bool{false, true} {
							proto, _ := nfttest.Echo(is6)
							typ := ic.v4
							if is6 {
								typ = ic.v6
							}
							key := nft.ICMPKey(typ, ic.code)
							_, eg := side(from, to, proto, key, is6, model.Egress)
							_, in := side(from, to, proto, key, is6, model.Ingress)
							p := nfttest.Probe{From: from, To: to, Proto: proto, ICMPType: typ, ICMPCode: ic.code, Is6: is6}
							if want := sc.Allowed(p); (eg && in) != want {
								t.Errorf("%s → %s %s type %d code %d: egress %v, ingress %v; want allowed %v",
									from.Key(), to.Key(), proto, typ, ic.code, eg, in, want)
							}
						}
					}
				}
			}
			for _, w := range origins {
				if w.scenario != sc.Name {
					continue
				}
				for _, is6 := range []bool{false, true} {
					d, _ := side(pods[w.from], pods[w.to], w.proto, w.port, is6, w.dir)
					if got := nfttest.DescribeOrigin(d.Origin); got != w.origin || d.Origin.Direction != w.dir {
						t.Errorf("%s → %s %s/%d %s IPv6=%v: origin %s (%s), want %s (reason %q)",
							w.from, w.to, w.proto, w.port, w.dir, is6, got, d.Origin.Direction, w.origin, d.Outcome.Reason)
					}
				}
			}
		})
	}
}
