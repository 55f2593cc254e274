package graph

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// TestAutomaticLabelAnchors: selectors on automatic labels are filed under anchors that keep
// their candidates narrow — projectcalico.org/namespace == "x" as if scoped to x, a service
// account's label by value — and the labels every endpoint carries are no anchor.
func TestAutomaticLabelAnchors(t *testing.T) {
	sel := func(s string) *selector.Selector { return selector.MustParse(s) }
	tests := []struct {
		spec spec
		want anchor
	}{
		{spec{ep: sel("projectcalico.org/namespace == 'x'")}, anchor{kind: anchorScope, key: "x"}},
		{spec{ep: sel("projectcalico.org/namespace == 'x' && app == 'a'")}, scopeEq("x", "app", "a")},
		{spec{ep: sel("app == 'a' && projectcalico.org/namespace == 'x'")}, scopeEq("x", "app", "a")},
		{spec{ep: sel("projectcalico.org/namespace == 'x'"), scope: "y"}, anchor{kind: anchorScope, key: "y"}},
		{spec{ep: sel("projectcalico.org/orchestrator == 'k8s'")}, anchor{kind: anchorNone}},
		{spec{ep: sel("projectcalico.org/orchestrator == 'k8s' && has(app)")}, anchor{kind: anchorEpKey, key: "app"}},
		{spec{ep: sel("has(projectcalico.org/namespace)")}, anchor{kind: anchorNone}},
		{spec{ep: sel("projectcalico.org/serviceaccount == 's'")}, anchor{kind: anchorEpEq, key: labelServiceAccount, value: "s"}},
		{spec{ns: sel("projectcalico.org/name == 'x'")}, anchor{kind: anchorNsEq, key: labelName, value: "x"}},
	}
	for _, tt := range tests {
		if got := chooseAnchor(tt.spec); got != tt.want {
			t.Errorf("%s: anchor %+v, want %+v", tt.spec.describe(), got, tt.want)
		}
	}

	// The candidates of such matchers are the endpoints they can match, not every endpoint.
	g := New(Config{NodeName: "n"})
	for i := range 100 {
		ns, sa := "y", ""
		if i < 3 {
			ns, sa = "x", "s"
		}
		g.OnUpdate(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: ns, Name: fmt.Sprint(i)}, Node: "n",
			ServiceAccount: sa, Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})}}})
	}
	g.OnUpdate(model.NamespaceSet{Namespace: model.Namespace{Name: "x"}})
	for _, s := range []spec{
		{ep: sel("projectcalico.org/namespace == 'x'")},
		{ep: sel("projectcalico.org/serviceaccount == 's'")},
		{ns: sel("projectcalico.org/name == 'x'")},
	} {
		m := g.index.acquireMatcher(s)
		candidates, members := 0, 0
		for range g.index.candidatesOf(m) {
			candidates++
		}
		for range g.index.membersOf(m).all {
			members++
		}
		if candidates != 3 || members != 3 {
			t.Errorf("%s: %d candidates, %d members, want 3 of each", s.describe(), candidates, members)
		}
		g.index.releaseMatcher(m)
	}

	// An endpoint moving to another service account is filed under its new value.
	m := g.index.acquireMatcher(spec{ep: sel("projectcalico.org/serviceaccount == 't'")})
	g.OnUpdate(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "0"}, Node: "n",
		ServiceAccount: "t", Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, 0})}}})
	members := 0
	for range g.index.membersOf(m).all {
		members++
	}
	if members != 1 {
		t.Errorf("projectcalico.org/serviceaccount == 't': %d members after a pod moved to t, want 1", members)
	}
}

// TestIntersectPrefixes: the addresses in both lists, as prefixes.
func TestIntersectPrefixes(t *testing.T) {
	ps := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return NormalizePrefixes(out)
	}
	tests := []struct{ a, b, want []netip.Prefix }{
		{ps("10.0.0.0/8"), ps("10.1.0.0/16", "11.0.0.0/8"), ps("10.1.0.0/16")},
		{ps("10.1.0.0/16", "10.2.0.0/16", "fd00::/64"), ps("10.0.0.0/8", "fd00::1/128"), ps("10.1.0.0/16", "10.2.0.0/16", "fd00::1/128")},
		{ps("10.0.0.0/24"), ps("10.0.1.0/24"), nil},
		{ps("10.0.0.0/24", "192.0.2.0/24"), ps("10.0.0.128/25", "192.0.2.5/32", "198.51.100.0/24"), ps("10.0.0.128/25", "192.0.2.5/32")},
		{ps("fd00::/8"), ps("10.0.0.0/8"), nil},
	}
	for _, tt := range tests {
		for _, pair := range [2][2][]netip.Prefix{{tt.a, tt.b}, {tt.b, tt.a}} {
			if got := IntersectPrefixes(pair[0], pair[1]); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("%v ∩ %v = %v, want %v", pair[0], pair[1], got, tt.want)
			}
		}
	}
}
