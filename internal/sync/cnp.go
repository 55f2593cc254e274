package sync

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	npav1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npav1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// KindClusterNetworkPolicy is the PolicyKey.Kind of converted ClusterNetworkPolicies.
const KindClusterNetworkPolicy = "ClusterNetworkPolicy"

// Bounds of a ClusterNetworkPolicy the converter accepts: the API's own (its CRD validates
// them; manifests read by LoadDir are not validated), which bound the conversion's output: at
// most cnpMaxItems rules × cnpMaxItems peers × 4 protocol groups (TCP, UDP, SCTP, named ports)
// = 2,500 model rules per direction.
const (
	cnpMaxItems    = 25
	cnpMaxPriority = 1000
)

// cnpConversion is a ClusterNetworkPolicy converted into the model, before its node peers are
// resolved: the rules of its nodes peers are in policy.EgressRules without Nets, and nodeRules
// says which they are and which nodes they select (resolve fills them in).
type cnpConversion struct {
	policy    model.Policy
	nodeRules []nodeRule
	// ignored says what of the policy is not enforced as written and how (domainNames outside an Accept rule, peers of a newer API),
	// one sentence each, for the log.
	ignored []string
}

// nodeRule is an egress rule whose destination is the addresses of the nodes sel selects.
type nodeRule struct {
	rule int // index in policy.EgressRules
	sel  *selector.Selector
}

// node is what the node peers of ClusterNetworkPolicies need of a Node: its labels and the IP
// addresses of its status.
type node struct {
	labels selector.Map
	addrs  []netip.Addr // sorted, unmapped, without repeats
}

