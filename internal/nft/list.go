package nft

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The listed shape of a group. When every rule that can match in a group's plan allows (no Deny, no
// Pass: a Kubernetes NetworkPolicy tier), the outcome of a packet does not depend on the order of
// the rules — it is allowed if any rule matches, and gets the final outcome (the first tier
// default, else allow) otherwise. Such a group with few rules is compiled into a short list of
// accepting rules whose peer matches are lookups in sets shared by the whole table — one set per
// selector (sel_…), named-port set (np_…), ipBlock (nets_…) and port list (ports_…) — instead of an
// address → class map of its own. A selector's members are then programmed once, not once per group
// that references it, and a pod joining a selector is one element of one set. The packet cost is
// bounded by maxListRules rules of a few lookups each; a group with more rules, or with Deny or
// Pass rules, keeps the map shape, whose cost does not grow with its rules.

// maxListRules bounds the rules of a listed group's chain, hence the lookups of a first packet.
const maxListRules = 8

// listRule is one accepting rule of a listed group; every match it has must hold.
type listRule struct {
	sets, notSets []dataplane.SetID // peer address in each / in none
	nets          []addrRange       // peer address in one of these disjoint ranges (when hasNets)
	hasNets       bool
	proto         model.Protocol  // packet protocol (ProtocolAny: any)
	ports         []portRange     // protocol . destination port in one of these (nil: any)
	namedPorts    dataplane.SetID // destination . protocol . port is a member ("": none)
	domain        string          // peer address in the pattern's set (domainRules; "": none)
	returns       bool            // a Deny's or a Pass's rule of a domain-name prefix: return, not accept
	reason        string
	// the packet's local side (ordered.go; a group compiled against a local address resolves
	// it there): the local address in each of localSets, none of localNotSets, one of
	// localNets (when localHasNets)
	localSets, localNotSets []dataplane.SetID
	localNets               []addrRange
	localHasNets            bool
	// outcome is a non-accepting rule's (ordered.go): goto its class chain; nil: accept
	outcome *Outcome
}

// addrRange is an inclusive range of addresses.
type addrRange struct{ from, to netip.Addr }

// portRange is an inclusive range of destination ports of one protocol.
type portRange struct {
	proto       model.Protocol
	first, last uint16
}

// ruleList is a listed group's compiled form: the rules in evaluation order, then the outcome
// of a packet that none matches.
type ruleList struct {
	rules []listRule
	final Outcome
}

// compileList compiles the tiers of a group into a ruleList, or reports that the group needs
// the map shape (a Deny or Pass rule, a negated port or protocol, or more than maxListRules
// rules). local is an endpoint of the group: the local side of each rule and ingress named
// ports are resolved on it.
func (s *State) compileList(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr, is4 bool) (*ruleList, bool) {
	rl := &ruleList{final: Outcome{Verdict: Allow, Reason: "no policy applies"}}
	if len(tiers) > 0 {
		rl.final = Outcome{Verdict: Allow, Reason: "no tier decided: allow"}
	}
tiers:
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			if neverMatches(r.Rule, is4) || r.Action == model.ActionLog && !s.logs {
				continue
			}
			if r.Action == model.ActionLog {
				return nil, false // a class's outcome logs it (the map shape)
			}
			if r.Action != model.ActionAllow {
				return nil, false
			}
			lrs, ok := s.listRules(dir, r.Rule, local, is4, r.reason()+" (allow)")
			if !ok {
				return nil, false
			}
			for _, lr := range lrs {
				rl.rules = append(rl.rules, lr)
				if len(rl.rules) > maxListRules {
					return nil, false
				}
				if lr.matchesAll() {
					return rl, true // later rules and defaults are never reached
				}
			}
		}
		if o := tierDefault(t); o.Verdict != 0 {
			rl.final = o
			break tiers
		}
	}
	return rl, true
}

// neverMatches reports rules that match no packet of the family: another IP version; ICMP
// type or code with a protocol other than the family's ICMP protocol (or with that protocol
// excluded); a domainNames match, whose addresses only the kernel's timed sets hold, for the
// shapes compiled here (a rule of it matches nothing in them).
func neverMatches(r *dataplane.Rule, is4 bool) bool {
	return r.Src.DomainName != "" || r.Dst.DomainName != "" || offFamily(r, is4)
}

// offFamily reports rules that match no packet of the family by their IP version or ICMP match.
func offFamily(r *dataplane.Rule, is4 bool) bool {
	if r.IPVersion == 4 && !is4 || r.IPVersion == 6 && is4 {
		return true
	}
	if ip := icmpProtocol(is4); (r.ICMP != nil || r.NotICMP != nil) &&
		(r.Protocol != model.ProtocolAny && r.Protocol != ip || r.NotProtocol == ip) {
		return true
	}
	return false
}

