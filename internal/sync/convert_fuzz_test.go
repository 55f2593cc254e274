package sync_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// FuzzConvertNetworkPolicy: a NetworkPolicy decoded from the input's manifest (JSON, as the API
// server serves it; nothing when it does not decode) and extended by a builder from the input's
// choices, if any (selectors of every operator over keys and values valid and not, ipBlocks of
// both families with excepts inside and outside their CIDR, ports numeric, ranged and named,
// protocols, policyTypes, peers of every combination), never makes ConvertNetworkPolicy panic.
// It returns an error and no policy, or a policy whose selectors parse in their canonical form,
// which converting again, a deep copy or the policy after a JSON round trip gives again, which
// leaves its input as it was, and which has the shape and meaning convert.go's comment states
// (checkShape). A policy the API server accepts (apiAccepts) is never refused. The seeds are the
// converter's table cases and sixteen builds.
func FuzzConvertNetworkPolicy(f *testing.F) {
	for _, c := range convertCases {
		f.Add(manifest(f, netpol(c.spec)), []byte(nil))
	}
	for _, c := range invalidCases {
		f.Add(manifest(f, netpol(c.spec)), []byte(nil))
	}
	for i := range 16 {
		f.Add([]byte(nil), []byte{byte(i), byte(i >> 1)})
	}
	f.Fuzz(func(t *testing.T, doc, choices []byte) {
		var np networkingv1.NetworkPolicy
		if json.Unmarshal(doc, &np) != nil {
			np = networkingv1.NetworkPolicy{}
		}
		if len(choices) > 0 {
			fromScratch := reflect.DeepEqual(np, networkingv1.NetworkPolicy{})
			c := testenv.NewChoices(choices)
			b := &builder{c: c, wild: c.Intn(2) == 1}
			b.policy(&np)
			if fromScratch && !b.wild && !apiAccepts(&np) {
				t.Fatalf("a tame builder made a policy the API server refuses (or apiAccepts is wrong):\n%s", manifest(t, &np))
			}
		}
		in := np.DeepCopy()
		pol, err := sync.ConvertNetworkPolicy(&np)
		if !reflect.DeepEqual(&np, in) {
			t.Fatalf("the conversion changed its input:\n%s\nto\n%s", manifest(t, in), manifest(t, &np))
		}
		if err != nil {
			if apiAccepts(&np) {
				t.Fatalf("the API server accepts this policy, the converter refuses it: %v\n%s", err, manifest(t, &np))
			}
			if !reflect.DeepEqual(pol, model.Policy{}) {
				t.Fatalf("an invalid policy came back half converted: %+v", pol)
			}
			return
		}
		for _, s := range selectorsOf(pol) {
			if p, err := selector.Parse(s); err != nil || p.String() != s {
				t.Fatalf("selector %q does not parse into itself: %v\n%s", s, err, manifest(t, &np))
			}
		}
		var rt networkingv1.NetworkPolicy
		if err := json.Unmarshal(manifest(t, &np), &rt); err != nil {
			t.Fatal(err)
		}
		for what, o := range map[string]*networkingv1.NetworkPolicy{"again": &np, "a deep copy": np.DeepCopy(), "after a JSON round trip": &rt} {
			if again, err := sync.ConvertNetworkPolicy(o); err != nil || !reflect.DeepEqual(again, pol) {
				t.Fatalf("converted %s: %+v, %v; first %+v\n%s", what, again, err, pol, manifest(t, &np))
			}
		}
		checkShape(t, &np, pol)
	})
}

