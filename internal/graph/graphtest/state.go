// Package graphtest is test support for internal/graph and its consumers: State folds the
// graph's messages into the dataplane state they describe, checking referential integrity on
// every message (nothing referenced before it exists, nothing removed while referenced).
// Evaluate is the reference evaluator of the policy model over any such state (Model) — the
// oracle of the graph's tests (State.Allowed) and of the nft compiler's, which judge a packet
// by it.
package graphtest

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Set is a set as the dataplane holds it.
type Set struct {
	Kind        dataplane.SetKind
	Description string
	Members     map[dataplane.Member]struct{}
}

// State is the dataplane state built from messages.
type State struct {
	Sets      map[dataplane.SetID]*Set
	Policies  map[model.PolicyKey]dataplane.PolicyUpdated
	Endpoints map[model.EndpointKey]dataplane.EndpointUpdated
	InSync    bool
}

// NewState returns an empty state.
func NewState() *State {
	return &State{
		Sets:      map[dataplane.SetID]*Set{},
		Policies:  map[model.PolicyKey]dataplane.PolicyUpdated{},
		Endpoints: map[model.EndpointKey]dataplane.EndpointUpdated{},
	}
}

func ruleSets(r *dataplane.Rule) []dataplane.SetID {
	var ids []dataplane.SetID
	for _, m := range []*dataplane.Match{&r.Src, &r.Dst} {
		ids = append(ids, m.Sets...)
		ids = append(ids, m.NotSets...)
		ids = append(ids, m.NamedPortSets...)
		ids = append(ids, m.NotNamedPortSets...)
	}
	return ids
}

func (s *State) checkRuleSets(p *dataplane.PolicyUpdated) error {
	for _, rules := range [][]dataplane.Rule{p.Ingress, p.Egress} {
		for i := range rules {
			r := &rules[i]
			for _, m := range []*dataplane.Match{&r.Src, &r.Dst} {
				for _, ids := range []struct {
					ids  []dataplane.SetID
					kind dataplane.SetKind
				}{{m.Sets, dataplane.SetAddrs}, {m.NotSets, dataplane.SetAddrs}, {m.NamedPortSets, dataplane.SetNamedPorts}, {m.NotNamedPortSets, dataplane.SetNamedPorts}} {
					for _, id := range ids.ids {
						set := s.Sets[id]
						if set == nil {
							return fmt.Errorf("policy %s rule %q references missing set %s", p.Key, r.Comment, id)
						}
						if set.Kind != ids.kind {
							return fmt.Errorf("policy %s rule %q references set %s of kind %d as kind %d", p.Key, r.Comment, id, set.Kind, ids.kind)
						}
					}
				}
			}
		}
	}
	return nil
}

// Apply folds one message into the state, or returns an integrity error (and leaves the state
// unchanged).
func (s *State) Apply(msg dataplane.Message) error {
	switch m := msg.(type) {
	case dataplane.SetReplaced:
		return s.replaceSet(m)
	case dataplane.SetMembersChanged:
		return s.changeMembers(m)
	case dataplane.SetRemoved:
		return s.removeSet(m)
	case dataplane.PolicyUpdated:
		if err := s.checkRuleSets(&m); err != nil {
			return err
		}
		s.Policies[m.Key] = m
	case dataplane.PolicyRemoved:
		return s.removePolicy(m)
	case dataplane.EndpointUpdated:
		return s.updateEndpoint(m)
	case dataplane.EndpointRemoved:
		if _, ok := s.Endpoints[m.Key]; !ok {
			return fmt.Errorf("removing missing endpoint %s", m.Key)
		}
		delete(s.Endpoints, m.Key)
	case dataplane.InSync:
		if s.InSync {
			return fmt.Errorf("second InSync")
		}
		s.InSync = true
	default:
		return fmt.Errorf("unknown message %T", msg)
	}
	return nil
}

func (s *State) replaceSet(m dataplane.SetReplaced) error {
	if old := s.Sets[m.ID]; old != nil && old.Kind != m.Kind {
		return fmt.Errorf("set %s replaced with another kind", m.ID)
	}
	set := &Set{Kind: m.Kind, Description: m.Description, Members: map[dataplane.Member]struct{}{}}
	for _, mb := range m.Members {
		if _, dup := set.Members[mb]; dup {
			return fmt.Errorf("set %s: duplicate member %v", m.ID, mb)
		}
		set.Members[mb] = struct{}{}
	}
	s.Sets[m.ID] = set
	return nil
}

