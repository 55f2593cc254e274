package nfttest

import (
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The Scenarios of the golden and traffic tests: four pods, x/a and y/a on node "a", x/b and y/b
// on node "b", each serving TCP 80, TCP 81 and UDP 80. x/a names TCP 80 "serve-80-tcp"; x/b names
// TCP 81 "serve-80-tcp" (named ports resolve per destination pod).

// Pod is one test pod.
type Pod struct {
	NS, Name, Node string
	V4, V6         netip.Addr // fixed addresses for golden tests; traffic tests use the harness's
	NamedPorts     []model.NamedPort
}

// Key is the pod's namespace/name.
func (p Pod) Key() string { return p.NS + "/" + p.Name }

// PodsByKey are Pods by their Key.
func PodsByKey() map[string]Pod {
	m := make(map[string]Pod, len(Pods))
	for _, p := range Pods {
		m[p.Key()] = p
	}
	return m
}

// Pods are the four pods of the scenarios.
var Pods = []Pod{
	{NS: "x", Name: "a", Node: "a", V4: netip.MustParseAddr("10.244.0.10"), V6: netip.MustParseAddr("fd00:10:244::10"),
		NamedPorts: []model.NamedPort{{Name: "serve-80-tcp", Protocol: model.ProtocolTCP, Port: 80}}},
	{NS: "x", Name: "b", Node: "b", V4: netip.MustParseAddr("10.244.1.10"), V6: netip.MustParseAddr("fd00:10:244:1::10"),
		NamedPorts: []model.NamedPort{{Name: "serve-80-tcp", Protocol: model.ProtocolTCP, Port: 81}}},
	{NS: "y", Name: "a", Node: "a", V4: netip.MustParseAddr("10.244.0.11"), V6: netip.MustParseAddr("fd00:10:244::11")},
	{NS: "y", Name: "b", Node: "b", V4: netip.MustParseAddr("10.244.1.11"), V6: netip.MustParseAddr("fd00:10:244:1::11")},
}

// Probe is one connection attempt of the truth table: Port and SrcPort are the destination and
// source ports of TCP, UDP and SCTP (SrcPort 0: an ephemeral one, above 32767); ICMPType and
// ICMPCode are an ICMP (IPv4) or ICMPv6 (IPv6) packet's.
type Probe struct {
	From, To           Pod
	Proto              model.Protocol
	Port, SrcPort      uint16
	ICMPType, ICMPCode uint8
	Is6                bool
}

// Echo is the ICMP echo request type of the probe's family (8, ICMPv6 128), with its protocol.
func Echo(is6 bool) (model.Protocol, uint8) {
	if is6 {
		return model.ProtocolICMPv6, 128
	}
	return model.ProtocolICMP, 8
}

// icmpRule is a rule of action on the echo requests of one family, of code when given.
func icmpRule(action model.Action, is6 bool, code *uint8) model.Rule {
	proto, typ := Echo(is6)
	return model.Rule{Action: action, Protocol: proto, ICMP: &model.ICMPMatch{Type: typ, Code: code}}
}

// Scenario is a named set of policies over Pods and the truth table they must give.
type Scenario struct {
	Name     string
	Policies func(addrs map[string][]netip.Addr) []model.Policy
	// Allowed is the expected truth table, written as the upstream e2e tests state it.
	Allowed func(p Probe) bool
}

// NPKey is the key of NetworkPolicy ns/name.
func NPKey(ns, name string) model.PolicyKey {
	return model.PolicyKey{Kind: "NetworkPolicy", Namespace: ns, Name: name}
}

// NP builds a NetworkPolicy-shaped model policy.
func NP(ns, name, sel string, ingress, egress []model.Rule, types ...model.Direction) model.Policy {
	p := model.Policy{Key: NPKey(ns, name), Tier: model.TierNetworkPolicy, Namespace: ns, Selector: sel,
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

// Allow is a rule allowing from src to dst.
func Allow(src, dst model.Peer) model.Rule {
	return model.Rule{Action: model.ActionAllow, Source: src, Destination: dst}
}

// AllowTCP is Allow for TCP only: a NetworkPolicy port always has a protocol (TCP by default),
// while a model rule without one matches the port on every protocol.
func AllowTCP(src, dst model.Peer) model.Rule {
	r := Allow(src, dst)
	r.Protocol = model.ProtocolTCP
	return r
}

// TCP is one port (of whatever protocol the rule names).
func TCP(port uint16) model.Port { return model.Port{First: port, Last: port} }

// Static is a scenario's policies that do not depend on the pods' addresses.
func Static(ps ...model.Policy) func(map[string][]netip.Addr) []model.Policy {
	return func(map[string][]netip.Addr) []model.Policy { return ps }
}

// Named is the scenario of that name (a zero Scenario when none is).
func Named(name string) Scenario {
	for _, sc := range Scenarios {
		if sc.Name == name {
			return sc
		}
	}
	return Scenario{}
}

// Scenarios are the scenarios of the golden and traffic tests.
var Scenarios = []Scenario{
	{
		Name:     "no-policy",
		Policies: Static(),
		Allowed:  func(Probe) bool { return true },
	},
	{
		Name:     "default-deny-ingress-x",
		Policies: Static(NP("x", "deny-all", "all()", nil, nil, model.Ingress)),
		Allowed:  func(p Probe) bool { return p.To.NS != "x" || p.From.Key() == p.To.Key() },
	},
	{
		Name: "allow-from-pod-a-in-x",
		Policies: Static(NP("x", "allow-a", "pod == 'b'", []model.Rule{
			Allow(model.Peer{Selector: "pod == 'a'"}, model.Peer{}),
		}, nil, model.Ingress)),
		Allowed: func(p Probe) bool { return p.To.Key() != "x/b" || p.From.Key() == "x/a" || p.From.Key() == p.To.Key() },
	},
	{
		Name: "allow-from-namespace-y-tcp-80",
		Policies: Static(NP("x", "allow-y", "all()", []model.Rule{
			AllowTCP(model.Peer{NamespaceSelector: "ns == 'y'"}, model.Peer{Ports: []model.Port{TCP(80)}}),
		}, nil, model.Ingress)),
		Allowed: func(p Probe) bool {
			return p.To.NS != "x" || p.From.Key() == p.To.Key() || (p.From.NS == "y" && p.Proto == model.ProtocolTCP && p.Port == 80)
		},
	},
	{
		Name: "named-port-from-y",
		Policies: Static(NP("x", "allow-named", "all()", []model.Rule{
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{NamespaceSelector: "ns == 'y'"},
				Destination: model.Peer{Ports: []model.Port{{Name: "serve-80-tcp"}}}},
		}, nil, model.Ingress)),
		Allowed: func(p Probe) bool {
			if p.To.NS != "x" || p.From.Key() == p.To.Key() {
				return true
			}
			// x/a serves the name on TCP 80, x/b on TCP 81
			want := uint16(80)
			if p.To.Name == "b" {
				want = 81
			}
			return p.From.NS == "y" && p.Proto == model.ProtocolTCP && p.Port == want
		},
	},
	{
		Name: "ipblock-with-except",
		Policies: func(addrs map[string][]netip.Addr) []model.Policy {
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
			return []model.Policy{NP("x", "allow-block", "pod == 'a'", []model.Rule{
				Allow(model.Peer{Nets: nets, NotNets: except}, model.Peer{}),
			}, nil, model.Ingress)}
		},
		Allowed: func(p Probe) bool {
			return p.To.Key() != "x/a" || p.From.Key() == p.To.Key() || p.From.Key() == "x/b"
		},
	},
	{
		Name: "ingress-and-egress",
		Policies: Static(
			NP("y", "deny-egress-b", "pod == 'b'", nil, []model.Rule{
				AllowTCP(model.Peer{}, model.Peer{Selector: "pod == 'a'", Ports: []model.Port{TCP(80)}}),
			}, model.Egress),
			NP("x", "allow-udp", "pod == 'a'", []model.Rule{
				{Action: model.ActionAllow, Protocol: model.ProtocolUDP},
			}, nil, model.Ingress),
		),
		Allowed: func(p Probe) bool {
			if p.From.Key() == p.To.Key() {
				return true
			}
			if p.From.Key() == "y/b" && !(p.To.Key() == "y/a" && p.Proto == model.ProtocolTCP && p.Port == 80) {
				return false
			}
			if p.To.Key() == "x/a" && p.Proto != model.ProtocolUDP {
				return false
			}
			return true
		},
	},
	{
		Name: "tiers-admin-deny-and-pass",
		Policies: Static(
			model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "admin-deny-y-to-x"}, Tier: model.TierAdmin,
				// the model has no namespace selector for a policy's subjects: Namespace scopes it
				Order: 10, Namespace: "x", Selector: "all()", ApplyIngress: true, IngressRules: []model.Rule{
					{Action: model.ActionPass, Source: model.Peer{NamespaceSelector: "ns == 'y'", Selector: "pod == 'a'"}},
					{Action: model.ActionDeny, Source: model.Peer{NamespaceSelector: "ns == 'y'"}},
				}},
			NP("x", "allow-all", "all()", []model.Rule{Allow(model.Peer{NamespaceSelector: "all()"}, model.Peer{})}, nil, model.Ingress),
		),
		Allowed: func(p Probe) bool {
			// y/b → x is denied by the admin tier; y/a passes to the NetworkPolicy tier, which allows
			return !(p.To.NS == "x" && p.From.Key() == "y/b") || p.From.Key() == p.To.Key()
		},
	},
	{
		// x/a takes echo requests only; an admin policy denies y's pods echo requests of code 0
		// (what ping sends) and lets every other ICMP packet pass to the default tier
		Name: "icmp-echo-only-and-code-deny",
		Policies: Static(
			NP("x", "allow-echo", "pod == 'a'", []model.Rule{
				icmpRule(model.ActionAllow, false, nil), icmpRule(model.ActionAllow, true, nil),
			}, nil, model.Ingress),
			model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "admin-deny-echo-code-0"}, Tier: model.TierAdmin,
				Order: 10, Namespace: "y", Selector: "all()", ApplyIngress: true, IngressRules: []model.Rule{
					icmpRule(model.ActionDeny, false, new(uint8)), icmpRule(model.ActionDeny, true, new(uint8)),
				}},
		),
		Allowed: func(p Probe) bool {
			if p.From.Key() == p.To.Key() {
				return true
			}
			proto, echo := Echo(p.Is6)
			isEcho := p.Proto == proto && p.ICMPType == echo
			switch {
			case p.To.Key() == "x/a":
				return isEcho
			case p.To.NS == "y":
				return !isEcho || p.ICMPCode != 0
			}
			return true
		},
	},
	{
		// x/a takes TCP port 80; TCP from namespace y is logged first (with a deny log)
		Name: "log-then-allow-tcp-80",
		Policies: Static(NP("x", "log-and-allow", "pod == 'a'", []model.Rule{
			{Action: model.ActionLog, Protocol: model.ProtocolTCP, Source: model.Peer{NamespaceSelector: "ns == 'y'"}},
			AllowTCP(model.Peer{}, model.Peer{Ports: []model.Port{TCP(80)}}),
		}, nil, model.Ingress)),
		Allowed: func(p Probe) bool {
			return p.To.Key() != "x/a" || p.From.Key() == p.To.Key() || p.Proto == model.ProtocolTCP && p.Port == 80
		},
	},
	{
		// x/a takes TCP and UDP port 80 from source ports 5300-5399 only
		Name: "from-source-ports",
		Policies: Static(NP("x", "from-sports", "pod == 'a'", []model.Rule{
			{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{Ports: []model.Port{{First: 5300, Last: 5399}}},
				Destination: model.Peer{Ports: []model.Port{TCP(80)}}},
			{Action: model.ActionAllow, Protocol: model.ProtocolUDP, Source: model.Peer{Ports: []model.Port{{First: 5300, Last: 5399}}},
				Destination: model.Peer{Ports: []model.Port{TCP(80)}}},
		}, nil, model.Ingress)),
		Allowed: func(p Probe) bool {
			return p.To.Key() != "x/a" || p.From.Key() == p.To.Key() ||
				(p.Proto == model.ProtocolTCP || p.Proto == model.ProtocolUDP) && p.Port == 80 && p.SrcPort >= 5300 && p.SrcPort <= 5399
		},
	},
}