func manifest(tb testing.TB, np *networkingv1.NetworkPolicy) []byte {
	b, err := json.Marshal(np)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// builder extends a NetworkPolicy with what its choices draw. A tame builder draws only what
// the API server accepts; a wild one draws, a time in four, from what it refuses too.
type builder struct {
	c    *testenv.Choices
	wild bool
}

// pick draws one of valid, or (wild, a time in four) one of invalid.
func (b *builder) pick(valid []string, invalid ...string) string {
	if b.wild && len(invalid) > 0 && b.c.Intn(4) == 3 {
		return invalid[b.c.Intn(len(invalid))]
	}
	return valid[b.c.Intn(len(valid))]
}

func (b *builder) oneOf(ss ...string) string { return ss[b.c.Intn(len(ss))] }

// odd reports, for a wild builder a time in n, that it draws something the API server refuses.
func (b *builder) odd(n int) bool { return b.wild && b.c.Intn(n) == n-1 }

var (
	validKeys = []string{"app", "env", "example.com/app", "k8s.io/name", "a.b-c_d", "A1", "all", "has", "in",
		"not", "contains", "starts", "ends", "with", strings.Repeat("k", 63), "x.y/z"}
	invalidKeys   = []string{"", "bad key", "-app", strings.Repeat("k", 64), "a'b", `a"b`, "a(b", "!a", "x/y/z"}
	validValues   = []string{"a", "b", "prod", "", "A-b_c.d", strings.Repeat("v", 63), "1"}
	invalidValues = []string{strings.Repeat("v", 64), "with space", `a"b`, "a'b", `a'"b`, "-a", "ü", "}", ",", "&&", ")"}
)

// policy extends np: its namespace and name when empty, then a pod selector, policy types,
// ingress and egress rules.
func (b *builder) policy(np *networkingv1.NetworkPolicy) {
	if np.Namespace == "" {
		np.Namespace = b.pick([]string{"x", "kube-system", "a-b"}, "", "Not_A_Namespace")
	}
	if np.Name == "" {
		np.Name = "np"
	}
	if b.c.Intn(2) == 1 {
		np.Spec.PodSelector = *b.labelSelector()
	}
	for k := b.c.Intn(3); k > 0; k-- {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyType(b.pick([]string{"Ingress", "Egress"}, "Sideways", "ingress")))
	}
	for k := b.c.Intn(3); k > 0; k-- {
		np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: b.peers(), Ports: b.ports()})
	}
	for k := b.c.Intn(3); k > 0; k-- {
		np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: b.peers(), Ports: b.ports()})
	}
}

// labelSelector draws matchLabels and matchExpressions of every operator.
func (b *builder) labelSelector() *metav1.LabelSelector {
	ls := &metav1.LabelSelector{}
	for k := b.c.Intn(3); k > 0; k-- {
		if ls.MatchLabels == nil {
			ls.MatchLabels = map[string]string{}
		}
		ls.MatchLabels[b.pick(validKeys, invalidKeys...)] = b.pick(validValues, invalidValues...)
	}
	for k := b.c.Intn(3); k > 0; k-- {
		r := metav1.LabelSelectorRequirement{Key: b.pick(validKeys, invalidKeys...),
			Operator: metav1.LabelSelectorOperator(b.pick([]string{"Exists", "In", "NotIn", "DoesNotExist"}, "Near", "in", ""))}
		n := 0
		if r.Operator == metav1.LabelSelectorOpIn || r.Operator == metav1.LabelSelectorOpNotIn {
			n = 1
		}
		if b.odd(4) {
			n = 1 - n // In without values, Exists with
		}
		for n += b.c.Intn(3) * n; n > 0; n-- {
			r.Values = append(r.Values, b.pick(validValues, invalidValues...))
		}
		ls.MatchExpressions = append(ls.MatchExpressions, r)
	}
	return ls
}

func (b *builder) peers() []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for k := b.c.Intn(3); k > 0; k-- {
		var p networkingv1.NetworkPolicyPeer
		switch b.c.Intn(5) {
		case 0:
			p.PodSelector = b.labelSelector()
		case 1:
			p.NamespaceSelector = b.labelSelector()
		case 2:
			p.PodSelector, p.NamespaceSelector = b.labelSelector(), b.labelSelector()
		default:
			p.IPBlock = b.ipBlock()
		}
		if b.odd(8) { // no peer at all, or an ipBlock with a selector
			p = networkingv1.NetworkPolicyPeer{}
			if b.c.Intn(2) == 0 {
				p.IPBlock, p.PodSelector = b.ipBlock(), b.labelSelector()
			}
		}
		out = append(out, p)
	}
	return out
}

