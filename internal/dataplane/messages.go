package dataplane

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// The messages, in the order internal/graph's Flush returns them:
//
//	SetReplaced / SetMembersChanged → PolicyUpdated → EndpointUpdated → EndpointRemoved →
//	PolicyRemoved → SetRemoved → InSync (once, the first flush after the sources are in sync)
//
// so nothing is referenced before it exists and nothing is removed while referenced. Within a
// flush, messages are coalesced: at most one message per object, carrying its final state.

// Message is one dataplane instruction.
type Message interface{ isMessage() }

// SetID identifies a set computed from one normalised selector (plus, for named-port sets, the
// port name and protocol). Equal selectors in different policies share one SetID. IDs are short,
// stable across restarts and safe to embed in nftables object names ([a-z0-9_]).
type SetID string

// SetKind says what a set's members are.
type SetKind uint8

const (
	// SetAddrs: members are endpoint addresses (Member.Addr only).
	SetAddrs SetKind = iota
	// SetNamedPorts: members are endpoint address . protocol . port, one per endpoint that
	// declares the named port.
	SetNamedPorts
)

// Member is one element of a set. Protocol and Port are zero for SetAddrs.
type Member struct {
	Addr     netip.Addr
	Protocol model.Protocol
	Port     uint16
}

// SetReplaced creates a set or replaces its whole content.
type SetReplaced struct {
	ID   SetID
	Kind SetKind
	// Description is the selector (and named port) the set is computed from, for comments.
	Description string
	Members     []Member
}

// SetMembersChanged adds and removes members of an existing set.
type SetMembersChanged struct {
	ID      SetID
	Added   []Member
	Removed []Member
}

// SetRemoved deletes a set that no policy references any more.
type SetRemoved struct{ ID SetID }

// Match is the compiled form of one side of a rule. Every non-empty constraint must hold (AND).
type Match struct {
	// Sets: the address must be a member of every listed SetAddrs set.
	Sets []SetID
	// NotSets: the address must be a member of none of them.
	NotSets []SetID
	// Nets: the address must be in one of these prefixes (normalised: sorted, no prefix inside
	// another). Empty means any address.
	Nets []netip.Prefix
	// NotNets: the address must be in none of these prefixes (normalised as Nets).
	NotNets []netip.Prefix
	// Ports and NamedPortSets: the port matches if it is in one of Ports (numeric ranges, Name
	// empty) or if (address, protocol, port) is a member of one of NamedPortSets. Both empty: any
	// port.
	Ports         []model.Port
	NamedPortSets []SetID
	// NotPorts and NotNamedPortSets exclude ports the same way.
	NotPorts         []model.Port
	NotNamedPortSets []SetID
	// DomainName, when set, is a domainNames pattern (model.Peer.DomainNames): the address must
	// also be one that DNS answers gave for it, held at run time in the pattern's timed kernel
	// sets, not in any set the graph sends. Empty: no such restriction.
	DomainName string
}

// Rule is a policy rule with its selectors replaced by set references.
type Rule struct {
	Action      model.Action
	Protocol    model.Protocol
	NotProtocol model.Protocol
	IPVersion   uint8
	Src         Match
	Dst         Match
	ICMP        *model.ICMPMatch
	NotICMP     *model.ICMPMatch
	// Comment names the policy, direction and rule, e.g. "NetworkPolicy/x/allow-a ingress rule 0".
	Comment string
	// Index is the rule's place among the policy's rules of its direction as written (the number
	// its Comment names); rules the graph leaves out keep theirs.
	Index int
}

// PolicyUpdated creates or replaces an active policy's compiled rules.
type PolicyUpdated struct {
	Key     model.PolicyKey
	Tier    string
	Ingress []Rule
	Egress  []Rule
}

// PolicyRemoved deletes a policy that is no longer active (it selects no local endpoint).
type PolicyRemoved struct{ Key model.PolicyKey }

// TierPolicies is one tier of an endpoint's policy list for one direction: the policies of that
// tier that apply to the endpoint, in evaluation order, and what happens if none decides.
type TierPolicies struct {
	Tier          string
	DefaultAction model.Action
	Policies      []model.PolicyKey
}

