package sync

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// The PolicyKey.Kind of converted Calico policies. A Calico NetworkPolicy has a kind of its own,
// so that it never shares a key with a Kubernetes NetworkPolicy of the same namespace and name.
const (
	KindGlobalNetworkPolicy = "GlobalNetworkPolicy"
	KindCalicoNetworkPolicy = "CalicoNetworkPolicy"
)

// Calico's built-in tiers, by their Calico names, and their orders (projectcalico.org/v3
// tier.go; Calico's admission refuses other orders or default actions for them). The model
// knows them as model.TierAdmin, model.TierNetworkPolicy and model.TierBaseline with these
// orders (model.DefaultTiers).
const (
	calicoTierDefault      = "default"
	calicoTierKubeAdmin    = "kube-admin"
	calicoTierKubeBaseline = "kube-baseline"
)

// calicoTierPrefix marks a Calico tier whose name is one of the model's built-in tier names
// but not Calico's built-in tier of that name ("admin", "baseline"): the model knows it as
// calicoTierPrefix + name. A colon is in no Kubernetes object name, so the result is no other
// tier's name.
const calicoTierPrefix = "calico:"

// CalicoTierName is the model's name of the Calico tier name: "" and "default" are
// model.TierNetworkPolicy, "kube-admin" model.TierAdmin, "kube-baseline" model.TierBaseline;
// a tier named like a model built-in that Calico does not have ("admin", "baseline",
// "host-endpoint-default") is "calico:<name>"; any other keeps its name.
func CalicoTierName(name string) string {
	switch name {
	case "", calicoTierDefault:
		return model.TierNetworkPolicy
	case calicoTierKubeAdmin:
		return model.TierAdmin
	case calicoTierKubeBaseline:
		return model.TierBaseline
	case model.TierAdmin, model.TierBaseline, model.TierHostDefault:
		return calicoTierPrefix + name
	}
	return name
}

// OrderUnset is the model's order of a Calico tier or policy whose order is not set: +Inf,
// after every ordered one (ties by name, as Calico breaks them).
var OrderUnset = math.Inf(1)

func calicoOrder(o *float64) float64 {
	if o == nil {
		return OrderUnset
	}
	return *o
}

// orderText writes an order for labels and logs: "unset" for OrderUnset.
func orderText(o float64) string {
	if math.IsInf(o, 1) {
		return "unset"
	}
	return strconv.FormatFloat(o, 'g', -1, 64)
}

// ConvertCalicoTier converts a Calico Tier. builtin is true for Calico's own tiers (default,
// kube-admin, kube-baseline), which the model always has (model.DefaultTiers): they are
// checked (Calico's admission fixes their order and default action) and produce no update.
// A tier's order unset sorts it last; defaultAction is Deny (the default) or Pass.
func ConvertCalicoTier(t *CalicoTier) (tier model.Tier, builtin bool, err error) {
	if t.Name == "" {
		return model.Tier{}, false, errors.New("metadata.name is empty")
	}
	tier = model.Tier{Name: CalicoTierName(t.Name), Order: calicoOrder(t.Spec.Order), DefaultAction: model.ActionDeny}
	if a := t.Spec.DefaultAction; a != nil {
		switch *a {
		case "Deny":
		case "Pass":
			tier.DefaultAction = model.ActionPass
		default:
			return model.Tier{}, false, fmt.Errorf("spec.defaultAction: unknown action %q (want Deny or Pass)", *a)
		}
	}
	switch t.Name {
	case calicoTierDefault, calicoTierKubeAdmin, calicoTierKubeBaseline:
	default:
		return tier, false, nil
	}
	for _, b := range model.DefaultTiers() {
		if b.Name == tier.Name && b != tier {
			return model.Tier{}, false, fmt.Errorf("spec: the built-in tier %s has order %s and default action %s",
				t.Name, orderText(b.Order), b.DefaultAction)
		}
	}
	return tier, true, nil
}

// calicoPolicy is a Calico policy being converted.
type calicoPolicy struct {
	policy    model.Policy
	tier      string // the Calico tier name, for labels
	namespace string // "" for a GlobalNetworkPolicy
	// ignored says what of the policy is not enforced as written and how, one sentence each
	ignored []string
}

