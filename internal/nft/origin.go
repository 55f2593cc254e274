package nft

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// OriginKind says what decided a packet.
type OriginKind uint8

const (
	// OriginRule: an Allow or Deny rule of a policy.
	OriginRule OriginKind = iota + 1
	// OriginTierDefault: no rule of a tier's policies decided, and the tier's default did.
	OriginTierDefault
	// OriginNoPolicy: no policy applies to the endpoint in the direction: allowed.
	OriginNoPolicy
	// OriginNoTierDecided: every tier passed: allowed after the last one.
	OriginNoTierDecided
	// OriginRejected: a policy the dataplane does not enforce as written (its compile was over
	// budget, or the kernel refused it) denied in its place.
	OriginRejected
	// OriginUnknown: a reason none of the endpoint's tiers gives (a group that cannot be
	// compiled within budget denies everything).
	OriginUnknown
)

func (k OriginKind) String() string {
	switch k {
	case OriginRule:
		return "rule"
	case OriginTierDefault:
		return "tier default"
	case OriginNoPolicy:
		return "no policy"
	case OriginNoTierDecided:
		return "no tier decided"
	case OriginRejected:
		return "rejected policy"
	}
	return "unknown"
}

// Origin is what the reason of an outcome names, in the terms of the policy model.
type Origin struct {
	Kind      OriginKind
	Direction model.Direction
	Tier      string
	// Policy is the policy of a rule (OriginRule, OriginRejected).
	Policy model.PolicyKey
	// Rule is the rule's index among the policy's rules of Direction, as written (OriginRule).
	Rule int
	// Action is the rule's action, or the tier's default action (OriginTierDefault).
	Action model.Action
	// Policies are the tier's policies that apply, in order (OriginTierDefault).
	Policies []model.PolicyKey
}

// origin finds what reason names among the rules and defaults of tiers, the policies of one
// endpoint and direction: the reverse of the reasons the compiler attaches to outcomes (policyRule
// reason, tierDefault), compared whole. It costs one walk of the tiers' rules.
func (s *State) origin(dir model.Direction, tiers []dataplane.TierPolicies, reason string) Origin {
	o := Origin{Direction: dir}
	switch {
	case len(tiers) == 0:
		o.Kind = OriginNoPolicy
		return o
	case reason == (Outcome{Verdict: Allow, Reason: "no tier decided: allow"}).Reason:
		o.Kind = OriginNoTierDecided
		return o
	}
	for _, t := range tiers {
		o.Tier = t.Tier
		for r := range s.tierRules(dir, t) {
			var action string
			switch r.Action {
			case model.ActionAllow:
				action = " (allow)"
			case model.ActionDeny:
				action = " (deny)"
			default:
				continue
			}
			if r.reason()+action != reason {
				continue
			}
			o.Policy, o.Action = r.policy, r.Action
			if _, rejected := s.rejected[r.policy]; rejected {
				o.Kind = OriginRejected
				return o
			}
			o.Kind, o.Rule = OriginRule, r.Index
			return o
		}
		if d := tierDefault(t); d.Verdict != 0 && d.Reason == reason {
			o.Kind, o.Action, o.Policies = OriginTierDefault, t.DefaultAction, t.Policies
			return o
		}
	}
	return Origin{Kind: OriginUnknown, Direction: dir}
}

// Decided is the dataplane's decision for one local endpoint address and direction: what its
// group's compiled structure gives a packet, and what that outcome's reason names.
type Decided struct {
	Endpoint model.EndpointKey
	// Tiers are the endpoint's tiers and policies of the direction, in evaluation order (none:
	// no policy applies).
	Tiers   []dataplane.TierPolicies
	Group   string // the group chain the dispatch element leads to; "" without policy
	Outcome Outcome
	Origin  Origin
}

// Decide looks up what the table does with the first packet of a connection in direction dir
// between a local endpoint's address local and peer: the compiled decision of the endpoint's
// group (its listed rules over the State's sets, or its Decision), as the kernel looks it up, and
// the origin of its reason; sport and port are the packet's source and destination ports (for
// ICMP and ICMPv6 port is its ICMPKey). It reports false when no local endpoint holds local. Call
// it after an apply, from the goroutine that applies.
func (b *Builder) Decide(dir model.Direction, local, peer netip.Addr, proto model.Protocol, sport, port uint16) (Decided, bool) {
	local, peer = local.Unmap(), peer.Unmap()
	key, ok := b.index.localAddrs[local]
	e := b.layout.endpoints[key]
	if !ok || e == nil {
		return Decided{}, false
	}
	return b.decide(key, e, dispatchKey{dir: dir, addr: local}, local, peer, proto, sport, port), true
}

// DecideHost is Decide for host endpoint key and the node's address local, whose dispatch
// element is keyed by the endpoint's interface (host.go) as well: several host endpoints hold
// each node address, one per interface. It reports false when key is no local host endpoint
// holding local.
func (b *Builder) DecideHost(dir model.Direction, key model.EndpointKey, local, peer netip.Addr, proto model.Protocol, sport, port uint16) (Decided, bool) {
	local, peer = local.Unmap(), peer.Unmap()
	e := b.layout.endpoints[key]
	if e == nil || !e.msg.Host || !slices.Contains(e.msg.Addrs, local) {
		return Decided{}, false
	}
	return b.decide(key, e, dispatchKey{dir: dir, addr: local, ifname: e.msg.Interface}, local, peer, proto, sport, port), true
}

// Stage is a host endpoint stage, as DecideStage and HostStageChain take it.
type Stage = dataplane.Stage

// The host endpoint stages before the node's own policy, and the forward stage
// (applyOnForward, traffic forwarded through the node), which Builder.DecideStage decides.
const (
	StageUntracked = dataplane.StageUntracked
	StagePreDNAT   = dataplane.StagePreDNAT
	StageForward   = dataplane.StageForward
)

// HostStageChain is the base chain of the table that dispatches stage st's direction dir.
func HostStageChain(st Stage, dir model.Direction) string { return stageChain(st, dir) }

// Undecided reports whether o leaves the packet to the next host endpoint stage.
func (o Outcome) Undecided() bool { return o.Reason == reasonUndecided }

// decide is the decision of endpoint e's group at dispatch element dk for a packet between
// the local address local and peer.
func (b *Builder) decide(key model.EndpointKey, e *endpoint, dk dispatchKey, local, peer netip.Addr, proto model.Protocol, sport, port uint16) Decided {
	dir := dk.dir
	out := Decided{Endpoint: key, Tiers: e.msg.Tiers(dk.stage, dir)}
	g := b.layout.groups[e.groups[dk]]
	switch {
	case dk.stage != dataplane.StageLocal && (len(out.Tiers) == 0 || g == nil):
		out.Outcome = Outcome{Verdict: Allow, Reason: reasonUndecided}
	case len(out.Tiers) == 0 || g == nil:
		out.Outcome = Outcome{Verdict: Allow, Reason: "no policy applies"}
	case g.listed:
		out.Group, out.Outcome = g.name, b.state.listOf(g).lookup(b.state, dir, local, peer, proto, port)
	case g.compiled == nil: // the union shape: the same decision as the plan's
		out.Group, out.Outcome = g.name, b.state.Compile(g.dir, g.tiers, g.sample(), g.is4).Lookup(peer, proto, sport, port)
	default:
		out.Group, out.Outcome = g.name, g.compiled.Lookup(peer, proto, sport, port)
	}
	out.Origin = b.state.origin(dir, out.Tiers, out.Outcome.Reason)
	return out
}
