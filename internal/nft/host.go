package nft

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// This file is the node's own traffic (host endpoints): the host parts of the input_host and
// output_host base chains, the host dispatch maps, the failsafe ports and the agent's path to
// its API server. They are put into the table with the first host endpoint's dispatch element
// and stay: a table without host endpoints is exactly the one before them.
//
// input_host, after the pods' egress dispatch:
//
//	iifname "lo" accept                              loopback is never policed
//	iifname "<workload prefix>*" accept              pod → own node: the pod's egress alone
//	meta l4proto . th dport @failsafe_in accept      inbound failsafe ports
//	iifname . ip daddr vmap @host_in_if_v4           (interface, node address) → group chain
//	ip daddr vmap @host_in_v4                        node address → the "*" endpoint's group
//
// output_host, after conntrack:
//
//	oifname "lo" accept; oifname "<workload prefix>*" accept   (node → own pods: not policed)
//	meta l4proto ipv6-icmp accept                    neighbour discovery
//	ip daddr . meta l4proto . th dport @agent_api_v4 accept    the agent's API server
//	meta l4proto . th dport @failsafe_out accept     outbound failsafe ports
//	oifname . ip saddr vmap @host_out_if_v4; ip saddr vmap @host_out_v4
//
// A named interface's endpoint takes the packets of its interface; the "*" endpoint those of
// every other interface. Lookups are hash lookups: the cost does not grow with the endpoints.

// Names of the host objects.
const (
	mapHostInIfV4   = "host_in_if_v4"
	mapHostInIfV6   = "host_in_if_v6"
	mapHostInV4     = "host_in_v4"
	mapHostInV6     = "host_in_v6"
	mapHostOutIfV4  = "host_out_if_v4"
	mapHostOutIfV6  = "host_out_if_v6"
	mapHostOutV4    = "host_out_v4"
	mapHostOutV6    = "host_out_v6"
	setFailsafeIn   = "failsafe_in"
	setFailsafeOut  = "failsafe_out"
	setAgentAPIv4   = "agent_api_v4"
	setAgentAPIv6   = "agent_api_v6"
	loopbackIfname  = "lo"
	hostDispatchCmt = "node address → its host endpoint's decision chain"
)

// HostConfig is what a Builder needs to police the node's own traffic.
type HostConfig struct {
	// FailsafeIn and FailsafeOut are the protocol and destination port pairs that no policy
	// blocks, to and from the node (Felix's failsafe ports).
	FailsafeIn, FailsafeOut []Failsafe
	// APIServers are the TCP addresses and ports of the agent's API server: the node's
	// traffic to them is never blocked, whatever the policies say.
	APIServers []netip.AddrPort
	// WorkloadPrefixes are the name prefixes of the interfaces that lead to pods: traffic
	// between the node and its pods is not policed by host endpoints (a pod's traffic to the
	// node is judged by its egress policy).
	WorkloadPrefixes []string
}

// Failsafe is one failsafe port: a protocol and a destination port and, when Net is valid,
// the remote addresses it is open to (the source to the node, the destination from it).
type Failsafe struct {
	Protocol model.Protocol
	Net      netip.Prefix
	Port     uint16
}

func (f Failsafe) String() string {
	if !f.Net.IsValid() {
		return f.Protocol.String() + ":" + strconv.Itoa(int(f.Port))
	}
	net := f.Net.String()
	if f.Net.Addr().Is6() {
		net = "[" + net + "]"
	}
	return f.Protocol.String() + ":" + net + ":" + strconv.Itoa(int(f.Port))
}

// Felix's default failsafe ports.
const (
	DefaultFailsafeIn  = "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
	DefaultFailsafeOut = "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667"
)