// ConvertGlobalNetworkPolicy converts a Calico GlobalNetworkPolicy (see convertCalicoPolicy).
func ConvertGlobalNetworkPolicy(p *GlobalNetworkPolicy) (model.Policy, []string, error) {
	return convertCalicoPolicy(KindGlobalNetworkPolicy, "", p.Name, &p.Spec)
}

// ConvertCalicoNetworkPolicy converts a Calico NetworkPolicy (see convertCalicoPolicy).
func ConvertCalicoNetworkPolicy(p *CalicoNetworkPolicy) (model.Policy, []string, error) {
	if p.Namespace == "" {
		return model.Policy{}, nil, errors.New("metadata.namespace is empty")
	}
	return convertCalicoPolicy(KindCalicoNetworkPolicy, p.Namespace, p.Name, &p.Spec)
}

// convertCalicoPolicy converts a Calico policy with Calico's semantics (Felix's, where the
// documentation is silent):
//
//   - Tier: spec.tier (default "default"), named in the model by CalicoTierName. A policy
//     whose tier does not exist is held by the graph and enforced once the tier exists (Calico
//     refuses it at admission); LoadDir reports it. Order: spec.order, unset = OrderUnset
//     (last); equal orders go by the model's key, Kind/namespace/name.
//   - Selection: spec.selector (empty: all()), in the policy's namespace for a NetworkPolicy;
//     a GlobalNetworkPolicy's spec.namespaceSelector restricts it to the endpoints of the
//     matching namespaces, and spec.serviceAccountSelector of either kind to the endpoints
//     whose service account's labels (projectcalico.org/name its name) it matches, ANDed as
//     Calico ANDs it with the selector. A namespaceSelector of global() (host endpoints only)
//     makes the policy invalid: such a policy selects no pod in Calico either.
//   - Host endpoint stages (GlobalNetworkPolicy only): applyOnForward, preDNAT and doNotTrack
//     as model.Policy's fields of those names. Refused as Calico's validation refuses them:
//     preDNAT with doNotTrack, either without applyOnForward, preDNAT with egress rules or the
//     Egress type.
//   - types: explicit types apply the policy to those directions and ignore the other
//     direction's rules. Unset: Ingress, plus Egress when there are egress rules; Egress alone
//     when there are egress rules and no ingress rules.
//   - Rules in order, one model rule each (first match decides): Allow, Deny, Pass (to the
//     next tier), Log (then the next rule). ipVersion, protocol and notProtocol (a name — TCP,
//     UDP, ICMP, ICMPv6, SCTP, UDPLite, any case — or a number 1–255), icmp and notICMP
//     (type 0–254, code 0–255 with a type; only with protocol ICMP or ICMPv6, matching the IP
//     version), source and destination as peers (calicoPeer). Numeric ports need protocol TCP,
//     UDP or SCTP; named ports need no protocol (the port under whichever protocol the pod
//     declares it).
//   - http and services are not enforced: an Allow rule with one matches nothing (it allows
//     less, never more); a Deny or Log rule is kept without it (it denies or logs more); a
//     Pass rule becomes a Deny without it. Each is reported in ignored.
//
// Anything Calico's validation refuses (an unknown action, type or protocol, a selector that
// does not parse, a bad CIDR or port, ports on a protocol without ports, ICMP fields on
// another protocol) makes the policy invalid: the error names the field.
func convertCalicoPolicy(kind, namespace, name string, spec *CalicoPolicySpec) (model.Policy, []string, error) {
	if name == "" {
		return model.Policy{}, nil, errors.New("metadata.name is empty")
	}
	c := &calicoPolicy{tier: spec.Tier, namespace: namespace}
	if c.tier == "" {
		c.tier = calicoTierDefault
	}
	if errs := validation.IsDNS1123Subdomain(c.tier); len(errs) > 0 {
		return model.Policy{}, nil, fmt.Errorf("spec.tier: %q: %s", c.tier, strings.Join(errs, "; "))
	}
	pol := &c.policy
	*pol = model.Policy{Key: model.PolicyKey{Kind: kind, Namespace: namespace, Name: name}, Tier: CalicoTierName(c.tier),
		Order: calicoOrder(spec.Order), Namespace: namespace}
	switch {
	case namespace != "" && (spec.NamespaceSelector != "" || spec.ApplyOnForward || spec.PreDNAT || spec.DoNotTrack):
		return model.Policy{}, nil, errors.New("spec: namespaceSelector, applyOnForward, preDNAT and doNotTrack are fields of GlobalNetworkPolicy only")
	case spec.PreDNAT && spec.DoNotTrack:
		return model.Policy{}, nil, errors.New("spec: preDNAT and doNotTrack cannot both be true")
	case (spec.PreDNAT || spec.DoNotTrack) && !spec.ApplyOnForward:
		return model.Policy{}, nil, errors.New("spec.applyOnForward: must be true when preDNAT or doNotTrack is")
	case spec.PreDNAT && (len(spec.Egress) > 0 || slices.Contains(spec.Types, "Egress")):
		return model.Policy{}, nil, errors.New("spec: a preDNAT policy has no egress rules and no Egress type")
	}
	sel, err := calicoSelector(spec.Selector)
	if err != nil {
		return model.Policy{}, nil, fmt.Errorf("spec.selector: %w", err)
	}
	if sel == "" {
		sel = selector.All().String()
	}
	pol.Selector = sel
	// A GlobalNetworkPolicy without a namespace selector selects host endpoints too; it polices
	// the node's own traffic through them, not the traffic it forwards. A host endpoint has no
	// service account, so a service-account selector (even all()) leaves them out.
	pol.Hosts = namespace == "" && spec.NamespaceSelector == "" && spec.ServiceAccountSelector == ""
	pol.ApplyOnForward, pol.PreDNAT, pol.DoNotTrack = spec.ApplyOnForward, spec.PreDNAT, spec.DoNotTrack
	if strings.TrimSpace(spec.NamespaceSelector) == "global()" {
		return model.Policy{}, nil, errors.New("spec.namespaceSelector: global() at policy level (host endpoints and network sets only) is not supported")
	}
	if pol.NamespaceSelector, err = calicoSelector(spec.NamespaceSelector); err != nil {
		return model.Policy{}, nil, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	if pol.ServiceAccountSelector, err = calicoSelector(spec.ServiceAccountSelector); err != nil {
		return model.Policy{}, nil, fmt.Errorf("spec.serviceAccountSelector: %w", err)
	}
	if len(spec.Types) == 0 {
		pol.ApplyEgress = len(spec.Egress) > 0
		pol.ApplyIngress = len(spec.Ingress) > 0 || !pol.ApplyEgress
	}
	for i, t := range spec.Types {
		switch t {
		case "Ingress":
			pol.ApplyIngress = true
		case "Egress":
			pol.ApplyEgress = true
		default:
			return model.Policy{}, nil, fmt.Errorf("spec.types[%d]: unknown type %q (want Ingress or Egress)", i, t)
		}
	}
	for i := range spec.Ingress {
		r, ok, err := c.rule(model.Ingress, i, &spec.Ingress[i])
		if err != nil {
			return model.Policy{}, nil, fmt.Errorf("spec.ingress[%d].%w", i, err)
		}
		if ok && pol.ApplyIngress {
			pol.IngressRules = append(pol.IngressRules, r)
		}
	}
	for i := range spec.Egress {
		r, ok, err := c.rule(model.Egress, i, &spec.Egress[i])
		if err != nil {
			return model.Policy{}, nil, fmt.Errorf("spec.egress[%d].%w", i, err)
		}
		if ok && pol.ApplyEgress {
			pol.EgressRules = append(pol.EgressRules, r)
		}
	}
	return c.policy, c.ignored, nil
}

// calicoAction is the model's action of a Calico rule's.
func calicoAction(a string) (model.Action, error) {
	switch a {
	case "Allow":
		return model.ActionAllow, nil
	case "Deny":
		return model.ActionDeny, nil
	case "Pass":
		return model.ActionPass, nil
	case "Log":
		return model.ActionLog, nil
	}
	return 0, fmt.Errorf("action: unknown action %q (want Allow, Deny, Pass or Log)", a)
}

// rule converts rule index of a direction; ok is false for a rule left out (an Allow rule with
// a field that is not enforced).
func (c *calicoPolicy) rule(dir model.Direction, index int, r *CalicoRule) (mr model.Rule, ok bool, err error) {
	act, err := calicoAction(r.Action)
	if err != nil {
		return mr, false, err
	}
	mr = model.Rule{Action: act,
		Label: fmt.Sprintf("%s order %s %s rule %d", c.tier, orderText(c.policy.Order), dir, index)}
	if r.IPVersion != nil {
		if *r.IPVersion != 4 && *r.IPVersion != 6 {
			return mr, false, fmt.Errorf("ipVersion: %d (want 4 or 6)", *r.IPVersion)
		}
		mr.IPVersion = uint8(*r.IPVersion)
	}
	if r.Protocol != nil {
		if mr.Protocol, err = calicoProtocol(*r.Protocol); err != nil {
			return mr, false, fmt.Errorf("protocol: %w", err)
		}
	}
	if r.NotProtocol != nil {
		if mr.NotProtocol, err = calicoProtocol(*r.NotProtocol); err != nil {
			return mr, false, fmt.Errorf("notProtocol: %w", err)
		}
	}
	if mr.ICMP, err = calicoICMP(r.ICMP, mr.Protocol, mr.IPVersion); err != nil {
		return mr, false, fmt.Errorf("icmp%w", err)
	}
	if mr.NotICMP, err = calicoICMP(r.NotICMP, mr.Protocol, mr.IPVersion); err != nil {
		return mr, false, fmt.Errorf("notICMP%w", err)
	}
	if mr.Source, err = c.peer(&r.Source, mr.Protocol); err != nil {
		return mr, false, fmt.Errorf("source.%w", err)
	}
	if mr.Destination, err = c.peer(&r.Destination, mr.Protocol); err != nil {
		return mr, false, fmt.Errorf("destination.%w", err)
	}
	var unsupported []string
	if r.HTTP != nil {
		unsupported = append(unsupported, "http")
	}
	if r.Source.Services != nil {
		unsupported = append(unsupported, "source.services")
	}
	if r.Destination.Services != nil {
		unsupported = append(unsupported, "destination.services")
	}
	if len(unsupported) == 0 {
		return mr, true, nil
	}
	what := fmt.Sprintf("%s rule %d (%s): %s: not supported", dir, index, r.Action, strings.Join(unsupported, ", "))
	switch act {
	case model.ActionAllow:
		c.ignored = append(c.ignored, what+"; the rule matches nothing")
		return mr, false, nil
	case model.ActionPass:
		c.ignored = append(c.ignored, what+"; the rule denies what it matches without it")
		mr.Action = model.ActionDeny
	default:
		c.ignored = append(c.ignored, what+"; the rule matches without it")
	}
	return mr, true, nil
}

// calicoProtocol parses a protocol: a name (TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite, in any
// case) or a number 1–255.
func calicoProtocol(v NumOrString) (model.Protocol, error) {
	if v.IsNum {
		if v.Num < 1 || v.Num > 255 {
			return 0, fmt.Errorf("%d is out of range 1-255", v.Num)
		}
		return model.Protocol(v.Num), nil
	}
	switch strings.ToLower(v.Str) {
	case "tcp":
		return model.ProtocolTCP, nil
	case "udp":
		return model.ProtocolUDP, nil
	case "icmp":
		return model.ProtocolICMP, nil
	case "icmpv6":
		return model.ProtocolICMPv6, nil
	case "sctp":
		return model.ProtocolSCTP, nil
	case "udplite":
		return protocolUDPLite, nil
	}
	if n, err := strconv.Atoi(v.Str); err == nil {
		return calicoProtocol(NumOrString{Num: int64(n), IsNum: true})
	}
	return 0, fmt.Errorf("unknown protocol %q", v.Str)
}

// protocolUDPLite is UDP-Lite's protocol number.
const protocolUDPLite model.Protocol = 136

// calicoICMP converts an icmp or notICMP match: only with protocol ICMP (IPv4) or ICMPv6.
func calicoICMP(m *CalicoICMP, proto model.Protocol, ipVersion uint8) (*model.ICMPMatch, error) {
	if m == nil {
		return nil, nil
	}
	switch {
	case proto == model.ProtocolICMP && ipVersion != 6, proto == model.ProtocolICMPv6 && ipVersion != 4:
	default:
		return nil, fmt.Errorf(": needs protocol ICMP (with ipVersion 4 or none) or ICMPv6 (with ipVersion 6 or none), not %s", proto)
	}
	if m.Type == nil {
		if m.Code != nil {
			return nil, errors.New(".code: needs a type")
		}
		return nil, nil
	}
	if *m.Type < 0 || *m.Type > 254 {
		return nil, fmt.Errorf(".type: %d is out of range 0-254", *m.Type)
	}
	out := &model.ICMPMatch{Type: uint8(*m.Type)}
	if m.Code != nil {
		if *m.Code < 0 || *m.Code > 255 {
			return nil, fmt.Errorf(".code: %d is out of range 0-255", *m.Code)
		}
		code := uint8(*m.Code)
		out.Code = &code
	}
	return out, nil
}

// calicoSelector parses a selector into its canonical form ("" stays "").
func calicoSelector(s string) (string, error) {
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	sel, err := selector.Parse(s)
	if err != nil {
		return "", err
	}
	return sel.String(), nil
}

// calicoServiceAccountName is the label that holds a service account's name for
// serviceAccounts.names (one of Calico's automatic labels).
const calicoServiceAccountName = "projectcalico.org/name"

// peer converts a rule's source or destination (Calico's EntityRule, scoped as Felix scopes
// it, libcalico-go's updateprocessors/rules.go and felix/calc/rule_scanner.go):
//
//   - nets and notNets (a CIDR or an address) as Nets and NotNets;
//   - selector, namespaceSelector (global(): Peer.Global, cluster-scoped objects only) and
//     serviceAccounts (names: projectcalico.org/name in {…}; selector; both ANDed) as the
//     peer's selectors. In a namespaced policy a peer without namespaceSelector picks its
//     namespace's objects (the model's scoping);
//   - notSelector: where the peer also has a positive selector — selector, namespaceSelector,
//     serviceAccounts, or any selector at all in a namespaced policy, whose namespace is one —
//     it is merged into the selector, (selector) && !(notSelector), as Felix's rule scanner
//     does; otherwise it is the peer's NotSelector (no address of what it picks);
//   - ports and notPorts: a number, "first:last" or a name (calicoPort);
//   - every peer also picks network sets (Peer.NetworkSets).
func (c *calicoPolicy) peer(e *CalicoEntityRule, proto model.Protocol) (model.Peer, error) {
	p := model.Peer{NetworkSets: true}
	var err error
	if p.Nets, err = calicoNets(e.Nets); err != nil {
		return p, fmt.Errorf("nets%w", err)
	}
	if p.NotNets, err = calicoNets(e.NotNets); err != nil {
		return p, fmt.Errorf("notNets%w", err)
	}
	if p.Selector, err = calicoSelector(e.Selector); err != nil {
		return p, fmt.Errorf("selector: %w", err)
	}
	if strings.TrimSpace(e.NamespaceSelector) == "global()" {
		p.Global = true
	} else if p.NamespaceSelector, err = calicoSelector(e.NamespaceSelector); err != nil {
		return p, fmt.Errorf("namespaceSelector: %w", err)
	}
	if sa := e.ServiceAccounts; sa != nil {
		var parts []string
		if strings.TrimSpace(sa.Selector) != "" {
			parts = append(parts, "("+sa.Selector+")")
		}
		if len(sa.Names) > 0 {
			quoted := make([]string, len(sa.Names))
			for i, n := range sa.Names {
				if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
					return p, fmt.Errorf("serviceAccounts.names[%d]: %q: %s", i, n, strings.Join(errs, "; "))
				}
				quoted[i] = "'" + n + "'"
			}
			parts = append(parts, calicoServiceAccountName+" in {"+strings.Join(quoted, ", ")+"}")
		}
		if p.ServiceAccountSelector, err = calicoSelector(strings.Join(parts, " && ")); err != nil {
			return p, fmt.Errorf("serviceAccounts.selector: %w", err)
		}
	}
	if strings.TrimSpace(e.NotSelector) != "" {
		not, err := calicoSelector(e.NotSelector)
		if err != nil {
			return p, fmt.Errorf("notSelector: %w", err)
		}
		positive := p.Selector != "" || p.NamespaceSelector != "" || p.Global || p.ServiceAccountSelector != "" || c.namespace != ""
		if positive {
			base := p.Selector
			if base == "" {
				base = selector.All().String()
			}
			if p.Selector, err = calicoSelector("(" + base + ") && !(" + not + ")"); err != nil {
				return p, fmt.Errorf("notSelector: %w", err)
			}
		} else {
			p.NotSelector = not
		}
	}
	if p.Ports, err = calicoPorts(e.Ports, proto); err != nil {
		return p, fmt.Errorf("ports%w", err)
	}
	if p.NotPorts, err = calicoPorts(e.NotPorts, proto); err != nil {
		return p, fmt.Errorf("notPorts%w", err)
	}
	return p, nil
}