// convertNode keeps of n what node peers select by and match on: its labels and every address
// in status.addresses that is an IP address (InternalIP, ExternalIP; host names are skipped).
func convertNode(n *corev1.Node) node {
	var addrs []netip.Addr
	for _, a := range n.Status.Addresses {
		ip, err := netip.ParseAddr(a.Address)
		if err != nil || ip.Zone() != "" {
			continue
		}
		addrs = append(addrs, ip.Unmap())
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return node{labels: selector.Map(n.Labels), addrs: slices.Compact(addrs)}
}

// ConvertClusterNetworkPolicy converts a ClusterNetworkPolicy (policy.networking.k8s.io
// v1beta1; a v1alpha2 one goes through ClusterNetworkPolicyV1beta1 first) into the model, its node peers resolved against nodes (see convertCNP). ignored
// says what is not enforced as written (domainNames outside an Accept rule, peers of a newer API), one sentence each; an error means
// the policy cannot be converted at all, and no policy is returned.
func ConvertClusterNetworkPolicy(cnp *npav1beta1.ClusterNetworkPolicy, nodes []*corev1.Node) (p model.Policy, ignored []string, err error) {
	c, err := convertCNP(cnp)
	if err != nil {
		return model.Policy{}, nil, err
	}
	byName := make(map[string]node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = convertNode(n)
	}
	return c.resolve(byName), c.ignored, nil
}

// ClusterNetworkPolicyV1beta1 is a v1alpha2 ClusterNetworkPolicy as v1beta1. The two versions
// have the same schema (the API server stores v1alpha2 objects as v1beta1 without a conversion
// webhook), so the object goes through its JSON form unchanged; only apiVersion differs. It
// fails only on input no decoder produces (a field the other version cannot hold).
func ClusterNetworkPolicyV1beta1(cnp *npav1alpha2.ClusterNetworkPolicy) (*npav1beta1.ClusterNetworkPolicy, error) {
	data, err := json.Marshal(cnp)
	if err != nil {
		return nil, fmt.Errorf("ClusterNetworkPolicy %s as v1beta1: %w", cnp.Name, err)
	}
	out := &npav1beta1.ClusterNetworkPolicy{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return nil, fmt.Errorf("ClusterNetworkPolicy %s as v1beta1: %w", cnp.Name, err)
	}
	if out.APIVersion != "" {
		out.APIVersion = npav1beta1.GroupVersion.String()
	}
	return out, nil
}

// clusterPolicyV1beta1 is obj, a ClusterNetworkPolicy of either version, as v1beta1.
func clusterPolicyV1beta1(obj runtime.Object) (*npav1beta1.ClusterNetworkPolicy, error) {
	switch o := obj.(type) {
	case *npav1beta1.ClusterNetworkPolicy:
		return o, nil
	case *npav1alpha2.ClusterNetworkPolicy:
		return ClusterNetworkPolicyV1beta1(o)
	}
	return nil, fmt.Errorf("a %T is no ClusterNetworkPolicy", obj)
}

// convertCNP converts a ClusterNetworkPolicy with the API's semantics:
//
//   - tier Admin → model.TierAdmin, Baseline → model.TierBaseline; both default to Pass, so
//     traffic no rule decides goes on to the next tier (Admin → NetworkPolicy → Baseline →
//     allowed). Order is the priority (0–1000, lower first); policies of equal priority in one
//     tier are evaluated by name (the model breaks ties by key, and every key of the tier is
//     ClusterNetworkPolicy/<name>).
//   - The policy is cluster-wide. subject.namespaces selects every pod of the matching
//     namespaces (Selector all(), NamespaceSelector); subject.pods the pods matching
//     podSelector in the namespaces matching namespaceSelector. An empty selector selects
//     everything.
//   - It applies to ingress when it has ingress rules, to egress when it has egress rules.
//   - Rules keep their order: the first that matches decides (Accept → Allow, Deny, Pass). One
//     rule becomes one model rule per peer and per protocol group, consecutive and with the
//     rule's action, so the first of them to match decides as the rule would.
//   - Peers: namespaces (every pod of the matching namespaces), pods (namespaceSelector AND
//     podSelector), networks (CIDRs, matching pods' addresses too), nodes (the IP addresses in
//     status.addresses of the matching nodes, resolved by resolve), domainNames in an Accept rule
//     (the only action the API allows them in) as the peer's DomainNames (canonical: lower
//     case, no trailing dot; sorted, distinct), whose addresses the agent learns from DNS
//     answers; in a Deny or Pass rule the rule denies everything, as the API asks of a peer an
//     implementation cannot read (fail closed). A peer
//     with no field set (a newer API's) is treated the same way.
//   - protocols: none matches every protocol and port; tcp, udp and sctp match their
//     destinationPort (a number or a start–end range; none: every port of the protocol);
//     destinationNamedPort matches the port of that name, of any protocol, on the destination
//     pod (the graph resolves it per endpoint). A protocol entry with no field set (a newer
//     API's) matches nothing in an Accept rule, and makes a Deny or Pass rule deny everything.
//
// Anything the API server would reject (an unknown tier or action, a priority out of range, a
// subject or peer or protocol or port with more than one field, a bad selector, CIDR or port,
// more than 25 rules, peers, protocols or networks) makes the policy invalid: the error names
// the field.
func convertCNP(cnp *npav1beta1.ClusterNetworkPolicy) (*cnpConversion, error) {
	spec := &cnp.Spec
	if cnp.Name == "" {
		return nil, errors.New("metadata.name is empty")
	}
	c := &cnpConversion{policy: model.Policy{Key: model.PolicyKey{Kind: KindClusterNetworkPolicy, Name: cnp.Name}}}
	pol := &c.policy
	switch spec.Tier {
	case npav1beta1.AdminTier:
		pol.Tier = model.TierAdmin
	case npav1beta1.BaselineTier:
		pol.Tier = model.TierBaseline
	default:
		return nil, fmt.Errorf("spec.tier: unknown tier %q (want Admin or Baseline)", spec.Tier)
	}
	if spec.Priority < 0 || spec.Priority > cnpMaxPriority {
		return nil, fmt.Errorf("spec.priority: %d is out of range 0-%d", spec.Priority, cnpMaxPriority)
	}
	pol.Order = float64(spec.Priority)
	if err := c.subject(&spec.Subject); err != nil {
		return nil, fmt.Errorf("spec.subject.%w", err)
	}
	if len(spec.Ingress) > cnpMaxItems || len(spec.Egress) > cnpMaxItems {
		return nil, fmt.Errorf("spec: %d ingress and %d egress rules, at most %d each", len(spec.Ingress), len(spec.Egress), cnpMaxItems)
	}
	pol.ApplyIngress, pol.ApplyEgress = len(spec.Ingress) > 0, len(spec.Egress) > 0
	for i := range spec.Ingress {
		r := &spec.Ingress[i]
		peers := make([]cnpPeer, len(r.From))
		for j := range r.From {
			peers[j] = cnpPeer{namespaces: r.From[j].Namespaces, pods: r.From[j].Pods}
		}
		if err := c.rule(model.Ingress, i, r.Name, r.Action, peers, r.Protocols); err != nil {
			return nil, fmt.Errorf("spec.ingress[%d].%w", i, err)
		}
	}
	for i := range spec.Egress {
		r := &spec.Egress[i]
		peers := make([]cnpPeer, len(r.To))
		for j := range r.To {
			p := &r.To[j]
			peers[j] = cnpPeer{namespaces: p.Namespaces, pods: p.Pods, nodes: p.Nodes, networks: p.Networks, domainNames: p.DomainNames}
		}
		if err := c.rule(model.Egress, i, r.Name, r.Action, peers, r.Protocols); err != nil {
			return nil, fmt.Errorf("spec.egress[%d].%w", i, err)
		}
	}
	return c, nil
}

func (c *cnpConversion) subject(s *npav1beta1.ClusterNetworkPolicySubject) error {
	pol := &c.policy
	switch {
	case s.Namespaces != nil && s.Pods != nil:
		return errors.New("namespaces, pods: only one may be set")
	case s.Namespaces != nil:
		ns, err := convertSelector(s.Namespaces)
		if err != nil {
			return fmt.Errorf("namespaces: %w", err)
		}
		pol.Selector, pol.NamespaceSelector = selector.All().String(), ns
	case s.Pods != nil:
		ns, err := convertSelector(&s.Pods.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("pods.namespaceSelector: %w", err)
		}
		sel, err := convertSelector(&s.Pods.PodSelector)
		if err != nil {
			return fmt.Errorf("pods.podSelector: %w", err)
		}
		pol.Selector, pol.NamespaceSelector = sel, ns
	default:
		return errors.New("namespaces, pods: one must be set")
	}
	return nil
}

// cnpPeer is an ingress or egress peer (ingress peers have namespaces and pods only).
type cnpPeer struct {
	namespaces  *metav1.LabelSelector
	pods        *npav1beta1.NamespacedPod
	nodes       *metav1.LabelSelector
	networks    []npav1beta1.CIDR
	domainNames []npav1beta1.DomainName
}

// cnpProto is one protocol group of a rule: a protocol (ProtocolAny for named ports) and its
// ports, all of them when all is set.
type cnpProto struct {
	proto model.Protocol
	all   bool
	ports []model.Port
}

// cnpRule is one API rule being converted: where it stands and what it does.
type cnpRule struct {
	dir    model.Direction
	index  int
	name   string
	action npav1beta1.ClusterNetworkPolicyRuleAction
	act    model.Action
	field  string // "from" or "to", for errors
}

// convertedPeer is one peer of a rule in the model; nodes is set for a nodes peer, whose Nets come
// from the Nodes it selects.
type convertedPeer struct {
	peer  model.Peer
	nodes *selector.Selector
}

// rule appends the model rules of one API rule (see convertCNP).
func (c *cnpConversion) rule(dir model.Direction, index int, name string, action npav1beta1.ClusterNetworkPolicyRuleAction,
	peers []cnpPeer, protocols []npav1beta1.ClusterNetworkPolicyProtocol) error {
	act, err := cnpAction(action)
	if err != nil {
		return err
	}
	r := &cnpRule{dir: dir, index: index, name: name, action: action, act: act, field: "from"}
	if dir == model.Egress {
		r.field = "to"
	}
	if len(peers) == 0 {
		return fmt.Errorf("%s: at least one peer is required", r.field)
	}
	if len(peers) > cnpMaxItems || len(protocols) > cnpMaxItems {
		return fmt.Errorf("%s, protocols: %d peers and %d protocols, at most %d each", r.field, len(peers), len(protocols), cnpMaxItems)
	}
	groups, unreadable, err := cnpProtocols(protocols)
	if err != nil {
		return fmt.Errorf("protocols%w", err)
	}
	if unreadable > 0 {
		c.failClosed(r, fmt.Sprintf("%d protocol entries without a known field", unreadable))
	}
	denyAll := act != model.ActionAllow && unreadable > 0
	var out []convertedPeer
	for j := range peers {
		cp, ok, err := c.peer(r, j, &peers[j])
		if err != nil {
			return err
		}
		if !ok {
			denyAll = denyAll || act != model.ActionAllow
			continue
		}
		out = append(out, cp)
	}
	label := fmt.Sprintf("%s priority %d %s rule %d", c.policy.Tier, int(c.policy.Order), dir, index)
	if name != "" {
		label += " (" + name + ")"
	}
	if denyAll {
		c.add(dir, model.Rule{Action: model.ActionDeny, Label: label})
		return nil
	}
	for _, p := range out {
		for _, g := range groups {
			mr := model.Rule{Action: act, Protocol: g.proto, Label: label}
			if dir == model.Ingress {
				mr.Source = p.peer
			} else {
				mr.Destination = p.peer
			}
			if !g.all { // destination ports: the local side's for ingress, the peer's for egress
				mr.Destination.Ports = slices.Clone(g.ports)
			}
			if p.nodes != nil {
				c.nodeRules = append(c.nodeRules, nodeRule{rule: len(c.policy.EgressRules), sel: p.nodes})
			}
			c.add(dir, mr)
		}
	}
	return nil
}

// cnpAction is the model's action for an API rule's.
func cnpAction(action npav1beta1.ClusterNetworkPolicyRuleAction) (model.Action, error) {
	switch action {
	case npav1beta1.ClusterNetworkPolicyRuleActionAccept:
		return model.ActionAllow, nil
	case npav1beta1.ClusterNetworkPolicyRuleActionDeny:
		return model.ActionDeny, nil
	case npav1beta1.ClusterNetworkPolicyRuleActionPass:
		return model.ActionPass, nil
	}
	return 0, fmt.Errorf("action: unknown action %q (want Accept, Deny or Pass)", action)
}

// add appends a model rule to the policy's rules of a direction.
func (c *cnpConversion) add(dir model.Direction, r model.Rule) {
	if dir == model.Ingress {
		c.policy.IngressRules = append(c.policy.IngressRules, r)
	} else {
		c.policy.EgressRules = append(c.policy.EgressRules, r)
	}
}

// failClosed records that something of rule r cannot be enforced as written. An Accept rule then
// allows less (the unreadable part matches nothing); a Deny or Pass rule denies everything.
func (c *cnpConversion) failClosed(r *cnpRule, what string) {
	if r.act == model.ActionAllow {
		c.ignored = append(c.ignored, fmt.Sprintf("%s rule %d%s: %s: not supported, matches nothing", r.dir, r.index, quotedName(r.name), what))
		return
	}
	c.ignored = append(c.ignored, fmt.Sprintf("%s rule %d%s: %s: not supported in a %s rule, which denies everything instead", r.dir, r.index, quotedName(r.name), what, r.action))
}

// peer converts peer j of rule r. ok is false for a peer the model cannot express (no known
// field, domainNames outside an Accept rule): it was recorded by failClosed and matches nothing.
func (c *cnpConversion) peer(r *cnpRule, j int, p *cnpPeer) (cp convertedPeer, ok bool, err error) {
	field := r.field
	set := 0
	for _, isSet := range []bool{p.namespaces != nil, p.pods != nil, p.nodes != nil, len(p.networks) > 0, len(p.domainNames) > 0} {
		if isSet {
			set++
		}
	}
	switch {
	case set > 1:
		return cp, false, fmt.Errorf("%s[%d]: only one of namespaces, pods, nodes, networks and domainNames may be set", field, j)
	case set == 0:
		c.failClosed(r, fmt.Sprintf("%s[%d]: a peer without a known field", field, j))
		return cp, false, nil
	case len(p.domainNames) > 0 && r.act != model.ActionAllow:
		// The API allows domainNames in Accept rules only: what they name is learnt after the
		// fact, so a Deny or Pass of them would not restrict from the first packet on.
		c.failClosed(r, fmt.Sprintf("%s[%d].domainNames", field, j))
		return cp, false, nil
	case len(p.domainNames) > 0:
		if cp.peer.DomainNames, err = cnpDomainNames(p.domainNames); err != nil {
			return cp, false, fmt.Errorf("%s[%d].domainNames%w", field, j, err)
		}
	case p.namespaces != nil:
		ns, err := convertSelector(p.namespaces)
		if err != nil {
			return cp, false, fmt.Errorf("%s[%d].namespaces: %w", field, j, err)
		}
		cp.peer.NamespaceSelector = ns
	case p.pods != nil:
		ns, err := convertSelector(&p.pods.NamespaceSelector)
		if err != nil {
			return cp, false, fmt.Errorf("%s[%d].pods.namespaceSelector: %w", field, j, err)
		}
		sel, err := convertSelector(&p.pods.PodSelector)
		if err != nil {
			return cp, false, fmt.Errorf("%s[%d].pods.podSelector: %w", field, j, err)
		}
		cp.peer.Selector, cp.peer.NamespaceSelector = sel, ns
	case p.nodes != nil:
		s, err := convertSelector(p.nodes)
		if err != nil {
			return cp, false, fmt.Errorf("%s[%d].nodes: %w", field, j, err)
		}
		if cp.nodes, err = selector.Parse(s); err != nil {
			return cp, false, fmt.Errorf("%s[%d].nodes: %w", field, j, err)
		}
	default:
		if cp.peer.Nets, err = cnpNetworks(p.networks); err != nil {
			return cp, false, fmt.Errorf("%s[%d].networks%w", field, j, err)
		}
	}
	return cp, true, nil
}

// cnpDomainNames converts a domainNames peer to its patterns in canonical form (ASCII lower case,
// no trailing dot), sorted and distinct; the CRD validates their shape, and internal/fqdn
// parses them again where they are matched.
func cnpDomainNames(names []npav1beta1.DomainName) ([]string, error) {
	if len(names) > cnpMaxItems {
		return nil, fmt.Errorf(": %d domain names, at most %d", len(names), cnpMaxItems)
	}
	out := make([]string, 0, len(names))
	for k, n := range names {
		p := strings.ToLower(strings.TrimSuffix(string(n), "."))
		if p == "" || p == "*" || strings.ContainsAny(p, " /") {
			return nil, fmt.Errorf("[%d]: %q is no domain name", k, n)
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// cnpNetworks converts a networks peer to canonical, distinct prefixes.
func cnpNetworks(networks []npav1beta1.CIDR) ([]netip.Prefix, error) {
	if len(networks) > cnpMaxItems {
		return nil, fmt.Errorf(": %d networks, at most %d", len(networks), cnpMaxItems)
	}
	var nets []netip.Prefix
	for k, n := range networks {
		pfx, err := netip.ParsePrefix(string(n))
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", k, err)
		}
		if pfx = model.CanonicalPrefix(pfx); !slices.Contains(nets, pfx) {
			nets = append(nets, pfx)
		}
	}
	return nets, nil
}

func quotedName(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// cnpProtocols groups a rule's protocol entries by protocol: the ports of one protocol are
// OR-ed in one group, named ports in a group of their own (any protocol); no entry at all is
// one group of every protocol and port. unreadable counts the entries without a known field,
// which no group holds: when every entry is unreadable, no group is returned.
func cnpProtocols(protocols []npav1beta1.ClusterNetworkPolicyProtocol) (groups []*cnpProto, unreadable int, err error) {
	if len(protocols) == 0 {
		return []*cnpProto{{proto: model.ProtocolAny, all: true}}, 0, nil
	}
	group := func(proto model.Protocol) *cnpProto {
		i := slices.IndexFunc(groups, func(g *cnpProto) bool { return g.proto == proto })
		if i < 0 {
			groups = append(groups, &cnpProto{proto: proto})
			i = len(groups) - 1
		}
		return groups[i]
	}
	for i, p := range protocols {
		set := 0
		for _, isSet := range []bool{p.TCP != nil, p.UDP != nil, p.SCTP != nil, p.DestinationNamedPort != ""} {
			if isSet {
				set++
			}
		}
		if set > 1 {
			return nil, 0, fmt.Errorf("[%d]: only one of tcp, udp, sctp and destinationNamedPort may be set", i)
		}
		var (
			proto model.Protocol
			dp    *npav1beta1.Port
			name  string
		)
		switch {
		case set == 0:
			unreadable++
			continue
		case p.TCP != nil:
			proto, dp, name = model.ProtocolTCP, p.TCP.DestinationPort, "tcp"
		case p.UDP != nil:
			proto, dp, name = model.ProtocolUDP, p.UDP.DestinationPort, "udp"
		case p.SCTP != nil:
			proto, dp, name = model.ProtocolSCTP, p.SCTP.DestinationPort, "sctp"
		default:
			g := group(model.ProtocolAny)
			if pt := (model.Port{Name: p.DestinationNamedPort}); !slices.Contains(g.ports, pt) {
				g.ports = append(g.ports, pt)
			}
			continue
		}
		g := group(proto)
		if dp == nil {
			g.all = true
			continue
		}
		pt, err := cnpPort(dp)
		if err != nil {
			return nil, 0, fmt.Errorf("[%d].%s.destinationPort%w", i, name, err)
		}
		if !slices.Contains(g.ports, pt) {
			g.ports = append(g.ports, pt)
		}
	}
	return groups, unreadable, nil
}

// cnpPort converts a destinationPort: a number, or a range start < end, within 1–65535.
func cnpPort(p *npav1beta1.Port) (model.Port, error) {
	inRange := func(n int32) bool { return n >= 1 && n <= 65535 }
	switch {
	case p.Number != 0 && p.Range != nil:
		return model.Port{}, errors.New(": only one of number and range may be set")
	case p.Range != nil:
		r := p.Range
		if !inRange(r.Start) || !inRange(r.End) || r.Start >= r.End {
			return model.Port{}, fmt.Errorf(".range: %d-%d: want 1 <= start < end <= 65535", r.Start, r.End)
		}
		return model.Port{First: uint16(r.Start), Last: uint16(r.End)}, nil
	case inRange(p.Number):
		return model.Port{First: uint16(p.Number), Last: uint16(p.Number)}, nil
	}
	return model.Port{}, fmt.Errorf(".number: %d is out of range 1-65535", p.Number)
}

// resolve returns the policy with the node rules' destinations set to the addresses of the
// nodes their selectors select (a /32 or /128 each); a node rule whose nodes have no address
// is left out, since a rule without Nets would match every address. It shares nothing that a
// later resolve changes: the egress rules are a new slice, the other rules the conversion's,
// which nothing modifies. O(node rules × nodes × addresses).
func (c *cnpConversion) resolve(nodes map[string]node) model.Policy {
	p := c.policy
	if len(c.nodeRules) == 0 {
		return p
	}
	p.EgressRules = make([]model.Rule, 0, len(c.policy.EgressRules))
	next := 0
	for i, r := range c.policy.EgressRules {
		if next < len(c.nodeRules) && c.nodeRules[next].rule == i {
			sel := c.nodeRules[next].sel
			next++
			var nets []netip.Prefix
			for _, n := range nodes {
				if sel.Evaluate(n.labels) {
					for _, a := range n.addrs {
						nets = append(nets, netip.PrefixFrom(a, a.BitLen()))
					}
				}
			}
			if len(nets) == 0 {
				continue
			}
			slices.SortFunc(nets, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
			r.Destination.Nets = slices.Compact(nets)
		}
		p.EgressRules = append(p.EgressRules, r)
	}
	return p
}

// selects reports whether any node rule of c selects n.
func (c *cnpConversion) selects(n node) bool {
	for _, nr := range c.nodeRules {
		if nr.sel.Evaluate(n.labels) {
			return true
		}
	}
	return false
}

// describeIgnored is the log's explanation of what a policy does not enforce as written, in the
// shape of the status condition an implementation would write (the agent writes no status).
func describeIgnored(ignored []string) string {
	return "Accepted=False reason=UnsupportedField: " + strings.Join(ignored, "; ") + " (" + strconv.Itoa(len(ignored)) + " in all)"
}
