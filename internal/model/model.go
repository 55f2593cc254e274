// Package model is the internal policy model (docs/design.md §3): the one vocabulary that every
// policy API is converted into by internal/sync and that internal/graph computes on. It is Felix's
// model, so NetworkPolicy, ClusterNetworkPolicy and (later) Calico's own API all fit.
//
// The package holds plain data and the update messages that carry it; it has no behaviour beyond
// small helpers, no I/O and no dependency on Kubernetes.
//
// Selectors are strings in Calico's selector language (see internal/selector). Two conventions
// give a selector its scope:
//   - A Policy with a non-empty Namespace is namespaced (NetworkPolicy v1): its Selector only
//     selects endpoints of that namespace, and a rule peer with a Selector but no
//     NamespaceSelector only matches endpoints of that namespace.
//   - A peer's NamespaceSelector is evaluated against the labels of the endpoint's namespace;
//     a peer with a NamespaceSelector and no Selector matches every endpoint of the matching
//     namespaces. A Policy's NamespaceSelector does the same for the endpoints it applies to
//     (ClusterNetworkPolicy subjects select namespaces, or pods within selected namespaces).
//
// Several endpoints may hold one address (a pod's IP reused while the old pod object lingers, a
// status written late). Each is a member of the sets its labels select, so an address stays in
// a set while any of its holders matches. Which one the address's packets are judged as is
// decided by Endpoint.Running and Endpoint.Created (AddrClaim.Before; internal/graph applies it
// among the endpoints of its node, the agent's deny log among all): a running endpoint over one
// that is not, then the newest, then the smallest key.
package model

import (
	"cmp"
	"net/netip"
	"strconv"
	"time"
)

// EndpointKey names a workload endpoint (a pod).
type EndpointKey struct {
	Namespace string
	Name      string
}

func (k EndpointKey) String() string { return k.Namespace + "/" + k.Name }

// Protocol is an IP protocol number (IANA). Zero means "any protocol".
type Protocol uint8