// calicoNets parses CIDRs (or single addresses) into canonical, distinct prefixes.
func calicoNets(nets []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, n := range nets {
		pfx, err := parseNet(n)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if !slices.Contains(out, pfx) {
			out = append(out, pfx)
		}
	}
	return out, nil
}

// parseNet parses a CIDR, or an address as its one-address prefix, canonically.
func parseNet(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return model.CanonicalPrefix(pfx), nil
}

// calicoPorts converts ports or notPorts: numeric ones only with protocol TCP, UDP or SCTP,
// named ones with no protocol or one of those.
func calicoPorts(ports []NumOrString, proto model.Protocol) ([]model.Port, error) {
	var out []model.Port
	for i, v := range ports {
		pt, err := calicoPort(v)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		switch proto {
		case model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP:
		case model.ProtocolAny:
			if pt.Name == "" {
				return nil, fmt.Errorf("[%d]: %s: a numeric port needs protocol TCP, UDP or SCTP", i, v)
			}
		default:
			return nil, fmt.Errorf("[%d]: protocol %s has no ports", i, proto)
		}
		if !slices.Contains(out, pt) {
			out = append(out, pt)
		}
	}
	return out, nil
}

// calicoPort parses a port: a number 0–65535, a range "first:last" (first ≤ last), or the
// name of a port the pod declares.
func calicoPort(v NumOrString) (model.Port, error) {
	num := func(n int64) (uint16, error) {
		if n < 0 || n > 65535 {
			return 0, fmt.Errorf("%d is out of range 0-65535", n)
		}
		return uint16(n), nil
	}
	if v.IsNum {
		n, err := num(v.Num)
		return model.Port{First: n, Last: n}, err
	}
	s := v.Str
	if first, last, isRange := strings.Cut(s, ":"); isRange {
		a, errA := strconv.ParseInt(first, 10, 64)
		b, errB := strconv.ParseInt(last, 10, 64)
		if errA != nil || errB != nil {
			return model.Port{}, fmt.Errorf("%q: want first:last", s)
		}
		f, err := num(a)
		if err != nil {
			return model.Port{}, err
		}
		l, err := num(b)
		if err != nil {
			return model.Port{}, err
		}
		if f > l {
			return model.Port{}, fmt.Errorf("%q: first is above last", s)
		}
		return model.Port{First: f, Last: l}, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		p, err := num(n)
		return model.Port{First: p, Last: p}, err
	}
	if errs := validation.IsValidPortName(s); len(errs) > 0 {
		return model.Port{}, fmt.Errorf("%q: %s", s, strings.Join(errs, "; "))
	}
	return model.Port{Name: s}, nil
}