// ipBlock draws an ipBlock: a CIDR of either family and excepts strictly inside it; wild, the
// CIDR with host bits or in a form the API server refuses, excepts equal to it, around it, of
// the other family or malformed.
func (b *builder) ipBlock() *networkingv1.IPBlock {
	c := b.c
	addr := func(is4 bool) netip.Addr {
		if is4 {
			return netip.AddrFrom4([4]byte{byte(c.Intn(256)), byte(c.Intn(256)), byte(c.Intn(256)), byte(c.Intn(256))})
		}
		return netip.AddrFrom16([16]byte{0: 0xfd, 2: byte(c.Intn(256)), 3: byte(c.Intn(256)), 14: byte(c.Intn(256)), 15: byte(c.Intn(256))})
	}
	is4 := c.Intn(2) == 0
	maxBits := 128
	if is4 {
		maxBits = 32
	}
	bits := c.Intn(maxBits + 1)
	cidr := netip.PrefixFrom(addr(is4), bits)
	ib := &networkingv1.IPBlock{CIDR: cidr.Masked().String()}
	if b.odd(4) {
		ib.CIDR = b.oneOf(cidr.String(), "010.0.0.0/8", "::ffff:10.0.0.0/104", "10.0.0.0/33", "10.0.0.1", "",
			"fd00::/129", " 10.0.0.0/8", "10.0.0.0/08", "FD00::/8", "fd00:0::/16", "x")
	}
	for k := c.Intn(3); k > 0; k-- {
		if !b.odd(3) {
			if bits == maxBits {
				continue
			}
			inner := netip.PrefixFrom(addr(is4), bits+1+c.Intn(maxBits-bits))
			a, base := inner.Addr().AsSlice(), cidr.Masked().Addr().AsSlice()
			for i := range a { // the CIDR's bits, then the inner prefix's own
				keep := min(max(bits-8*i, 0), 8)
				a[i] = base[i]&^(0xff>>keep) | a[i]&(0xff>>keep)
			}
			ea, _ := netip.AddrFromSlice(a)
			ib.Except = append(ib.Except, netip.PrefixFrom(ea, inner.Bits()).Masked().String())
			continue
		}
		switch c.Intn(3) {
		case 0: // the CIDR itself, or a prefix holding it
			p, _ := cidr.Addr().Prefix(bits - c.Intn(bits+1))
			ib.Except = append(ib.Except, p.String())
		case 1: // anywhere in the family, or in the other
			p, _ := addr(is4 == (c.Intn(4) > 0)).Prefix(c.Intn(33))
			ib.Except = append(ib.Except, p.String())
		default:
			ib.Except = append(ib.Except, b.oneOf("10.0.0.0/33", "nope", "::ffff:10.1.0.0/112", "10.1.2.3/16"))
		}
	}
	return ib
}

// ports draws a rule's ports: a protocol or none, a port number, a range or a name, or no port;
// wild, protocols, numbers and names the API server refuses, ranges backwards, endPort without
// a port or with a name.
func (b *builder) ports() []networkingv1.NetworkPolicyPort {
	c := b.c
	var out []networkingv1.NetworkPolicyPort
	for k := c.Intn(3); k > 0; k-- {
		var p networkingv1.NetworkPolicyPort
		if proto := corev1.Protocol(b.pick([]string{"", "TCP", "UDP", "SCTP"}, "ICMP", "", "tcp")); proto != "" || b.odd(2) {
			p.Protocol = &proto
		}
		num := func() int32 {
			if b.odd(4) {
				return []int32{0, 65536, -1}[c.Intn(3)]
			}
			return []int32{1, 53, 80, 65535, int32(1 + c.Intn(65535))}[c.Intn(5)]
		}
		switch c.Intn(4) {
		case 1:
			p.Port = ptr(intstr.FromInt32(num()))
		case 2:
			p.Port = ptr(intstr.FromString(b.pick([]string{"http", "dns", "web-8080", "a", "abcdefghijklmno", "x1"},
				"Not_A_Name", "", "123", "abcdefghijklmnop", "a--b", "-a")))
		case 3:
			first := num()
			end := first + int32(c.Intn(int(65536-min(max(first, 1), 65535))))
			if b.odd(4) {
				end = []int32{first - 1, 65536}[c.Intn(2)]
			}
			p.Port, p.EndPort = ptr(intstr.FromInt32(first)), &end
		}
		if b.odd(8) {
			p.EndPort = ptr(num()) // without a port, or with a name
		}
		out = append(out, p)
	}
	return out
}

