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
	switch {
	case d.Rule != nil:
		r := policyRule{Rule: d.Rule, policy: d.Policy, dir: dir, index: d.Index}
		if d.Allow {
			return Outcome{Allow, r.reason() + " (allow)"}
		}
		return Outcome{Deny, r.reason() + " (deny)"}
	case d.Tier != nil:
		return tierDefault(*d.Tier)
	case len(tiers) == 0:
		return Outcome{Allow, "no policy applies"}
	}
	return Outcome{Allow, "no tier decided: allow"}
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