// EndpointUpdated creates or replaces a local endpoint. Ingress and Egress list, in evaluation
// order, only the tiers that have at least one policy applying to the endpoint in that direction;
// an empty list means no policy applies and traffic is allowed.
type EndpointUpdated struct {
	Key model.EndpointKey
	// Addrs are the addresses the endpoint owns on this node: once a flush is applied, no two
	// endpoints list one address (an address several pod objects hold goes to one, see the
	// package doc), but within one flush an address may move from one endpoint to another.
	Addrs []netip.Addr
	// Interface is the host-side interface that leads to the endpoint, "" while unknown. For a
	// host endpoint it is the node's interface it polices (model.HostInterfaceAll: every one),
	// the first of Interfaces when it polices several.
	Interface string
	// Interfaces are, for a host endpoint without interfaceName that polices more than one
	// interface (each holding one of its expected IPs), all of them, sorted; nil otherwise.
	Interfaces []string
	// Host says that the endpoint is the node itself (a host endpoint): its traffic is judged
	// on the input and output hooks, dispatched by Interface and by Addrs, the node's
	// addresses; a pod's on the forward hook by Addrs alone.
	Host    bool
	Ingress []TierPolicies
	Egress  []TierPolicies
	// Forward, PreDNAT and Untracked are a host endpoint's lists for the other stages (empty
	// for a pod): the traffic forwarded through its interface (applyOnForward policies; empty:
	// allowed), every packet arriving through it before DNAT (preDNAT policies, ingress only)
	// and every packet through it before conntrack (doNotTrack policies). The PreDNAT and
	// Untracked lists end with model.TierHostUndecided: what no policy decides goes on to the
	// next stage.
	Forward, PreDNAT, Untracked Lists
}

// HostInterfaces are the interfaces a host endpoint polices: Interfaces, else Interface (none
// while it is "").
func (m *EndpointUpdated) HostInterfaces() []string {
	switch {
	case len(m.Interfaces) > 0:
		return m.Interfaces
	case m.Interface != "":
		return []string{m.Interface}
	}
	return nil
}

// Lists are one stage's tier lists, per direction.
type Lists struct{ Ingress, Egress []TierPolicies }

// Stage is where in the packet's path an endpoint's tier list judges it.
type Stage uint8

// The stages. StageLocal, the zero value, is the Ingress and Egress lists: pods' policy on
// the forward hook, host endpoints' on the node's own traffic (input and output hooks).
const (
	StageLocal Stage = iota
	// StageUntracked: host endpoints' doNotTrack policy, before conntrack (raw priority).
	StageUntracked
	// StagePreDNAT: host endpoints' preDNAT policy, before DNAT.
	StagePreDNAT
	// StageForward: host endpoints' applyOnForward policy, on forwarded traffic.
	StageForward
)

// Stages are the stages in the order a packet arriving through a host endpoint meets them.
var Stages = [...]Stage{StageUntracked, StagePreDNAT, StageForward, StageLocal}

// String names the stage in chain and map names.
func (s Stage) String() string {
	return [...]string{"local", "raw", "prednat", "fwd"}[s]
}

// AllTiers are the endpoint's tier lists of every stage and direction.
func (e *EndpointUpdated) AllTiers() [8][]TierPolicies {
	return [8][]TierPolicies{e.Ingress, e.Egress, e.Untracked.Ingress, e.Untracked.Egress,
		e.PreDNAT.Ingress, e.PreDNAT.Egress, e.Forward.Ingress, e.Forward.Egress}
}

// Tiers is the endpoint's tier list for a stage and direction.
func (e *EndpointUpdated) Tiers(s Stage, dir model.Direction) []TierPolicies {
	l := Lists{e.Ingress, e.Egress}
	switch s {
	case StageUntracked:
		l = e.Untracked
	case StagePreDNAT:
		l = e.PreDNAT
	case StageForward:
		l = e.Forward
	}
	if dir == model.Egress {
		return l.Egress
	}
	return l.Ingress
}

// EndpointRemoved deletes a local endpoint.
type EndpointRemoved struct{ Key model.EndpointKey }

// InSync is emitted once, in the first flush after every source reported in-sync: from then on
// the dataplane holds the complete desired state and may commit it.
type InSync struct{}

func (SetReplaced) isMessage()       {}
func (SetMembersChanged) isMessage() {}
func (SetRemoved) isMessage()        {}
func (PolicyUpdated) isMessage()     {}
func (PolicyRemoved) isMessage()     {}
func (EndpointUpdated) isMessage()   {}
func (EndpointRemoved) isMessage()   {}
func (InSync) isMessage()            {}