const (
	ProtocolAny    Protocol = 0
	ProtocolICMP   Protocol = 1
	ProtocolTCP    Protocol = 6
	ProtocolUDP    Protocol = 17
	ProtocolICMPv6 Protocol = 58
	ProtocolSCTP   Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case ProtocolAny:
		return "any"
	case ProtocolICMP:
		return "icmp"
	case ProtocolTCP:
		return "tcp"
	case ProtocolUDP:
		return "udp"
	case ProtocolICMPv6:
		return "icmpv6"
	case ProtocolSCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// NamedPort is a port that a pod's container declares under a name.
type NamedPort struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// Endpoint is a pod with an address. Its Labels are its own; the labels of its namespace and
// service account are inherited by reference (Namespace, ServiceAccount), not copied here.
type Endpoint struct {
	Key            EndpointKey
	Node           string
	Labels         Labels
	ServiceAccount string
	// Addrs holds the pod's IPv4 and IPv6 addresses (status.podIPs), unmapped.
	Addrs      []netip.Addr
	NamedPorts []NamedPort
	// Running says that the pod runs (status.phase Running): it owns an address it shares with
	// an endpoint that does not run yet (see the package comment).
	Running bool
	// Created is when the pod was created (metadata.creationTimestamp, UTC): of two running
	// endpoints holding one address, the newer owns it.
	Created time.Time
	// Host is set for a host endpoint (Calico's HostEndpoint), nil for a pod: the node itself
	// as seen through one of its interfaces. A host endpoint's Key.Namespace is "" and its
	// Addrs are its expected IPs (what rule selectors picking it match).
	Host *HostEndpoint
}

// HostEndpoint is what a host endpoint adds to an Endpoint.
type HostEndpoint struct {
	// Interface is the node's interface whose traffic the endpoint polices; HostInterfaceAll
	// for every interface of the node.
	Interface string
	// DefaultAllow says that traffic no policy decides is allowed (Calico's
	// projectcalico-default-allow profile); without it, such traffic is denied.
	DefaultAllow bool
}

// HostInterfaceAll is the interface name of a host endpoint that stands for all of the node's
// interfaces (Calico's `interfaceName: "*"`).
const HostInterfaceAll = "*"

// AddrClaim is what ranks the holders of a shared address (see the package comment).
type AddrClaim struct {
	Key     EndpointKey
	Running bool
	Created time.Time
}

// Claim is e's claim to its addresses.
func (e *Endpoint) Claim() AddrClaim {
	return AddrClaim{Key: e.Key, Running: e.Running, Created: e.Created}
}

// Equal reports whether c and d rank alike.
func (c AddrClaim) Equal(d AddrClaim) bool {
	return c.Key == d.Key && c.Running == d.Running && c.Created.Equal(d.Created)
}

// Before reports whether c's holder owns an address both hold before d's: a running endpoint
// before one that does not run, then the newer (a pod whose IP went to its successor stays
// listed until its delete arrives; a status may be written late), then the smaller key, so
// that the owner never depends on the order of updates.
func (c AddrClaim) Before(d AddrClaim) bool {
	if c.Running != d.Running {
		return c.Running
	}
	if !c.Created.Equal(d.Created) {
		return c.Created.After(d.Created)
	}
	return cmp.Or(cmp.Compare(c.Key.Namespace, d.Key.Namespace), cmp.Compare(c.Key.Name, d.Key.Name)) < 0
}

// NetworkSetKey names a network set: Namespace "" for a cluster-scoped one (Calico's
// GlobalNetworkSet), else a namespaced one (NetworkSet).
type NetworkSetKey struct {
	Namespace string
	Name      string
}

func (k NetworkSetKey) String() string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// NetworkSet is a labelled list of networks that rule selectors pick like endpoints (Calico's
// GlobalNetworkSet and NetworkSet). Selection scope: a namespaced one is picked by the peers of
// policies of its namespace, by peers whose namespace selector matches its namespace and by
// peers of cluster-wide policies without a namespace selector; a cluster-scoped one by peers of
// cluster-wide policies without a namespace selector and by peers whose namespace selector is
// global() (Peer.Global).
type NetworkSet struct {
	Key    NetworkSetKey
	Labels Labels
	// Nets are canonical (CanonicalPrefix), IPv4 and IPv6 mixed.
	Nets []netip.Prefix
}

// Namespace carries the labels its endpoints inherit for namespace selectors.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// ServiceAccount carries labels that its endpoints inherit (Calico's serviceAccountSelector).
type ServiceAccount struct {
	Namespace string
	Name      string
	Labels    map[string]string
}

// Action is what a matching rule does.
type Action uint8

const (
	ActionAllow Action = iota + 1
	ActionDeny
	// ActionPass ends the evaluation of the current tier and continues with the next one.
	ActionPass
	// ActionLog logs the packet and continues with the next rule.
	ActionLog
)

func (a Action) String() string {
	switch a {
	case ActionAllow:
		return "allow"
	case ActionDeny:
		return "deny"
	case ActionPass:
		return "pass"
	case ActionLog:
		return "log"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Port is a destination (or source) port match: a numeric range First..Last (inclusive; First ==
// Last for a single port), or a Name that resolves per endpoint through its NamedPorts.
type Port struct {
	Name  string
	First uint16
	Last  uint16
}

// ICMPMatch matches an ICMP (or ICMPv6) type and, optionally, code.
type ICMPMatch struct {
	Type uint8
	Code *uint8
}

// Peer is one side (source or destination) of a rule. Every non-empty field must match (AND);
// within Nets (and within Ports) any element may match (OR). An empty Peer matches everything.
type Peer struct {
	// Selector selects endpoints by their labels; "" means no endpoint restriction unless
	// NamespaceSelector is set (see the package comment for scoping).
	Selector string
	// NamespaceSelector selects the namespaces whose endpoints match.
	NamespaceSelector string
	// ServiceAccountSelector selects endpoints by the labels of their service account.
	ServiceAccountSelector string
	// NotSelector excludes what it picks (endpoints, and network sets with NetworkSets): the
	// address must be held by none of them (Calico's notSelector; internal/graph's doc says how
	// it is scoped).
	NotSelector string
	Nets        []netip.Prefix
	NotNets     []netip.Prefix
	Ports       []Port
	NotPorts    []Port
	// NetworkSets says that the peer's selectors also pick network sets (Calico's rules, see
	// NetworkSet): a network set picked matches every address in its Nets. The Kubernetes APIs'
	// peers pick endpoints only. A peer with a ServiceAccountSelector picks no network set.
	// In a cluster-wide policy, a peer with NetworkSets and neither a namespace nor a
	// service-account selector picks host endpoints too (their expected IPs), as Calico's do.
	NetworkSets bool
	// Global says that the peer's namespace selector is Calico's global(): Selector picks
	// cluster-scoped objects only (GlobalNetworkSets), no endpoint and no namespaced network set.
	Global bool
	// DomainNames restricts the peer to the addresses that DNS answers to the node's pods gave
	// for one of these patterns (internal/fqdn's Pattern: an exact name or "*." and a name,
	// lower case, no trailing dot), sorted and distinct. A peer with DomainNames matches only
	// such addresses, never any address; the addresses are learnt at run time, not known to the
	// compile.
	DomainNames []string
}

// HasEndpointMatch reports whether the peer restricts by endpoint identity (any selector).
func (p Peer) HasEndpointMatch() bool {
	return p.Selector != "" || p.NamespaceSelector != "" || p.ServiceAccountSelector != "" || p.Global
}

// Rule is one ordered rule of a policy.
type Rule struct {
	Action Action
	// Protocol restricts the rule to one protocol; ProtocolAny matches all.
	Protocol Protocol
	// NotProtocol excludes one protocol (ProtocolAny: none excluded).
	NotProtocol Protocol
	// IPVersion restricts the rule to 4 or 6; 0 for both.
	IPVersion   uint8
	Source      Peer
	Destination Peer
	ICMP        *ICMPMatch
	NotICMP     *ICMPMatch
	// Name is an optional human name (for comments); rules are otherwise named by index.
	Name string
	// Label, when set, names the rule in comments in place of its direction, index and Name:
	// a converter that turns one API rule into several model rules names the API rule (for a
	// ClusterNetworkPolicy its tier, priority, direction, index and name).
	Label string
}

// Direction is the direction of traffic relative to an endpoint.
type Direction uint8

const (
	Ingress Direction = iota
	Egress
)

func (d Direction) String() string {
	if d == Egress {
		return "egress"
	}
	return "ingress"
}

// PolicyKey names a policy uniquely across all policy APIs.
type PolicyKey struct {
	// Kind is the source API: "NetworkPolicy", "ClusterNetworkPolicy", … .
	Kind      string
	Namespace string
	Name      string
}

func (k PolicyKey) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// Policy is an ordered list of rules applied to the endpoints its Selector selects.
type Policy struct {
	Key  PolicyKey
	Tier string
	// Order sorts policies within a tier (lower first); ties are broken as Felix
	// breaks them: by Key.Name, then Key.Namespace, then Key.Kind.
	Order float64
	// Namespace scopes Selector and same-namespace peers (NetworkPolicy); "" for cluster-wide.
	Namespace string
	Selector  string
	// NamespaceSelector, when set, restricts the policy to endpoints whose namespace's labels
	// it matches (a ClusterNetworkPolicy's subject); "" puts no restriction on the namespace.
	NamespaceSelector string
	// Hosts says that Selector also selects host endpoints (Calico's GlobalNetworkPolicy
	// without a namespace selector); the Kubernetes APIs' policies apply to pods only.
	Hosts bool
	// ApplyOnForward, PreDNAT and DoNotTrack say which of a host endpoint's traffic the policy
	// judges besides, or instead of, the node's own (Calico's fields of the same names; only
	// with Hosts): ApplyOnForward also the traffic the node forwards through the endpoint's
	// interface; PreDNAT (ingress only, with ApplyOnForward) every packet arriving through it,
	// before DNAT, instead of the node's own; DoNotTrack (with ApplyOnForward) every packet
	// through it, before conntrack and statelessly, instead of the node's own. A PreDNAT or
	// DoNotTrack policy selects no pod.
	ApplyOnForward, PreDNAT, DoNotTrack bool
	// ServiceAccountSelector, when set, restricts the policy to endpoints whose service
	// account's labels it matches (Calico's policy serviceAccountSelector, ANDed with
	// Selector); an endpoint without a service account, or whose service account object is
	// unknown, has no such labels. "" puts no restriction on the service account.
	ServiceAccountSelector string
	// Ingress/Egress say which directions the policy applies to (policyTypes).
	ApplyIngress bool
	ApplyEgress  bool
	IngressRules []Rule
	EgressRules  []Rule
}

// Well-known tiers. Tiers are evaluated in ascending Order.
const (
	TierAdmin         = "admin"
	TierNetworkPolicy = "default"
	TierBaseline      = "baseline"
	// TierHostDefault is the last tier of a host endpoint's lists without a default-allow
	// profile: it holds no policy and denies what the tiers before it left undecided (Calico's
	// default deny for host endpoints). Only internal/graph emits it.
	TierHostDefault = "host-endpoint-default"
	// TierHostUndecided is the last tier of a host endpoint's pre-DNAT and untracked lists: it
	// holds no policy and leaves what the tiers before it left undecided to the later stages
	// (no default deny before DNAT or conntrack, as in Felix). Only internal/graph emits it.
	TierHostUndecided = "host-endpoint-undecided"
)

// Tier groups policies. If policies of a tier apply to an endpoint and none decides, the tier's
// DefaultAction applies (ActionDeny for NetworkPolicy semantics, ActionPass to fall through).
type Tier struct {
	Name          string
	Order         float64
	DefaultAction Action
}

// DefaultTiers are the tiers every source starts with, at Calico's orders for them
// (projectcalico.org/v3 tier.go: kube-admin 1,000, default 1,000,000, kube-baseline 10,000,000),
// so that tiers of Calico's API sort among them as Calico sorts them: ClusterNetworkPolicy
// Admin, NetworkPolicy (Kubernetes' and Calico's default tier), ClusterNetworkPolicy Baseline.
func DefaultTiers() []Tier {
	return []Tier{
		{Name: TierAdmin, Order: 1_000, DefaultAction: ActionPass},
		{Name: TierNetworkPolicy, Order: 1_000_000, DefaultAction: ActionDeny},
		{Name: TierBaseline, Order: 10_000_000, DefaultAction: ActionPass},
	}
}

// CanonicalPrefix masks the host bits (the API server accepts 10.0.0.1/24 as 10.0.0.0/24) and
// unmaps an IPv4-mapped IPv6 prefix, so equal networks compare equal.
func CanonicalPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked()
}
