package nft_test

import (
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The scenarios of the golden and traffic tests: four pods, x/a and y/a on node "a", x/b and y/b
// on node "b", each serving TCP 80, TCP 81 and UDP 80. x/a names TCP 80 "serve-80-tcp"; x/b names
// TCP 81 "serve-80-tcp" (named ports resolve per destination pod).

// pod is one test pod.
type pod struct {
	ns, name, node string
	v4, v6         netip.Addr // fixed addresses for golden tests; traffic tests use the harness's
	namedPorts     []model.NamedPort
}

func (p pod) key() string { return p.ns + "/" + p.name }

var testPods = []pod{
	{ns: "x", name: "a", node: "a", v4: netip.MustParseAddr("10.244.0.10"), v6: netip.MustParseAddr("fd00:10:244::10"),
		namedPorts: []model.NamedPort{{Name: "serve-80-tcp", Protocol: model.ProtocolTCP, Port: 80}}},
	{ns: "x", name: "b", node: "b", v4: netip.MustParseAddr("10.244.1.10"), v6: netip.MustParseAddr("fd00:10:244:1::10"),
		namedPorts: []model.NamedPort{{Name: "serve-80-tcp", Protocol: model.ProtocolTCP, Port: 81}}},
	{ns: "y", name: "a", node: "a", v4: netip.MustParseAddr("10.244.0.11"), v6: netip.MustParseAddr("fd00:10:244::11")},
	{ns: "y", name: "b", node: "b", v4: netip.MustParseAddr("10.244.1.11"), v6: netip.MustParseAddr("fd00:10:244:1::11")},
}

// probe is one connection attempt of the truth table.
type probe struct {
	from, to pod
	proto    model.Protocol
	port     uint16
	is6      bool
}

type scenario struct {
	name     string
	policies func(addrs map[string][]netip.Addr) []model.Policy
	// allowed is the expected truth table, written as the upstream e2e tests state it.
	allowed func(p probe) bool
}

func npKey(ns, name string) model.PolicyKey {
	return model.PolicyKey{Kind: "NetworkPolicy", Namespace: ns, Name: name}
}

// np builds a NetworkPolicy-shaped model policy.
func np(ns, name, sel string, ingress, egress []model.Rule, types ...model.Direction) model.Policy {
	p := model.Policy{Key: npKey(ns, name), Tier: model.TierNetworkPolicy, Namespace: ns, Selector: sel,
		IngressRules: ingress, EgressRules: egress}
	for _, t := range types {
		if t == model.Ingress {
			p.ApplyIngress = true
		} else {
			p.ApplyEgress = true
		}
	}
	return p
}

func allow(src, dst model.Peer) model.Rule {
	return model.Rule{Action: model.ActionAllow, Source: src, Destination: dst}
}

// allowTCP is allow for TCP only: a NetworkPolicy port always has a protocol (TCP by default),
// while a model rule without one matches the port on every protocol.
func allowTCP(src, dst model.Peer) model.Rule {
	r := allow(src, dst)
	r.Protocol = model.ProtocolTCP
	return r
}

func tcp(port uint16) model.Port { return model.Port{First: port, Last: port} }

func static(ps ...model.Policy) func(map[string][]netip.Addr) []model.Policy {
	return func(map[string][]netip.Addr) []model.Policy { return ps }
}

var scenarios = []scenario{
	{
		name:     "no-policy",
		policies: static(),
		allowed:  func(probe) bool { return true },
	},
	{
		name:     "default-deny-ingress-x",
		policies: static(np("x", "deny-all", "all()", nil, nil, model.Ingress)),
		allowed:  func(p probe) bool { return p.to.ns != "x" || p.from.key() == p.to.key() },
	},
	{
		name: "allow-from-pod-a-in-x",
		policies: static(np("x", "allow-a", "pod == 'b'", []model.Rule{
			allow(model.Peer{Selector: "pod == 'a'"}, model.Peer{}),
		}, nil, model.Ingress)),
		allowed: func(p probe) bool { return p.to.key() != "x/b" || p.from.key() == "x/a" || p.from.key() == p.to.key() },
	},
	{
		name: "allow-from-namespace-y-tcp-80",
		policies: static(np("x", "allow-y", "all()", []model.Rule{
			allowTCP(model.Peer{NamespaceSelector: "ns == 'y'"}, model.Peer{Ports: []model.Port{tcp(80)}}),
		}, nil, model.Ingress)),
		allowed: func(p probe) bool {
			return p.to.ns != "x" || p.from.key() == p.to.key() || (p.from.ns == "y" && p.proto == model.ProtocolTCP && p.port == 80)
		},
	},
	{
		name: "named-port-from-y",
		policies: static(np("x", "allow-named", "all()", []model.Rule{
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{NamespaceSelector: "ns == 'y'"},
				Destination: model.Peer{Ports: []model.Port{{Name: "serve-80-tcp"}}}},
		}, nil, model.Ingress)),
		allowed: func(p probe) bool {
			if p.to.ns != "x" || p.from.key() == p.to.key() {
				return true
			}
			// x/a serves the name on TCP 80, x/b on TCP 81
			want := uint16(80)
			if p.to.name == "b" {
				want = 81
			}
			return p.from.ns == "y" && p.proto == model.ProtocolTCP && p.port == want
		},
	},
	{
		name: "ipblock-with-except",
		policies: func(addrs map[string][]netip.Addr) []model.Policy {
			// allow node b's pod range except y/b
			var nets, except []netip.Prefix
			for _, a := range addrs["x/b"] {
				bits := 24
				if a.Is6() {
					bits = 64
				}
				nets = append(nets, netip.PrefixFrom(a, bits).Masked())
			}
			for _, a := range addrs["y/b"] {
				except = append(except, netip.PrefixFrom(a, a.BitLen()))
			}
			return []model.Policy{np("x", "allow-block", "pod == 'a'", []model.Rule{
				allow(model.Peer{Nets: nets, NotNets: except}, model.Peer{}),
			}, nil, model.Ingress)}
		},
		allowed: func(p probe) bool {
			return p.to.key() != "x/a" || p.from.key() == p.to.key() || p.from.key() == "x/b"
		},
	},
	{
		name: "ingress-and-egress",
		policies: static(
			np("y", "deny-egress-b", "pod == 'b'", nil, []model.Rule{
				allowTCP(model.Peer{}, model.Peer{Selector: "pod == 'a'", Ports: []model.Port{tcp(80)}}),
			}, model.Egress),
			np("x", "allow-udp", "pod == 'a'", []model.Rule{
				{Action: model.ActionAllow, Protocol: model.ProtocolUDP},
			}, nil, model.Ingress),
		),
		allowed: func(p probe) bool {
			if p.from.key() == p.to.key() {
				return true
			}
			if p.from.key() == "y/b" && !(p.to.key() == "y/a" && p.proto == model.ProtocolTCP && p.port == 80) {
				return false
			}
			if p.to.key() == "x/a" && p.proto != model.ProtocolUDP {
				return false
			}
			return true
		},
	},
	{
		name: "tiers-admin-deny-and-pass",
		policies: static(
			model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "admin-deny-y-to-x"}, Tier: model.TierAdmin,
				// the model has no namespace selector for a policy's subjects: Namespace scopes it
				Order: 10, Namespace: "x", Selector: "all()", ApplyIngress: true, IngressRules: []model.Rule{
					{Action: model.ActionPass, Source: model.Peer{NamespaceSelector: "ns == 'y'", Selector: "pod == 'a'"}},
					{Action: model.ActionDeny, Source: model.Peer{NamespaceSelector: "ns == 'y'"}},
				}},
			np("x", "allow-all", "all()", []model.Rule{allow(model.Peer{NamespaceSelector: "all()"}, model.Peer{})}, nil, model.Ingress),
		),
		allowed: func(p probe) bool {
			// y/b → x is denied by the admin tier; y/a passes to the NetworkPolicy tier, which allows
			return !(p.to.ns == "x" && p.from.key() == "y/b") || p.from.key() == p.to.key()
		},
	},
}