// Equal reports whether p and q are the same message. Like reflect.DeepEqual, a nil slice
// differs from an empty one and pointers are compared by what they point to.
func (p *PolicyUpdated) Equal(q *PolicyUpdated) bool {
	return p.Key == q.Key && p.Tier == q.Tier &&
		slicesEqual(p.Ingress, q.Ingress, (*Rule).Equal) && slicesEqual(p.Egress, q.Egress, (*Rule).Equal)
}

// Equal reports whether e and f are the same message (nil and empty slices differ, as for
// reflect.DeepEqual).
func (e *EndpointUpdated) Equal(f *EndpointUpdated) bool {
	return e.Key == f.Key && e.Interface == f.Interface && slicesEqual(e.Interfaces, f.Interfaces, eq) && e.Host == f.Host &&
		slicesEqual(e.Addrs, f.Addrs, eq) &&
		slicesEqual(e.Ingress, f.Ingress, (*TierPolicies).Equal) && slicesEqual(e.Egress, f.Egress, (*TierPolicies).Equal) &&
		e.Forward.Equal(&f.Forward) && e.PreDNAT.Equal(&f.PreDNAT) && e.Untracked.Equal(&f.Untracked)
}

// Equal reports whether l and m are the same lists (nil and empty slices differ).
func (l *Lists) Equal(m *Lists) bool {
	return slicesEqual(l.Ingress, m.Ingress, (*TierPolicies).Equal) && slicesEqual(l.Egress, m.Egress, (*TierPolicies).Equal)
}

// Equal reports whether t and u are the same (nil and empty slices differ).
func (t *TierPolicies) Equal(u *TierPolicies) bool {
	return t.Tier == u.Tier && t.DefaultAction == u.DefaultAction && slicesEqual(t.Policies, u.Policies, eq)
}

// Equal reports whether r and s are the same rule (nil and empty slices differ; ICMP matches
// are compared by value).
func (r *Rule) Equal(s *Rule) bool {
	return r.Action == s.Action && r.Protocol == s.Protocol && r.NotProtocol == s.NotProtocol &&
		r.IPVersion == s.IPVersion && r.Comment == s.Comment && r.Index == s.Index &&
		r.Src.Equal(&s.Src) && r.Dst.Equal(&s.Dst) && icmpEqual(r.ICMP, s.ICMP) && icmpEqual(r.NotICMP, s.NotICMP)
}

// Equal reports whether m and n are the same match (nil and empty slices differ).
func (m *Match) Equal(n *Match) bool {
	return slicesEqual(m.Sets, n.Sets, eq) && slicesEqual(m.NotSets, n.NotSets, eq) &&
		slicesEqual(m.Nets, n.Nets, eq) && slicesEqual(m.NotNets, n.NotNets, eq) &&
		slicesEqual(m.Ports, n.Ports, eq) && slicesEqual(m.NamedPortSets, n.NamedPortSets, eq) &&
		slicesEqual(m.NotPorts, n.NotPorts, eq) && slicesEqual(m.NotNamedPortSets, n.NotNamedPortSets, eq) &&
		m.DomainName == n.DomainName
}

func icmpEqual(a, b *model.ICMPMatch) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Code == nil || b.Code == nil {
		return a.Type == b.Type && a.Code == b.Code
	}
	return a.Type == b.Type && *a.Code == *b.Code
}

func eq[T comparable](a, b *T) bool { return *a == *b }

// slicesEqual compares as reflect.DeepEqual does: both nil, or both non-nil with equal elements.
func slicesEqual[T any](a, b []T, equal func(*T, *T) bool) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if !equal(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// DomainSetName is the name of the kernel set that holds the addresses of one family that DNS
// answers gave a domainNames pattern (Match.DomainName): "fqdn4_" or "fqdn6_" and 16 hex digits
// of the pattern's SHA-256, stable across restarts. The dataplane declares it (`flags timeout`)
// while a rule uses the pattern; the agent's DNS observer (internal/fqdn) writes its elements.
func DomainSetName(pattern string, is4 bool) string {
	sum := sha256.Sum256([]byte(pattern))
	prefix := "fqdn6_"
	if is4 {
		prefix = "fqdn4_"
	}
	return prefix + hex.EncodeToString(sum[:8])
}
