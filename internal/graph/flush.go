package graph

import (
	"cmp"
	"reflect"
	"slices"
	"sort"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Flush returns the messages that bring the dataplane from the state of the previous Flush to
// the current one, in the dependency order of internal/dataplane. Before the first
// SyncStatusUpdate{InSync} it returns nothing (changes accumulate); the first flush after it
// returns the full state followed by InSync{}.
func (g *Graph) Flush() []dataplane.Message {
	if !g.inSync {
		return nil
	}
	var out []dataplane.Message

	// Sets added or changed.
	setIDs := sortedKeys(g.dirtySets)
	var removedSets []dataplane.SetID
	for _, id := range setIDs {
		s := g.sets[id]
		_, sent := g.sentSets[id]
		if s == nil {
			if sent {
				removedSets = append(removedSets, id)
				delete(g.sentSets, id)
			}
			continue
		}
		switch {
		case s.fresh || !sent || len(s.delta) > s.size:
			ms := s.members(g)
			s.size = len(ms)
			out = append(out, dataplane.SetReplaced{ID: id, Kind: s.kind, Description: s.desc, Members: ms})
		case len(s.delta) > 0:
			var mc dataplane.SetMembersChanged
			mc.ID = id
			for mb, in := range s.delta {
				if in {
					mc.Added = append(mc.Added, mb)
				} else {
					mc.Removed = append(mc.Removed, mb)
				}
			}
			sortMembers(mc.Added)
			sortMembers(mc.Removed)
			out = append(out, mc)
		}
		s.fresh = false
		s.delta = nil
		g.sentSets[id] = struct{}{}
	}
	clear(g.dirtySets)

	// Policies updated.
	pkeys := make([]model.PolicyKey, 0, len(g.dirtyPolicies))
	for k := range g.dirtyPolicies {
		pkeys = append(pkeys, k)
	}
	sortPolicyKeys(pkeys)
	var removedPolicies []model.PolicyKey
	for _, k := range pkeys {
		p := g.policies[k]
		sent := g.sentPolicies[k]
		if p == nil || !p.active {
			if sent != nil {
				removedPolicies = append(removedPolicies, k)
				delete(g.sentPolicies, k)
			}
			continue
		}
		msg := &dataplane.PolicyUpdated{Key: k, Tier: p.m.Tier, Ingress: p.ingress, Egress: p.egress}
		if sent != nil && reflect.DeepEqual(sent, msg) {
			continue
		}
		g.sentPolicies[k] = msg
		out = append(out, *msg)
	}
	clear(g.dirtyPolicies)

	// Endpoints updated.
	ekeys := make([]model.EndpointKey, 0, len(g.dirtyEndpoints))
	for k := range g.dirtyEndpoints {
		ekeys = append(ekeys, k)
	}
	slices.SortFunc(ekeys, func(a, b model.EndpointKey) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var removedEndpoints []model.EndpointKey
	for _, k := range ekeys {
		e := g.local[k]
		sent := g.sentEndpoints[k]
		if e == nil {
			if sent != nil {
				removedEndpoints = append(removedEndpoints, k)
				delete(g.sentEndpoints, k)
			}
			continue
		}
		msg := g.resolve(e)
		if sent != nil && reflect.DeepEqual(sent, msg) {
			continue
		}
		g.sentEndpoints[k] = msg
		out = append(out, *msg)
	}
	clear(g.dirtyEndpoints)

	for _, k := range removedEndpoints {
		out = append(out, dataplane.EndpointRemoved{Key: k})
	}
	for _, k := range removedPolicies {
		out = append(out, dataplane.PolicyRemoved{Key: k})
	}
	for _, id := range removedSets {
		out = append(out, dataplane.SetRemoved{ID: id})
	}
	if !g.sentInSync {
		g.sentInSync = true
		out = append(out, dataplane.InSync{})
	}
	return out
}

// resolve is the policy resolver: the endpoint's message with the addresses it owns
// (owner.go) and, per direction, the tiers in order holding the active policies that select it,
// in (Order, Key) order.
func (g *Graph) resolve(e *endpoint) *dataplane.EndpointUpdated {
	msg := &dataplane.EndpointUpdated{Key: e.key()}
	for a := range e.net.addrs() {
		if g.owns(e, a) {
			msg.Addrs = append(msg.Addrs, a)
		}
	}
	for _, a := range msg.Addrs {
		if ifc, ok := g.routes[a]; ok {
			msg.Interface = ifc
			break
		}
	}
	var ps []*policy
	for _, m := range e.matches.all() {
		for p := range m.policies {
			if p.active {
				ps = append(ps, p)
			}
		}
	}
	if len(ps) == 0 {
		return msg
	}
	sort.Slice(ps, func(i, j int) bool {
		ti, tj := g.tiers[ps[i].m.Tier], g.tiers[ps[j].m.Tier]
		if ti.Order != tj.Order {
			return ti.Order < tj.Order
		}
		if ti.Name != tj.Name {
			return ti.Name < tj.Name
		}
		if ps[i].m.Order != ps[j].m.Order {
			return ps[i].m.Order < ps[j].m.Order
		}
		return ps[i].key.String() < ps[j].key.String()
	})
	build := func(apply func(*policy) bool) []dataplane.TierPolicies {
		var out []dataplane.TierPolicies
		for _, p := range ps {
			if !apply(p) {
				continue
			}
			if n := len(out); n == 0 || out[n-1].Tier != p.m.Tier {
				t := g.tiers[p.m.Tier]
				out = append(out, dataplane.TierPolicies{Tier: t.Name, DefaultAction: t.DefaultAction})
			}
			tp := &out[len(out)-1]
			tp.Policies = append(tp.Policies, p.key)
		}
		return out
	}
	msg.Ingress = build(func(p *policy) bool { return p.m.ApplyIngress })
	msg.Egress = build(func(p *policy) bool { return p.m.ApplyEgress })
	return msg
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func sortPolicyKeys(ks []model.PolicyKey) {
	slices.SortFunc(ks, func(a, b model.PolicyKey) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// CompareMembers orders members by address, protocol, port.
func CompareMembers(a, b dataplane.Member) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
}

func sortMembers(ms []dataplane.Member) { slices.SortFunc(ms, CompareMembers) }