// ParseFailsafes parses failsafe ports in Felix's form: a comma-separated list of `port`
// (TCP), `protocol:port` or `protocol:net:port`, where protocol is tcp, udp or sctp and net an
// address or CIDR, an IPv6 one in brackets (`tcp:10.0.0.0/8:22`, `udp:[fd00::/8]:53`). "none"
// or "" is no port.
func ParseFailsafes(s string) ([]Failsafe, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []Failsafe
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		f, err := parseFailsafe(item)
		if err != nil {
			return nil, fmt.Errorf("failsafe %q: %w", item, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFailsafe(item string) (Failsafe, error) {
	var f Failsafe
	proto, net, port := "tcp", "", item
	if open := strings.IndexByte(item, '['); open >= 0 {
		end := strings.Index(item, "]:")
		if end < open {
			return f, fmt.Errorf("an IPv6 net is [net]:port")
		}
		net, port = item[open+1:end], item[end+2:]
		proto = strings.TrimSuffix(item[:open], ":")
		if proto == item[:open] {
			return f, fmt.Errorf("a net needs a protocol before it (protocol:[net]:port)")
		}
	} else {
		switch parts := strings.Split(item, ":"); len(parts) {
		case 1:
		case 2:
			proto, port = parts[0], parts[1]
		case 3:
			proto, net, port = parts[0], parts[1], parts[2]
		default:
			return f, fmt.Errorf("want port, protocol:port or protocol:net:port")
		}
	}
	switch strings.ToLower(proto) {
	case "tcp":
		f.Protocol = model.ProtocolTCP
	case "udp":
		f.Protocol = model.ProtocolUDP
	case "sctp":
		f.Protocol = model.ProtocolSCTP
	default:
		return f, fmt.Errorf("protocol %q is not tcp, udp or sctp", proto)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return f, fmt.Errorf("port %q is not 1-65535", port)
	}
	f.Port = uint16(n)
	if net == "" {
		return f, nil
	}
	if !strings.Contains(net, "/") {
		a, err := netip.ParseAddr(net)
		if err != nil {
			return f, fmt.Errorf("net %q is not an address or CIDR", net)
		}
		net = netip.PrefixFrom(a, a.BitLen()).String()
	}
	p, err := netip.ParsePrefix(net)
	if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() {
		return f, fmt.Errorf("net %q is not an address or CIDR", net)
	}
	f.Net = p.Masked()
	return f, nil
}

// hostDispatchMap is the host dispatch map of a host endpoint's element.
func hostDispatchMap(dk dispatchKey) string {
	named := dk.ifname != model.HostInterfaceAll
	v4 := dk.addr.Is4()
	if dk.dir == model.Ingress {
		return pick(named, v4, mapHostInIfV4, mapHostInIfV6, mapHostInV4, mapHostInV6)
	}
	return pick(named, v4, mapHostOutIfV4, mapHostOutIfV6, mapHostOutV4, mapHostOutV6)
}

func pick(named, v4 bool, ifV4, ifV6, allV4, allV6 string) string {
	switch {
	case named && v4:
		return ifV4
	case named:
		return ifV6
	case v4:
		return allV4
	}
	return allV6
}

// hostComment names a host endpoint's dispatch element.
func hostComment(k model.EndpointKey, ifname string) string {
	return "host endpoint " + k.Name + " (" + ifname + ")"
}

// activateHosts puts the host objects into the table, once.
func (b *Builder) activateHosts() {
	if b.layout.hostsActive {
		return
	}
	b.layout.hostsActive = true
	for _, m := range []struct {
		name string
		key  ruleset.Key
	}{
		{mapHostInIfV4, ruleset.KeyIifnameIPDaddr}, {mapHostInIfV6, ruleset.KeyIifnameIP6Daddr},
		{mapHostInV4, ruleset.KeyIPDaddr}, {mapHostInV6, ruleset.KeyIP6Daddr},
		{mapHostOutIfV4, ruleset.KeyOifnameIPSaddr}, {mapHostOutIfV6, ruleset.KeyOifnameIP6Saddr},
		{mapHostOutV4, ruleset.KeyIPSaddr}, {mapHostOutV6, ruleset.KeyIP6Saddr},
	} {
		b.putSet(&ruleset.Set{Name: m.name, Key: m.key, Map: true, Comment: hostDispatchCmt, Elements: map[ruleset.ElementKey]ruleset.Value{}})
	}
	for _, s := range []struct {
		name string
		fs   []Failsafe
		c    string
	}{{setFailsafeIn, b.opts.host.FailsafeIn, "failsafe ports to the node"}, {setFailsafeOut, b.opts.host.FailsafeOut, "failsafe ports from the node"}} {
		sets := map[string]*ruleset.Set{s.name: {Name: s.name, Key: ruleset.KeyL4ProtoDport, Comment: s.c, Elements: map[ruleset.ElementKey]ruleset.Value{}}}
		for _, f := range s.fs {
			name := failsafeSet(s.name, f.Net)
			if sets[name] == nil {
				c := s.c + " from and to " + f.Net.String()
				sets[name] = &ruleset.Set{Name: name, Key: ruleset.KeyL4ProtoDport, Comment: c, Elements: map[ruleset.ElementKey]ruleset.Value{}}
				key := ruleset.KeyIPSaddr
				if f.Net.Addr().Is6() {
					key = ruleset.KeyIP6Saddr
				}
				nets := &ruleset.Set{Name: name + "_net", Key: key, Interval: true, Comment: c, Elements: map[ruleset.ElementKey]ruleset.Value{}}
				nets.Put(ruleset.Element{ElementKey: ruleset.ElementKey{Addr: f.Net.Addr(), AddrEnd: lastAddr(f.Net)}})
				sets[name+"_net"] = nets
			}
			sets[name].Put(ruleset.Element{ElementKey: ruleset.ElementKey{Proto: uint8(f.Protocol), Port: f.Port, PortEnd: f.Port}})
		}
		for _, set := range sets {
			b.putSet(set)
		}
	}
	for _, s := range []struct {
		name string
		key  ruleset.Key
		v4   bool
	}{{setAgentAPIv4, ruleset.KeyIPDaddrL4ProtoDport, true}, {setAgentAPIv6, ruleset.KeyIP6DaddrL4ProtoDport, false}} {
		set := &ruleset.Set{Name: s.name, Key: s.key, Comment: "the agent's API server", Elements: map[ruleset.ElementKey]ruleset.Value{}}
		for _, ap := range b.opts.host.APIServers {
			if a := ap.Addr().Unmap(); a.Is4() == s.v4 {
				set.Put(ruleset.Element{ElementKey: ruleset.ElementKey{Addr: a, AddrEnd: a, Proto: uint8(model.ProtocolTCP), Port: ap.Port(), PortEnd: ap.Port()}})
			}
		}
		b.putSet(set)
	}
	b.putInput()
	b.putOutput()
	b.opts.log.Info("host endpoints: policing the node's own traffic", "failsafe_in", fmt.Sprint(b.opts.host.FailsafeIn),
		"failsafe_out", fmt.Sprint(b.opts.host.FailsafeOut), "api_servers", fmt.Sprint(b.opts.host.APIServers))
}

// putInput writes the input base chain: pods' traffic to this node by their egress policy,
// then, with host endpoints, the node's own ingress.
func (b *Builder) putInput() {
	rules := []ruleset.Rule{established(),
		{L4Proto: uint8(model.ProtocolICMPv6), Verdict: ruleset.Verdict{Kind: ruleset.Accept},
			Comment: "ICMPv6 to this node (neighbour discovery, also from pod addresses) is not policed"},
		lookup(ruleset.KeyIPSaddr, mapEgressV4, "from a local pod with egress policy, to this node (IPv4)"),
		lookup(ruleset.KeyIP6Saddr, mapEgressV6, "from a local pod with egress policy, to this node (IPv6)")}
	comment := "local pod to this node: judged by the pod's egress policy, as traffic to another node is"
	if b.layout.hostsActive {
		comment = "to this node: a local pod's traffic by its egress policy, other traffic by the node's host endpoints"
		rules = append(rules, b.unpoliced(false, "from a local pod: judged by its egress policy alone")...)
		rules = append(rules, b.failsafes(true, false)...)
		rules = append(rules, b.markedAccept(false)...)
		rules = append(rules, hostDispatch(model.Ingress)...)
	}
	b.putChain(&ruleset.Chain{Name: chainInput, Base: &ruleset.Base{Hook: ruleset.HookInput, Priority: PriorityEgress},
		Comment: comment, Rules: rules})
}

// putOutput writes the output base chain: accepted, but, with host endpoints, the node's own
// egress.
func (b *Builder) putOutput() {
	rules := []ruleset.Rule{established()}
	comment := "this node to its pods: accepted (kubelet probes)"
	if b.layout.hostsActive {
		comment = "from this node: to its pods accepted (kubelet probes), other traffic by its host endpoints"
		rules = append(rules, b.unpoliced(true, "to a local pod: not policed")...)
		rules = append(rules,
			ruleset.Rule{L4Proto: uint8(model.ProtocolICMPv6), Verdict: ruleset.Verdict{Kind: ruleset.Accept},
				Comment: "ICMPv6 from this node (neighbour discovery) is not policed"},
			acceptIn(ruleset.KeyIPDaddrL4ProtoDport, setAgentAPIv4, "the agent's API server: never blocked (IPv4)"),
			acceptIn(ruleset.KeyIP6DaddrL4ProtoDport, setAgentAPIv6, "the agent's API server: never blocked (IPv6)"))
		rules = append(rules, b.failsafes(false, false)...)
		rules = append(rules, b.markedAccept(true)...)
		rules = append(rules, hostDispatch(model.Egress)...)
	}
	b.putChain(&ruleset.Chain{Name: chainOutput, Base: &ruleset.Base{Hook: ruleset.HookOutput, Priority: PriorityIngress},
		Comment: comment, Rules: rules})
}

// unpoliced accepts the interfaces no host endpoint polices, by input interface or, with out,
// output interface: loopback, and the workload interfaces (pods' comments).
func (b *Builder) unpoliced(out bool, pods string) []ruleset.Rule {
	accept := func(ifname, c string) ruleset.Rule {
		r := ruleset.Rule{Verdict: ruleset.Verdict{Kind: ruleset.Accept}, Comment: c}
		if out {
			r.Oifname = ifname
		} else {
			r.Iifname = ifname
		}
		return r
	}
	rules := []ruleset.Rule{accept(loopbackIfname, "loopback is never policed")}
	for _, p := range b.opts.host.WorkloadPrefixes {
		rules = append(rules, accept(p+"*", pods))
	}
	return rules
}

// failsafeSet is the name of the set of a direction's failsafe ports open to net (any address
// when net is not valid); with "_net" the interval set of net.
func failsafeSet(dir string, net netip.Prefix) string {
	if !net.IsValid() {
		return dir
	}
	return dir + "_" + shortHash(net.String())
}

// failsafes accept the failsafe ports to the node (in) or from it as the packets of their
// connections meet a chain: their first packets by destination port or, with reply, the
// replies by source port; the remote address (the source of a packet arriving, the
// destination of one leaving) in the port's net, when it has one.
func (b *Builder) failsafes(in, reply bool) []ruleset.Rule {
	name, fs := setFailsafeIn, b.opts.host.FailsafeIn
	if !in {
		name, fs = setFailsafeOut, b.opts.host.FailsafeOut
	}
	port, c := ruleset.KeyL4ProtoDport, "failsafe port: never blocked by a host endpoint's policy"
	if reply {
		port, c = ruleset.KeyL4ProtoSport, "replies of the other direction's failsafe ports (no conntrack here)"
	}
	rules := []ruleset.Rule{acceptIn(port, name, c)}
	arriving := in != reply
	seen := map[netip.Prefix]bool{}
	for _, f := range fs {
		if !f.Net.IsValid() || seen[f.Net] {
			continue
		}
		seen[f.Net] = true
		addr := map[[2]bool]ruleset.Key{{true, true}: ruleset.KeyIPSaddr, {true, false}: ruleset.KeyIP6Saddr,
			{false, true}: ruleset.KeyIPDaddr, {false, false}: ruleset.KeyIP6Daddr}[[2]bool{arriving, f.Net.Addr().Is4()}]
		set := failsafeSet(name, f.Net)
		rules = append(rules, ruleset.Rule{Lookups: []ruleset.Lookup{{Key: addr, Set: set + "_net"}, {Key: port, Set: set}},
			Verdict: ruleset.Verdict{Kind: ruleset.Accept}, Comment: c + " (from and to " + f.Net.String() + ")"})
	}
	return rules
}

// hostKeys are the keys of a direction's node address dispatch: interface . address (IPv4,
// IPv6), then address (IPv4, IPv6); the address is the destination of ingress, the source of
// egress.
func hostKeys(dir model.Direction) [4]ruleset.Key {
	if dir == model.Egress {
		return [4]ruleset.Key{ruleset.KeyOifnameIPSaddr, ruleset.KeyOifnameIP6Saddr, ruleset.KeyIPSaddr, ruleset.KeyIP6Saddr}
	}
	return [4]ruleset.Key{ruleset.KeyIifnameIPDaddr, ruleset.KeyIifnameIP6Daddr, ruleset.KeyIPDaddr, ruleset.KeyIP6Daddr}
}

// acceptIn accepts what is in a set: KEY @set accept.
func acceptIn(key ruleset.Key, set, c string) ruleset.Rule {
	return ruleset.Rule{Lookups: []ruleset.Lookup{{Key: key, Set: set}}, Verdict: ruleset.Verdict{Kind: ruleset.Accept}, Comment: c}
}

// hostDispatch is a direction's host dispatch: by interface and node address, then by node
// address for the * endpoint, per family (the maps of hostDispatchMap).
func hostDispatch(dir model.Direction) []ruleset.Rule {
	keys := hostKeys(dir)
	what := "to this node through "
	if dir == model.Egress {
		what = "from this node through "
	}
	var rules []ruleset.Rule
	for i, through := range [4]string{"an interface with a host endpoint (IPv4)", "an interface with a host endpoint (IPv6)",
		"any other interface: its * host endpoint (IPv4)", "any other interface: its * host endpoint (IPv6)"} {
		dk := dispatchKey{dir: dir, addr: netip.IPv4Unspecified(), ifname: "if"}
		if i%2 == 1 {
			dk.addr = netip.IPv6Unspecified()
		}
		if i >= 2 {
			dk.ifname = model.HostInterfaceAll
		}
		rules = append(rules, lookup(keys[i], hostDispatchMap(dk), what+through))
	}
	return rules
}