// hasSrcPorts reports whether a rule matches source ports.
func hasSrcPorts(r *dataplane.Rule) bool {
	return len(r.Src.Ports) > 0 || len(r.Src.NamedPortSets) > 0 || len(r.Src.NotPorts) > 0 || len(r.Src.NotNamedPortSets) > 0
}

func (lr *listRule) matchesAll() bool {
	return len(lr.sets) == 0 && len(lr.notSets) == 0 && !lr.hasNets && lr.domain == "" && lr.proto == model.ProtocolAny && lr.ports == nil && lr.namedPorts == "" &&
		len(lr.localSets) == 0 && len(lr.localNotSets) == 0 && !lr.localHasNets
}

// listRules turns one allow rule into list rules: one per alternative of its destination port
// (numeric and ingress named ports in one, each egress named-port set in its own), none when it
// can match nothing here. local is the group's local address, on which the local side is
// resolved; an invalid one is the packet's: the local side becomes lookups of the packet's
// local address, and each ingress named-port set an alternative of its own, as egress ones.
func (s *State) listRules(dir model.Direction, r *dataplane.Rule, local netip.Addr, is4 bool, reason string) ([]listRule, bool) {
	if r.NotProtocol != model.ProtocolAny || len(r.Dst.NotPorts) > 0 || len(r.Dst.NotNamedPortSets) > 0 ||
		r.ICMP != nil || r.NotICMP != nil || hasSrcPorts(r) { // the map shape's classes
		return nil, false
	}
	peer, localSide := &r.Src, &r.Dst
	if dir == model.Egress {
		peer, localSide = &r.Dst, &r.Src
	}
	if local.IsValid() && !s.addrMatch(localSide, local) {
		return nil, true
	}
	base := listRule{sets: peer.Sets, notSets: peer.NotSets, reason: reason}
	var ok bool
	if base.nets, base.hasNets, ok = addrRanges(peer, is4); !ok {
		return nil, true
	}
	if !local.IsValid() {
		base.localSets, base.localNotSets = localSide.Sets, localSide.NotSets
		if base.localNets, base.localHasNets, ok = addrRanges(localSide, is4); !ok {
			return nil, true
		}
	}
	protos := portProtocols
	if r.Protocol != model.ProtocolAny {
		protos = []model.Protocol{r.Protocol}
	}
	if len(r.Dst.Ports) == 0 && len(r.Dst.NamedPortSets) == 0 {
		base.proto = r.Protocol
		return []listRule{base}, true
	}
	var out []listRule
	var ports []portRange
	for _, p := range protos {
		if !hasPorts(p) {
			continue
		}
		for _, pt := range r.Dst.Ports {
			if pt.Name == "" {
				ports = append(ports, portRange{p, pt.First, pt.Last})
			}
		}
	}
	for _, id := range r.Dst.NamedPortSets {
		if dir == model.Egress || !local.IsValid() { // resolved on the destination, in the kernel
			lr := base
			lr.namedPorts, lr.proto = id, r.Protocol
			out = append(out, lr)
			continue
		}
		if set := s.Sets[id]; set != nil { // resolved on the local endpoint, here
			for _, m := range set.ports[local] {
				if slices.Contains(protos, m.Protocol) && hasPorts(m.Protocol) {
					ports = append(ports, portRange{m.Protocol, m.Port, m.Port})
				}
			}
		}
	}
	if ports = mergePorts(ports); len(ports) > 0 {
		lr := base
		lr.ports = ports
		out = append([]listRule{lr}, out...)
	}
	return out, true
}

// addrRanges are the ranges of a match's nets of the family, and whether it has any: false
// when every address of the family is in them; ok false when none is.
func addrRanges(m *dataplane.Match, is4 bool) (rs []addrRange, has, ok bool) {
	if len(m.Nets) == 0 && len(m.NotNets) == 0 {
		return nil, false, true
	}
	if rs = netRanges(m.Nets, m.NotNets, is4); len(rs) == 0 {
		return nil, true, false
	}
	if r := rs[0]; len(rs) == 1 && r.from.IsUnspecified() && !r.to.Next().IsValid() {
		return nil, false, true // every address of the family
	}
	return rs, true, true
}

// mergePorts sorts port ranges and joins overlapping and adjacent ones (interval sets must hold
// disjoint elements).
func mergePorts(ps []portRange) []portRange {
	slices.SortFunc(ps, func(a, b portRange) int {
		return cmp.Or(cmp.Compare(a.proto, b.proto), cmp.Compare(a.first, b.first))
	})
	var out []portRange
	for _, p := range ps {
		if n := len(out); n > 0 && out[n-1].proto == p.proto && uint32(p.first) <= uint32(out[n-1].last)+1 {
			out[n-1].last = max(out[n-1].last, p.last)
			continue
		}
		out = append(out, p)
	}
	return out
}