// apiAccepts reports whether kube-apiserver v1.36 with its default feature gates accepts np on
// create: ValidateNetworkPolicy of k8s.io/kubernetes/pkg/apis/networking/validation (with
// StrictIPCIDRValidation, on by default since 1.36), written again over apimachinery's
// validators, as k8s.io/kubernetes is no dependency of this module.
func apiAccepts(np *networkingv1.NetworkPolicy) bool {
	spec := field.NewPath("spec")
	if len(validation.IsDNS1123Label(np.Namespace)) > 0 || len(validation.IsDNS1123Subdomain(np.Name)) > 0 ||
		!validSelector(&np.Spec.PodSelector) {
		return false
	}
	if len(np.Spec.PolicyTypes) > 2 {
		return false
	}
	for _, t := range np.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			return false
		}
	}
	for _, r := range specRules(np) {
		for _, p := range r.ports {
			if !validPort(p) {
				return false
			}
		}
		for _, p := range r.peers {
			n := 0
			for _, s := range []*metav1.LabelSelector{p.PodSelector, p.NamespaceSelector} {
				if s != nil {
					n++
					if !validSelector(s) {
						return false
					}
				}
			}
			if p.IPBlock != nil && (n > 0 || !validIPBlock(spec, p.IPBlock)) || p.IPBlock == nil && n == 0 {
				return false
			}
		}
	}
	return true
}

func validSelector(ls *metav1.LabelSelector) bool {
	return len(metav1validation.ValidateLabelSelector(ls, metav1validation.LabelSelectorValidationOptions{}, field.NewPath("selector"))) == 0
}

func validPort(p networkingv1.NetworkPolicyPort) bool {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP && *p.Protocol != corev1.ProtocolUDP && *p.Protocol != corev1.ProtocolSCTP {
		return false
	}
	switch {
	case p.Port == nil:
		return p.EndPort == nil
	case p.Port.Type == intstr.String:
		return p.EndPort == nil && len(validation.IsValidPortName(p.Port.StrVal)) == 0
	case len(validation.IsValidPortNum(int(p.Port.IntVal))) > 0:
		return false
	}
	return p.EndPort == nil || *p.EndPort >= p.Port.IntVal && len(validation.IsValidPortNum(int(*p.EndPort))) == 0
}

func validIPBlock(path *field.Path, b *networkingv1.IPBlock) bool {
	if b.CIDR == "" || len(validation.IsValidCIDRForLegacyField(path, b.CIDR, true, nil)) > 0 {
		return false
	}
	_, cidr, _ := net.ParseCIDR(b.CIDR) // what strict validation accepts, net.ParseCIDR reads as the server does
	for _, e := range b.Except {
		if len(validation.IsValidCIDRForLegacyField(path, e, true, nil)) > 0 {
			return false
		}
		_, ex, _ := net.ParseCIDR(e)
		cl, _ := cidr.Mask.Size()
		el, _ := ex.Mask.Size()
		if !cidr.Contains(ex.IP) || cl >= el {
			return false
		}
	}
	return true
}

// specRule is an ingress or egress rule of a spec: its peers and ports.
type specRule struct {
	dir   model.Direction
	peers []networkingv1.NetworkPolicyPeer
	ports []networkingv1.NetworkPolicyPort
}

func specRules(np *networkingv1.NetworkPolicy) []specRule {
	var out []specRule
	for _, r := range np.Spec.Ingress {
		out = append(out, specRule{model.Ingress, r.From, r.Ports})
	}
	for _, r := range np.Spec.Egress {
		out = append(out, specRule{model.Egress, r.To, r.Ports})
	}
	return out
}

