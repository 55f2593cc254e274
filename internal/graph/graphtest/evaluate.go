package graphtest

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Model is what Evaluate reads of a dataplane state: the policies' rules and the sets' members.
type Model interface {
	// Rules returns a policy's rules in one direction as the state enforces them; none for a
	// policy it does not hold.
	Rules(key model.PolicyKey, dir model.Direction) []dataplane.Rule
	// Member reports whether address a is a member of address set id; a missing set has none.
	Member(id dataplane.SetID, a netip.Addr) bool
	// NamedPort reports whether (a, proto, port) is a member of named-port set id.
	NamedPort(id dataplane.SetID, a netip.Addr, proto model.Protocol, port uint16) bool
}

// Decision is what decided a packet in one direction: a rule, a tier's default, or nothing
// (after the last tier: allow).
type Decision struct {
	Allow bool
	// Rule is the rule that decided, Policy its policy and Index its place among the policy's
	// rules of the direction; Rule is nil when no rule decided.
	Rule   *dataplane.Rule
	Policy model.PolicyKey
	Index  int
	// Tier is the tier whose default decided; nil when a rule decided or no tier did.
	Tier *dataplane.TierPolicies
	// Logs are the Log rules that matched on the way, in evaluation order.
	Logs []Logged
}

// Logged is a Log rule that matched: the rule, its policy and its place among the policy's rules
// of the direction.
type Logged struct {
	Rule   *dataplane.Rule
	Policy model.PolicyKey
	Index  int
}

// Flow is what rules read of the first packet of a connection besides its addresses.
type Flow struct {
	Proto            model.Protocol
	SrcPort, DstPort uint16 // TCP, UDP and SCTP
	ICMPType         uint8  // ICMP and ICMPv6
	ICMPCode         uint8
}

// Evaluate is the reference semantics of the policy model for the first packet of a connection
// in one direction of a local endpoint (local: its address; peer: the other end; f: the rest of
// the packet): tiers in order, policies in order, rules in order; Allow and Deny decide,
// Pass goes to the next tier, Log continues; a tier whose policies did not decide applies its
// default when that is Allow or Deny, and passes otherwise; after the last tier, allow.
// Addresses are compared unmapped. Set membership is the Model's, as the dataplane holds it: an
// address several pods hold is judged by its membership of each set the rule refers to, which
// the graph decides by the set's polarity (an Allow rule's sets hold it only while every holder
// matches, a Deny or Pass rule's while one does, negated uses the other way round), so a
// compiled ruleset and Evaluate over one state judge a contested address alike. As the
// dataplane enforces them: a rule with ports or excluded ports (destination or source) matches
// only protocols with ports; named source ports are the source's (on ingress the peer's, on
// egress the local endpoint's). A rule with ICMP or NotICMP matches only packets of the family's ICMP
// protocol (ICMP for IPv4, ICMPv6 for IPv6; with any other protocol it matches nothing): of
// ICMP's type (and code, when given), and not of NotICMP's.
func Evaluate(m Model, dir model.Direction, tiers []dataplane.TierPolicies, local, peer netip.Addr, f Flow) Decision {
	local, peer = local.Unmap(), peer.Unmap()
	var logs []Logged
tiers:
	for i := range tiers {
		t := &tiers[i]
		for _, key := range t.Policies {
			rules := m.Rules(key, dir)
			for j := range rules {
				r := &rules[j]
				if !matches(m, dir, r, local, peer, f) {
					continue
				}
				switch r.Action {
				case model.ActionAllow, model.ActionDeny:
					return Decision{Allow: r.Action == model.ActionAllow, Rule: r, Policy: key, Index: j, Logs: logs}
				case model.ActionPass:
					continue tiers
				case model.ActionLog:
					logs = append(logs, Logged{Rule: r, Policy: key, Index: j})
				}
			}
		}
		switch t.DefaultAction {
		case model.ActionAllow, model.ActionDeny:
			return Decision{Allow: t.DefaultAction == model.ActionAllow, Tier: t, Logs: logs}
		}
	}
	return Decision{Allow: true, Logs: logs}
}

func matches(m Model, dir model.Direction, r *dataplane.Rule, local, peer netip.Addr, f Flow) bool {
	proto, port := f.Proto, f.DstPort
	if r.IPVersion == 4 && !peer.Is4() || r.IPVersion == 6 && !peer.Is6() {
		return false
	}
	if r.Protocol != model.ProtocolAny && r.Protocol != proto {
		return false
	}
	if r.NotProtocol != model.ProtocolAny && r.NotProtocol == proto {
		return false
	}
	if r.ICMP != nil || r.NotICMP != nil {
		icmp := model.ProtocolICMPv6
		if peer.Is4() {
			icmp = model.ProtocolICMP
		}
		if proto != icmp || r.ICMP != nil && !icmpMatch(r.ICMP, f) || r.NotICMP != nil && icmpMatch(r.NotICMP, f) {
			return false
		}
	}
	src, dst := peer, local
	if dir == model.Egress {
		src, dst = local, peer
	}
	return addrMatch(m, &r.Src, src) && addrMatch(m, &r.Dst, dst) && portMatch(m, &r.Dst, dst, proto, port) &&
		portMatch(m, &r.Src, src, proto, f.SrcPort)
}

// icmpMatch reports whether the packet's ICMP type (and code, when im has one) is im's.
func icmpMatch(im *model.ICMPMatch, f Flow) bool {
	return im.Type == f.ICMPType && (im.Code == nil || *im.Code == f.ICMPCode)
}

func addrMatch(m Model, mt *dataplane.Match, a netip.Addr) bool {
	member := func(id dataplane.SetID) bool { return m.Member(id, a) }
	in := func(n netip.Prefix) bool { return n.Contains(a) }
	if mt.DomainName != "" {
		return false // the pattern's addresses are learnt by the agent at run time, none here
	}
	return !slices.ContainsFunc(mt.Sets, func(id dataplane.SetID) bool { return !member(id) }) &&
		!slices.ContainsFunc(mt.NotSets, member) &&
		(len(mt.Nets) == 0 || slices.ContainsFunc(mt.Nets, in)) &&
		!slices.ContainsFunc(mt.NotNets, in)
}

// portMatch: the port (destination or source) of a is in Ports or NamedPortSets (when either is set) and in
// neither NotPorts nor NotNamedPortSets; numeric ranges with a name are skipped.
func portMatch(m Model, mt *dataplane.Match, a netip.Addr, proto model.Protocol, port uint16) bool {
	in := func(ps []model.Port, sets []dataplane.SetID) bool {
		for _, p := range ps {
			if p.Name == "" && p.First <= port && port <= p.Last {
				return true
			}
		}
		return slices.ContainsFunc(sets, func(id dataplane.SetID) bool { return m.NamedPort(id, a, proto, port) })
	}
	if len(mt.Ports) > 0 || len(mt.NamedPortSets) > 0 {
		if !hasPorts(proto) || !in(mt.Ports, mt.NamedPortSets) {
			return false
		}
	}
	if len(mt.NotPorts) > 0 || len(mt.NotNamedPortSets) > 0 {
		if !hasPorts(proto) || in(mt.NotPorts, mt.NotNamedPortSets) {
			return false
		}
	}
	return true
}

func hasPorts(p model.Protocol) bool {
	return p == model.ProtocolTCP || p == model.ProtocolUDP || p == model.ProtocolSCTP
}