// netRanges is the disjoint range list of the addresses of one family that are in one of nets
// (any address when nets is empty) and in none of notNets.
func netRanges(nets, notNets []netip.Prefix, is4 bool) []addrRange {
	zero, last := netip.IPv4Unspecified(), netip.AddrFrom4([4]byte{255, 255, 255, 255})
	if !is4 {
		zero, last = netip.IPv6Unspecified(), netip.AddrFrom16([16]byte{0: 0xff, 1: 0xff, 2: 0xff, 3: 0xff, 4: 0xff,
			5: 0xff, 6: 0xff, 7: 0xff, 8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 13: 0xff, 14: 0xff, 15: 0xff})
	}
	var fam, famNot []netip.Prefix
	for _, n := range nets {
		if n.Addr().Is4() == is4 {
			fam = append(fam, n.Masked())
		}
	}
	if len(nets) > 0 && len(fam) == 0 {
		return nil
	}
	for _, n := range notNets {
		if n.Addr().Is4() == is4 {
			famNot = append(famNot, n.Masked())
		}
	}
	cuts := []netip.Addr{zero}
	for _, n := range slices.Concat(fam, famNot) {
		cuts = append(cuts, n.Addr())
		if l := lastAddr(n); l != last {
			cuts = append(cuts, l.Next())
		}
	}
	slices.SortFunc(cuts, netip.Addr.Compare)
	cuts = slices.Compact(cuts)
	in := func(a netip.Addr) bool {
		ok := len(fam) == 0
		for _, n := range fam {
			ok = ok || n.Contains(a)
		}
		for _, n := range famNot {
			ok = ok && !n.Contains(a)
		}
		return ok
	}
	var out []addrRange
	for i, from := range cuts {
		to := last
		if i+1 < len(cuts) {
			to = cuts[i+1].Prev()
		}
		if !in(from) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].to.Next() == from {
			out[n-1].to = to
			continue
		}
		out = append(out, addrRange{from, to})
	}
	return out
}

// lookup is what the listed group's chain gives a packet of direction dir between the local
// address local and peer, from the State's memberships (what the shared sets hold). Tests
// compare it with the model.
func (rl *ruleList) lookup(s *State, dir model.Direction, local, peer netip.Addr, proto model.Protocol, port uint16) Outcome {
	local, peer = local.Unmap(), peer.Unmap()
	dst := local
	if dir == model.Egress {
		dst = peer
	}
	for i := range rl.rules {
		if lr := &rl.rules[i]; lr.matches(s, local, peer, dst, proto, port) {
			if lr.outcome != nil {
				return *lr.outcome
			}
			return Outcome{Verdict: Allow, Reason: lr.reason}
		}
	}
	return rl.final
}

func (lr *listRule) matches(s *State, local, peer, dst netip.Addr, proto model.Protocol, port uint16) bool {
	if lr.domain != "" {
		return false // the pattern's addresses are the agent's, none of the State's
	}
	if !addrIn(s, peer, lr.sets, lr.notSets, lr.hasNets, lr.nets) ||
		!addrIn(s, local, lr.localSets, lr.localNotSets, lr.localHasNets, lr.localNets) {
		return false
	}
	if lr.proto != model.ProtocolAny && lr.proto != proto {
		return false
	}
	if lr.ports != nil && !slices.ContainsFunc(lr.ports, func(r portRange) bool {
		return r.proto == proto && r.first <= port && port <= r.last
	}) {
		return false
	}
	return lr.namedPorts == "" || hasPorts(proto) && s.namedPort(lr.namedPorts, dst, proto, port)
}

// addrIn reports whether address a is in each of sets, in none of notSets and, with hasNets,
// in one of nets.
func addrIn(s *State, a netip.Addr, sets, notSets []dataplane.SetID, hasNets bool, nets []addrRange) bool {
	for _, id := range sets {
		if !s.member(id, a) {
			return false
		}
	}
	for _, id := range notSets {
		if s.member(id, a) {
			return false
		}
	}
	return !hasNets || slices.ContainsFunc(nets, func(r addrRange) bool {
		return r.from.Compare(a) <= 0 && a.Compare(r.to) <= 0
	})
}

// describePorts is a port list for a set's comment: "tcp 80, 8000-8100; udp 53".
func describePorts(ps []portRange) string {
	var b strings.Builder
	for i, p := range ps {
		switch {
		case i == 0:
		case ps[i-1].proto != p.proto:
			b.WriteString("; ")
		default:
			b.WriteString(", ")
		}
		if i == 0 || ps[i-1].proto != p.proto {
			b.WriteString(p.proto.String() + " ")
		}
		if p.first == p.last {
			fmt.Fprintf(&b, "%d", p.first)
		} else {
			fmt.Fprintf(&b, "%d-%d", p.first, p.last)
		}
	}
	return b.String()
}