func (s *State) changeMembers(m dataplane.SetMembersChanged) error {
	set := s.Sets[m.ID]
	if set == nil {
		return fmt.Errorf("members of missing set %s changed", m.ID)
	}
	if len(m.Added) == 0 && len(m.Removed) == 0 {
		return fmt.Errorf("empty change of set %s", m.ID)
	}
	for _, mb := range m.Removed {
		if _, ok := set.Members[mb]; !ok {
			return fmt.Errorf("set %s: removing absent member %v", m.ID, mb)
		}
	}
	for _, mb := range m.Added {
		if _, ok := set.Members[mb]; ok {
			return fmt.Errorf("set %s: adding present member %v", m.ID, mb)
		}
	}
	for _, mb := range m.Removed {
		delete(set.Members, mb)
	}
	for _, mb := range m.Added {
		set.Members[mb] = struct{}{}
	}
	return nil
}

func (s *State) removeSet(m dataplane.SetRemoved) error {
	if s.Sets[m.ID] == nil {
		return fmt.Errorf("removing missing set %s", m.ID)
	}
	for _, p := range s.Policies {
		for _, rules := range [][]dataplane.Rule{p.Ingress, p.Egress} {
			for i := range rules {
				if slices.Contains(ruleSets(&rules[i]), m.ID) {
					return fmt.Errorf("removing set %s still referenced by %s", m.ID, p.Key)
				}
			}
		}
	}
	delete(s.Sets, m.ID)
	return nil
}

func (s *State) removePolicy(m dataplane.PolicyRemoved) error {
	if _, ok := s.Policies[m.Key]; !ok {
		return fmt.Errorf("removing missing policy %s", m.Key)
	}
	for _, e := range s.Endpoints {
		for _, tiers := range [][]dataplane.TierPolicies{e.Ingress, e.Egress} {
			for _, t := range tiers {
				if slices.Contains(t.Policies, m.Key) {
					return fmt.Errorf("removing policy %s still referenced by endpoint %s", m.Key, e.Key)
				}
			}
		}
	}
	delete(s.Policies, m.Key)
	return nil
}

func (s *State) updateEndpoint(m dataplane.EndpointUpdated) error {
	for _, tiers := range [][]dataplane.TierPolicies{m.Ingress, m.Egress} {
		for _, t := range tiers {
			if len(t.Policies) == 0 {
				return fmt.Errorf("endpoint %s lists empty tier %s", m.Key, t.Tier)
			}
			for _, k := range t.Policies {
				p, ok := s.Policies[k]
				if !ok {
					return fmt.Errorf("endpoint %s references missing policy %s", m.Key, k)
				}
				if p.Tier != t.Tier {
					return fmt.Errorf("endpoint %s lists policy %s (tier %s) under tier %s", m.Key, k, p.Tier, t.Tier)
				}
			}
		}
	}
	s.Endpoints[m.Key] = m
	return nil
}

