package nft

import (
	"net/netip"
	"slices"
	"sort"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// plan is the rule list of one group and direction, flattened in evaluation order and indexed by
// the set that gates each rule (the first set its peer side requires), so that compiling a peer
// looks only at the rules that can match it: the ungated ones and those gated by a set holding it.
type plan struct {
	s     *State
	dir   model.Direction
	tiers []graph.TierPolicies
	// defaults[i] is tier i's default outcome (Verdict 0 for Pass), built once: its reason names
	// the tier's policies, which costs as much as the tier is long.
	defaults []Outcome
	rules    []flatRule
	ungated  []int
	gated    map[graph.SetID][]int
	gateIDs  []graph.SetID // the keys of gated, sorted
	// gates indexes peer address → gate sets holding it, built only for plans with more than
	// State.gateIndexMin gate sets (P1's 10,000); smaller plans ask their few sets directly,
	// which keeps no per-peer state for the thousands of groups of a large cluster.
	gates  map[netip.Addr][]graph.SetID
	protos []model.Protocol // non-port protocols that rules name
}

type flatRule struct {
	tier    int
	outcome Outcome // for Allow and Deny rules
	r       *graph.Rule
}

func (s *State) newPlan(dir model.Direction, tiers []graph.TierPolicies) *plan {
	pl := &plan{s: s, dir: dir, tiers: tiers, gated: map[graph.SetID][]int{}}
	seenProto := map[model.Protocol]bool{}
	for ti, t := range tiers {
		pl.defaults = append(pl.defaults, tierDefault(t))
		for r := range s.tierRules(dir, t) {
			reason := r.reason()
			pos := len(pl.rules)
			fr := flatRule{tier: ti, r: r.Rule}
			switch r.Action {
			case model.ActionAllow:
				fr.outcome = Outcome{Allow, reason + " (allow)"}
			case model.ActionDeny:
				fr.outcome = Outcome{Deny, reason + " (deny)"}
			}
			pl.rules = append(pl.rules, fr)
			peer := &r.Src
			if dir == model.Egress {
				peer = &r.Dst
			}
			if len(peer.Sets) > 0 {
				pl.gated[peer.Sets[0]] = append(pl.gated[peer.Sets[0]], pos)
			} else {
				pl.ungated = append(pl.ungated, pos)
			}
			for _, pr := range []model.Protocol{r.Protocol, r.NotProtocol} {
				if pr != model.ProtocolAny && !hasPorts(pr) && !seenProto[pr] {
					seenProto[pr] = true
					pl.protos = append(pl.protos, pr)
				}
			}
		}
	}
	sort.Slice(pl.protos, func(i, j int) bool { return pl.protos[i] < pl.protos[j] })
	for id := range pl.gated {
		pl.gateIDs = append(pl.gateIDs, id)
	}
	slices.Sort(pl.gateIDs)
	if len(pl.gateIDs) > s.gateIndexMin {
		pl.gates = map[netip.Addr][]graph.SetID{}
		for _, id := range pl.gateIDs {
			if set := s.Sets[id]; set != nil {
				for _, is4 := range []bool{true, false} {
					for a := range set.addresses(is4) {
						pl.gates[a] = append(pl.gates[a], id)
					}
				}
			}
		}
	}
	return pl
}

// gatesOf lists the gate sets holding a peer address.
func (pl *plan) gatesOf(peer netip.Addr) []graph.SetID {
	if pl.gates != nil {
		return pl.gates[peer]
	}
	var out []graph.SetID
	for _, id := range pl.gateIDs {
		if pl.s.member(id, peer) {
			out = append(out, id)
		}
	}
	return out
}

// candidates lists, in evaluation order, the rules that may match a peer.
func (pl *plan) candidates(peer netip.Addr, known bool) []int {
	if !known {
		return pl.ungated
	}
	gates := pl.gatesOf(peer)
	if len(gates) == 0 {
		return pl.ungated
	}
	out := append([]int(nil), pl.ungated...)
	for _, id := range gates {
		out = append(out, pl.gated[id]...)
	}
	sort.Ints(out)
	return out
}

// eval is State.eval restricted to the candidate rules (the others cannot match the packet).
func (pl *plan) eval(cand []int, p packet) Outcome {
	i := 0
	for ti := range pl.tiers {
		passed := false
		for ; i < len(cand) && pl.rules[cand[i]].tier == ti; i++ {
			fr := &pl.rules[cand[i]]
			if passed || !pl.s.matches(pl.dir, fr.r, p) {
				continue
			}
			switch fr.r.Action {
			case model.ActionAllow, model.ActionDeny:
				return fr.outcome
			case model.ActionPass:
				passed = true
			}
		}
		if passed {
			continue
		}
		if o := pl.defaults[ti]; o.Verdict != 0 {
			return o
		}
	}
	if len(pl.tiers) == 0 {
		return Outcome{Allow, "no policy applies"}
	}
	return Outcome{Allow, "no tier decided: allow"}
}

// portCuts lists the port boundaries of the candidate rules for the packet's protocol.
func (pl *plan) portCuts(cand []int, p packet) []uint32 {
	cuts := map[uint32]struct{}{0: {}}
	addRange := func(ps []model.Port) {
		for _, pt := range ps {
			if pt.Name == "" {
				cuts[uint32(pt.First)] = struct{}{}
				cuts[uint32(pt.Last)+1] = struct{}{}
			}
		}
	}
	dst := p.local
	if pl.dir == model.Egress {
		dst = p.peer
	}
	addNamed := func(ids []graph.SetID) {
		for _, id := range ids {
			if set := pl.s.Sets[id]; set != nil {
				for _, m := range set.ports[dst] {
					if m.Protocol == p.proto {
						cuts[uint32(m.Port)] = struct{}{}
						cuts[uint32(m.Port)+1] = struct{}{}
					}
				}
			}
		}
	}
	for _, i := range cand {
		r := pl.rules[i].r
		addRange(r.Dst.Ports)
		addRange(r.Dst.NotPorts)
		addNamed(r.Dst.NamedPortSets)
		addNamed(r.Dst.NotNamedPortSets)
	}
	out := make([]uint32, 0, len(cuts))
	for c := range cuts {
		if c <= 65535 {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
