package nft

import (
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Evaluate is the model's outcome for one packet (graphtest.Evaluate over the State's policies,
// as it enforces them, and sets), with the reason the compiled structures give it: the one that
// every compiled shape must equal. sport and port are the source and destination ports, for
// ICMP and ICMPv6 port is the ICMPKey, as Decision.Lookup takes them.
func (s *State) Evaluate(dir model.Direction, tiers []dataplane.TierPolicies, local, peer netip.Addr, proto model.Protocol, sport, port uint16) Outcome {
	f := graphtest.Flow{Proto: proto, SrcPort: sport, DstPort: port}
	if proto == model.ProtocolICMP || proto == model.ProtocolICMPv6 {
		f = graphtest.Flow{Proto: proto, ICMPType: uint8(port >> 8), ICMPCode: uint8(port)}
	}
	d := graphtest.Evaluate(stateModel{s}, dir, tiers, local, peer, f)
	o := s.decision(dir, tiers, d)
	if s.logs {
		for _, l := range d.Logs {
			o.Logs += policyRule{Rule: l.Rule, policy: l.Policy, dir: dir, index: l.Index}.reason() + " (log)\n"
		}
	}
	return o
}

// decision is the outcome of graphtest's decision d, without its logs.
func (s *State) decision(dir model.Direction, tiers []dataplane.TierPolicies, d graphtest.Decision) Outcome {
	switch {
	case d.Rule != nil:
		r := policyRule{Rule: d.Rule, policy: d.Policy, dir: dir, index: d.Index}
		if d.Allow {
			return Outcome{Verdict: Allow, Reason: r.reason() + " (allow)"}
		}
		return Outcome{Verdict: Deny, Reason: r.reason() + " (deny)"}
	case d.Tier != nil:
		return tierDefault(*d.Tier)
	case len(tiers) == 0:
		return Outcome{Verdict: Allow, Reason: "no policy applies"}
	}
	return Outcome{Verdict: Allow, Reason: "no tier decided: allow"}
}

// stateModel is a State as graphtest.Evaluate reads it.
type stateModel struct{ s *State }

func (m stateModel) Rules(key model.PolicyKey, dir model.Direction) []dataplane.Rule {
	return m.s.policyRules(key, dir)
}

func (m stateModel) Member(id dataplane.SetID, a netip.Addr) bool { return m.s.member(id, a) }

func (m stateModel) NamedPort(id dataplane.SetID, a netip.Addr, proto model.Protocol, port uint16) bool {
	return m.s.namedPort(id, a, proto, port)
}
