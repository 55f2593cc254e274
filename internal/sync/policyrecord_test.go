package sync_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestPolicyFingerprint: the fingerprint a policy record keeps tells policies apart that differ
// in any one field — every field reachable from model.Policy, found by reflection, so a field
// added later is checked too — or in the order or direction of their rules, and is equal for
// equal policies built separately.
func TestPolicyFingerprint(t *testing.T) {
	all := filler{alt: -1}
	base := sync.PolicyFingerprint(all.policy(t))
	for alt := range all.n {
		f := filler{alt: alt}
		if p := f.policy(t); sync.PolicyFingerprint(p) == base {
			t.Errorf("%s changed, the fingerprint did not: %+v", f.altPath, p)
		}
	}
	if all.n < 30 {
		t.Errorf("only %d fields found in model.Policy", all.n)
	}

	conv := func() model.Policy {
		p, err := sync.ConvertNetworkPolicy(realisticPolicy(1))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// the cases below rely on realisticPolicy's ingress rules: one per peer (pods; namespaces and
	// pods; ipBlock)
	if p := conv(); len(p.IngressRules) != 3 || p.IngressRules[1].Source.NamespaceSelector == "" || len(p.IngressRules[2].Source.Nets) == 0 {
		t.Fatalf("realisticPolicy converts to other ingress rules: %+v", p.IngressRules)
	}
	for _, c := range []struct {
		name string
		b    func(*model.Policy) // applied to the second of two policies built separately
		same bool
	}{
		{"equal policies built separately", func(*model.Policy) {}, true},
		{"nil and empty lists", func(p *model.Policy) {
			for i := range p.IngressRules {
				p.IngressRules[i].Source.NotPorts = []model.Port{}
			}
		}, true},
		{"rule order", func(p *model.Policy) { slices.Reverse(p.IngressRules) }, false},
		{"a rule's direction", func(p *model.Policy) {
			p.EgressRules = append(p.EgressRules, p.IngressRules[0])
			p.IngressRules = p.IngressRules[1:]
		}, false},
		{"selector boundary", func(p *model.Policy) {
			s := &p.IngressRules[1].Source
			s.Selector, s.NamespaceSelector = s.Selector+s.NamespaceSelector[:1], s.NamespaceSelector[1:]
		}, false},
		{"IPv4 vs IPv4-mapped IPv6 prefix", func(p *model.Policy) {
			n := &p.IngressRules[2].Source.Nets[0]
			*n = netip.PrefixFrom(netip.AddrFrom16(n.Addr().As16()), n.Bits()+96)
		}, false},
		{"ICMP code any vs 0", func(p *model.Policy) { p.IngressRules[0].ICMP = &model.ICMPMatch{Code: new(uint8)} }, false},
	} {
		a, b := conv(), conv()
		c.b(&b)
		if fa, fb := sync.PolicyFingerprint(a), sync.PolicyFingerprint(b); (fa == fb) != c.same {
			t.Errorf("%s: fingerprints %x and %x of\n%+v\n%+v", c.name, fa, fb, a, b)
		}
	}
}

// filler builds a policy with every field set: pointers allocated, one element in each list,
// each other field a value of its own; the alt-th such field (in order) has a second value.
type filler struct {
	alt     int
	n       int    // fields set
	altPath string // the alt-th field
}

func (f *filler) policy(t *testing.T) model.Policy {
	t.Helper()
	var p model.Policy
	f.fill(t, reflect.ValueOf(&p).Elem(), "Policy")
	return p
}

func (f *filler) fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if !v.CanSet() {
		t.Fatalf("%s is not exported: the fingerprint cannot read it", path)
	}
	other := f.n == f.alt
	if other {
		f.altPath = path
	}
	pick := func(a, b string) string {
		if other {
			return b
		}
		return a
	}
	num := int64(1)
	if other {
		num = 2
	}
	switch v.Type() {
	case reflect.TypeFor[netip.Prefix]():
		f.n++
		v.Set(reflect.ValueOf(netip.MustParsePrefix(pick("10.0.0.0/8", "10.0.0.0/16"))))
		return
	case reflect.TypeFor[netip.Addr]():
		f.n++
		v.Set(reflect.ValueOf(netip.MustParseAddr(pick("10.0.0.1", "10.0.0.2"))))
		return
	}
	switch v.Kind() {
	case reflect.String:
		f.n++
		v.SetString(pick("a", "b"))
	case reflect.Bool:
		f.n++
		v.SetBool(other)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.n++
		v.SetInt(num)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.n++
		v.SetUint(uint64(num))
	case reflect.Float32, reflect.Float64:
		f.n++
		v.SetFloat(float64(num))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		f.fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		f.fill(t, v.Index(0), path+"[0]")
	case reflect.Array:
		for i := range v.Len() {
			f.fill(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s is a %s, which the fingerprint cannot hash", path, v.Type())
	}
}