// ConvertGlobalNetworkSet converts a GlobalNetworkSet (see convertNetworkSet).
func ConvertGlobalNetworkSet(s *GlobalNetworkSet) (model.NetworkSet, []string, error) {
	return convertNetworkSet("", s.Name, s.Labels, &s.Spec)
}

// ConvertCalicoNetworkSet converts a Calico NetworkSet (see convertNetworkSet).
func ConvertCalicoNetworkSet(s *CalicoNetworkSet) (model.NetworkSet, []string, error) {
	if s.Namespace == "" {
		return model.NetworkSet{}, nil, errors.New("metadata.namespace is empty")
	}
	return convertNetworkSet(s.Namespace, s.Name, s.Labels, &s.Spec)
}

// convertNetworkSet converts a network set: its labels, and its nets (a CIDR or an address
// each) canonical, sorted and distinct. allowedEgressDomains is not enforced (reported in
// ignored): the set matches its nets only.
func convertNetworkSet(namespace, name string, labels map[string]string, spec *CalicoNetworkSetSpec) (model.NetworkSet, []string, error) {
	if name == "" {
		return model.NetworkSet{}, nil, errors.New("metadata.name is empty")
	}
	nets, err := calicoNets(spec.Nets)
	if err != nil {
		return model.NetworkSet{}, nil, fmt.Errorf("spec.nets%w", err)
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var ignored []string
	if len(spec.AllowedEgressDomains) > 0 {
		ignored = append(ignored, "spec.allowedEgressDomains: not supported; the set matches its nets only")
	}
	return model.NetworkSet{Key: model.NetworkSetKey{Namespace: namespace, Name: name}, Labels: model.LabelsOf(labels), Nets: nets}, ignored, nil
}