// ApplyAll applies one flush's messages in order, checking the order of kinds within it too,
// and that after it no two endpoints list one address (each address has one owner).
func (s *State) ApplyAll(msgs []dataplane.Message) error {
	last := -1
	for i, m := range msgs {
		r := rank(m)
		if r < last {
			return fmt.Errorf("message %d (%T) out of dependency order", i, m)
		}
		last = r
		if err := s.Apply(m); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	owner := map[netip.Addr]model.EndpointKey{}
	for k, e := range s.Endpoints {
		for _, a := range e.Addrs {
			if o, ok := owner[a]; ok {
				return fmt.Errorf("endpoints %s and %s both list address %s", o, k, a)
			}
			owner[a] = k
		}
	}
	return nil
}

func rank(m dataplane.Message) int {
	switch m.(type) {
	case dataplane.SetReplaced, dataplane.SetMembersChanged:
		return 0
	case dataplane.PolicyUpdated:
		return 1
	case dataplane.EndpointUpdated:
		return 2
	case dataplane.EndpointRemoved:
		return 3
	case dataplane.PolicyRemoved:
		return 4
	case dataplane.SetRemoved:
		return 5
	}
	return 6
}

// Dump renders the state canonically (for comparing states and for readable failures). Set
// IDs are shown with their descriptions.
func (s *State) Dump() string {
	var b strings.Builder
	ids := make([]string, 0, len(s.Sets))
	for id := range s.Sets {
		ids = append(ids, string(id))
	}
	sort.Strings(ids)
	for _, id := range ids {
		set := s.Sets[dataplane.SetID(id)]
		ms := make([]dataplane.Member, 0, len(set.Members))
		for mb := range set.Members {
			ms = append(ms, mb)
		}
		slices.SortFunc(ms, graph.CompareMembers)
		fmt.Fprintf(&b, "set %s kind=%d %q:", id, set.Kind, set.Description)
		for _, mb := range ms {
			if mb.Port != 0 || mb.Protocol != 0 {
				fmt.Fprintf(&b, " %s/%s/%d", mb.Addr, mb.Protocol, mb.Port)
			} else {
				fmt.Fprintf(&b, " %s", mb.Addr)
			}
		}
		b.WriteByte('\n')
	}
	pks := make([]model.PolicyKey, 0, len(s.Policies))
	for k := range s.Policies {
		pks = append(pks, k)
	}
	sort.Slice(pks, func(i, j int) bool { return pks[i].String() < pks[j].String() })
	for _, k := range pks {
		fmt.Fprintf(&b, "policy %+v\n", s.Policies[k])
	}
	eks := make([]model.EndpointKey, 0, len(s.Endpoints))
	for k := range s.Endpoints {
		eks = append(eks, k)
	}
	sort.Slice(eks, func(i, j int) bool { return eks[i].String() < eks[j].String() })
	for _, k := range eks {
		fmt.Fprintf(&b, "endpoint %+v\n", s.Endpoints[k])
	}
	fmt.Fprintf(&b, "insync %v\n", s.InSync)
	return b.String()
}

// Packet is the first packet of a connection.
type Packet struct {
	Src, Dst           netip.Addr
	Proto              model.Protocol
	SrcPort, DstPort   uint16
	ICMPType, ICMPCode uint8
}

// Flow is what Evaluate reads of p besides its addresses.
func (p Packet) Flow() Flow {
	return Flow{Proto: p.Proto, SrcPort: p.SrcPort, DstPort: p.DstPort, ICMPType: p.ICMPType, ICMPCode: p.ICMPCode}
}

// Allowed decides a packet by the state: the egress policies of the source (if it is a local
// endpoint) and the ingress policies of the destination (if it is one) must both allow it.
func (s *State) Allowed(p Packet) bool {
	for _, e := range s.endpointsByAddr(p.Src) {
		if !s.Decide(model.Egress, e.Egress, p) {
			return false
		}
	}
	for _, e := range s.endpointsByAddr(p.Dst) {
		if !s.Decide(model.Ingress, e.Ingress, p) {
			return false
		}
	}
	return true
}

func (s *State) endpointsByAddr(a netip.Addr) []dataplane.EndpointUpdated {
	var out []dataplane.EndpointUpdated
	for _, e := range s.Endpoints {
		if slices.Contains(e.Addrs, a) {
			out = append(out, e)
		}
	}
	return out
}

// Decide evaluates one direction's tier list for a packet (Evaluate): for egress the source is
// the local endpoint, for ingress the destination.
func (s *State) Decide(dir model.Direction, tiers []dataplane.TierPolicies, p Packet) bool {
	local, peer := p.Dst, p.Src
	if dir == model.Egress {
		local, peer = p.Src, p.Dst
	}
	return Evaluate(s, dir, tiers, local, peer, p.Flow()).Allow
}

// Rules returns a held policy's rules in one direction (Model).
func (s *State) Rules(key model.PolicyKey, dir model.Direction) []dataplane.Rule {
	pol := s.Policies[key]
	if dir == model.Egress {
		return pol.Egress
	}
	return pol.Ingress
}

// Member reports whether a is a member of address set id (Model).
func (s *State) Member(id dataplane.SetID, a netip.Addr) bool {
	return s.member(id, dataplane.Member{Addr: a})
}

// NamedPort reports whether (a, proto, port) is a member of named-port set id (Model).
func (s *State) NamedPort(id dataplane.SetID, a netip.Addr, proto model.Protocol, port uint16) bool {
	return s.member(id, dataplane.Member{Addr: a, Protocol: proto, Port: port})
}

func (s *State) member(id dataplane.SetID, mb dataplane.Member) bool {
	set := s.Sets[id]
	if set == nil {
		return false
	}
	_, ok := set.Members[mb]
	return ok
}