// checkShape holds a converted policy to convert.go's comment: key, namespace, the NetworkPolicy
// tier at order 1000; the directions of policyTypes, defaulted; for each rule of a direction the
// policy applies to, in order, one Allow rule per peer (none: one that matches everyone) and per
// protocol of its ports (none: any protocol), each peer meaning what it means in Kubernetes
// (samePods: selectors select the same labels; an ipBlock is its CIDR minus its excepts) and
// the protocol's ports their union (a port entry without a port: every port).
func checkShape(t *testing.T, np *networkingv1.NetworkPolicy, pol model.Policy) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\npolicy %s\nmodel  %+v", fmt.Sprintf(format, args...), manifest(t, np), pol)
	}
	if pol.Key != (model.PolicyKey{Kind: sync.KindNetworkPolicy, Namespace: np.Namespace, Name: np.Name}) ||
		pol.Namespace != np.Namespace || pol.Tier != model.TierNetworkPolicy || pol.Order != 1000 {
		fail("key, namespace, tier or order")
	}
	in, eg := true, len(np.Spec.Egress) > 0
	if len(np.Spec.PolicyTypes) > 0 {
		in = slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
		eg = slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	}
	if pol.ApplyIngress != in || pol.ApplyEgress != eg {
		fail("applies to ingress %v and egress %v, want %v and %v", pol.ApplyIngress, pol.ApplyEgress, in, eg)
	}
	if why := samePods(&np.Spec.PodSelector, pol.Selector); why != "" {
		fail("spec.podSelector: %s", why)
	}
	next := map[model.Direction]int{}
	for _, r := range specRules(np) {
		rules, applies := pol.IngressRules, in
		if r.dir == model.Egress {
			rules, applies = pol.EgressRules, eg
		}
		if !applies {
			continue
		}
		peers := r.peers
		if len(peers) == 0 {
			peers = []networkingv1.NetworkPolicyPeer{{}}
		}
		var protos []model.Protocol
		all, ports := map[model.Protocol]bool{}, map[model.Protocol][]model.Port{}
		for _, p := range r.ports {
			proto := map[corev1.Protocol]model.Protocol{corev1.ProtocolUDP: model.ProtocolUDP, corev1.ProtocolSCTP: model.ProtocolSCTP}[ptrOr(p.Protocol, "")]
			if proto == model.ProtocolAny {
				proto = model.ProtocolTCP // nil, "" or TCP: the converter takes "" for the default
			}
			if !slices.Contains(protos, proto) {
				protos = append(protos, proto)
			}
			switch {
			case p.Port == nil:
				all[proto] = true
			case p.Port.Type == intstr.String:
				ports[proto] = append(ports[proto], model.Port{Name: p.Port.StrVal})
			default:
				ports[proto] = append(ports[proto], model.Port{First: uint16(p.Port.IntVal), Last: uint16(ptrOr(p.EndPort, p.Port.IntVal))})
			}
		}
		if len(protos) == 0 {
			protos, all[model.ProtocolAny] = []model.Protocol{model.ProtocolAny}, true
		}
		for _, peer := range peers {
			for _, proto := range protos {
				i := next[r.dir]
				next[r.dir]++
				if i >= len(rules) {
					fail("%s: fewer rules than peers × protocols", r.dir)
				}
				mr := rules[i]
				src, dst := mr.Source, mr.Destination
				gotPorts := dst.Ports
				dst.Ports = nil
				peerSide, localSide := src, dst
				if r.dir == model.Egress {
					peerSide, localSide = dst, src
				}
				want := ports[proto]
				if all[proto] {
					want = nil
				}
				switch {
				case mr.Action != model.ActionAllow || mr.Protocol != proto || mr.NotProtocol != 0 || mr.IPVersion != 0 ||
					mr.ICMP != nil || mr.NotICMP != nil:
					fail("%s rule %d: action, protocol or another match", r.dir, i)
				case len(src.Ports) > 0 || !reflect.DeepEqual(localSide, model.Peer{}):
					fail("%s rule %d: source ports, or the local side restricts", r.dir, i)
				case !samePorts(gotPorts, want):
					fail("%s rule %d: ports %v, want %v", r.dir, i, gotPorts, want)
				}
				if why := samePeer(&peer, peerSide); why != "" {
					fail("%s rule %d: %s", r.dir, i, why)
				}
			}
		}
	}
	if next[model.Ingress] != len(pol.IngressRules) || next[model.Egress] != len(pol.EgressRules) {
		fail("%d ingress and %d egress rules, want %d and %d", len(pol.IngressRules), len(pol.EgressRules), next[model.Ingress], next[model.Egress])
	}
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// samePorts: the same ports, each once.
func samePorts(got, want []model.Port) bool {
	key := func(a, b model.Port) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }
	g, w := slices.SortedFunc(slices.Values(got), key), slices.SortedFunc(slices.Values(want), key)
	return len(slices.Compact(slices.Clone(g))) == len(g) && slices.Equal(g, slices.Compact(w))
}

// samePeer explains how a converted peer differs from what a NetworkPolicy peer means ("" when
// it does not): none (the zero peer) matches everyone.
func samePeer(p *networkingv1.NetworkPolicyPeer, m model.Peer) string {
	if m.ServiceAccountSelector != "" || len(m.NotPorts) > 0 {
		return "a service account or negated port match"
	}
	if p.IPBlock != nil {
		cidr := model.CanonicalPrefix(netip.MustParsePrefix(p.IPBlock.CIDR))
		var except []netip.Prefix
		for _, e := range p.IPBlock.Except {
			if e := model.CanonicalPrefix(netip.MustParsePrefix(e)); !slices.Contains(except, e) {
				except = append(except, e)
			}
		}
		if m.Selector != "" || m.NamespaceSelector != "" || !slices.Equal(m.Nets, []netip.Prefix{cidr}) || !slices.Equal(m.NotNets, except) {
			return fmt.Sprintf("ipBlock %v except %v converted to %+v", cidr, except, m)
		}
		return ""
	}
	if len(m.Nets) > 0 || len(m.NotNets) > 0 {
		return "a selector peer with addresses"
	}
	if why := samePods(p.PodSelector, m.Selector); why != "" {
		return "podSelector: " + why
	}
	if why := samePods(p.NamespaceSelector, m.NamespaceSelector); why != "" {
		return "namespaceSelector: " + why
	}
	return ""
}

// samePods explains how the converted selector s selects other labels than the LabelSelector
// ls ("" when it does not; s is "" exactly when ls is nil). The labels tried are every
// combination of ls's keys absent or with a value ls names or another, up to 512.
func samePods(ls *metav1.LabelSelector, s string) string {
	if ls == nil || s == "" {
		if ls != nil || s != "" {
			return fmt.Sprintf("%v converted to %q", ls, s)
		}
		return ""
	}
	k8s, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return "" // labels the API server would refuse: no meaning to compare
	}
	sel := selector.MustParse(s)
	values := map[string][]string{}
	for k, v := range ls.MatchLabels {
		values[k] = append(values[k], v)
	}
	for _, r := range ls.MatchExpressions {
		values[r.Key] = append(values[r.Key], r.Values...)
	}
	keys := slices.Sorted(maps.Keys(values))
	for n := 0; n < 512; n++ {
		m, rest := map[string]string{}, n
		for _, k := range keys {
			opts := append(slices.Clone(values[k]), "other")
			if i := rest % (len(opts) + 1); i > 0 {
				m[k] = opts[i-1]
			}
			rest /= len(opts) + 1
		}
		if rest > 0 && n > 0 {
			break // every combination tried
		}
		if want, got := k8s.Matches(k8slabels.Set(m)), sel.Evaluate(selector.Map(m)); got != want {
			return fmt.Sprintf("%q on labels %v gives %v, Kubernetes' %v", s, m, got, want)
		}
	}
	return ""
}
