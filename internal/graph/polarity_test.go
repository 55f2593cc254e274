package graph_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// An address held by two pods of different labels is a member of a set as the polarity of the
// set's use says: for a set an Allow rule uses positively, only while both pods match; for one
// a Deny or Pass rule uses positively, while either does; negated (not-ports), the other way
// round, so that a contested address is never allowed more, nor denied less, than each pod
// behind it would be. Once one pod is gone, the other's labels alone decide, in both
// polarities.
func TestReusedAddressBySetPolarity(t *testing.T) {
	const addr = "10.0.0.9"
	http := model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}
	old := pod("x", "old", "node-b", addr, lbl("app", "client"), http)
	reused := pod("x", "new", "node-b", addr, lbl("app", "other"), http)
	mbAddr := dataplane.Member{Addr: netip.MustParseAddr(addr)}
	mbPort := dataplane.Member{Addr: mbAddr.Addr, Protocol: model.ProtocolTCP, Port: 8080}
	selectors := []struct {
		sel          string
		oldIn, newIn bool
	}{
		{"app == 'client'", true, false},
		{"app == 'other'", false, true},
		{"has(app)", true, true},
		{"app == 'none'", false, false},
	}
	for _, action := range []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass, model.ActionLog} {
		restricts := action == model.ActionDeny || action == model.ActionPass
		for _, negated := range []bool{false, true} {
			for _, s := range selectors {
				// A positive use: every holder for an allow, any holder for a deny or pass;
				// a negated one the other way round.
				wantBoth := s.oldIn && s.newIn
				wantEither := s.oldIn || s.newIn
				want := wantBoth
				if restricts != negated {
					want = wantEither
				}
				name := action.String() + " " + map[bool]string{false: "positive", true: "negated"}[negated] + " " + s.sel
				t.Run(name, func(t *testing.T) {
					peer := model.Peer{Selector: s.sel}
					if negated {
						peer.NotPorts = []model.Port{{Name: "http"}}
					} else {
						peer.Ports = []model.Port{{Name: "http"}}
					}
					key := pk("ClusterNetworkPolicy", "", "p")
					p := model.PolicySet{Policy: model.Policy{Key: key, Tier: model.TierAdmin, Selector: "app == 'web'",
						ApplyEgress: true, EgressRules: []model.Rule{{Action: action, Protocol: model.ProtocolTCP,
							Destination: model.Peer{Selector: s.sel, NamespaceSelector: "all()", Ports: peer.Ports, NotPorts: peer.NotPorts}}}}}
					g, st := run(t, old, pod("x", "web", node, "10.0.0.1", lbl("app", "web")), p)
					dst := st.Policies[key].Egress[0].Dst
					portSets := dst.NamedPortSets
					if negated {
						portSets = dst.NotNamedPortSets
					}
					if len(dst.Sets) != 1 || len(portSets) != 1 {
						t.Fatalf("rule refers to address sets %v and port sets %v, want one each", dst.Sets, portSets)
					}
					check := func(step string, wantAddr, wantPort bool) {
						t.Helper()
						if got := member(st, dst.Sets[0], mbAddr); got != wantAddr {
							t.Errorf("%s: %s in the peer set %q: %v, want %v", step, addr, st.Sets[dst.Sets[0]].Description, got, wantAddr)
						}
						if got := member(st, portSets[0], mbPort); got != wantPort {
							t.Errorf("%s: %s/tcp/8080 in the named-port set %q: %v, want %v", step, addr, st.Sets[portSets[0]].Description, got, wantPort)
						}
					}
					// The peer's address set is used positively whatever the ports are.
					positive := wantBoth
					if restricts {
						positive = wantEither
					}
					check("old pod alone", s.oldIn, s.oldIn)
					apply(t, g, st, reused)
					check("both pods", positive, want)
					apply(t, g, st, model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: "old"}})
					check("new pod alone", s.newIn, s.newIn)
				})
			}
		}
	}
}

// A selector that an Allow rule and a Deny rule both use is two sets: the allow's keeps the ID
// it has with no Deny in the cluster; the deny's is another, marked as counting any holder.
func TestSelectorOfBothPolaritiesIsTwoSets(t *testing.T) {
	web := pod("x", "web", node, "10.0.0.1", lbl("app", "web"))
	allow := pol(pk("NetworkPolicy", "x", "in"), model.TierNetworkPolicy, 0, "app == 'web'", true, false,
		model.Rule{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'client'"}})
	deny := model.PolicySet{Policy: model.Policy{Key: pk("ClusterNetworkPolicy", "", "deny"), Tier: model.TierAdmin,
		Selector: "app == 'web'", ApplyIngress: true, IngressRules: []model.Rule{{Action: model.ActionDeny,
			Source: model.Peer{Selector: "app == 'client'", NamespaceSelector: "kubernetes.io/metadata.name == 'x'"}}}}}
	_, alone := run(t, nsU("x", lbl("kubernetes.io/metadata.name", "x")), web, allow)
	_, both := run(t, nsU("x", lbl("kubernetes.io/metadata.name", "x")), web, allow, deny)
	allowID := alone.Policies[pk("NetworkPolicy", "x", "in")].Ingress[0].Src.Sets[0]
	if got := both.Policies[pk("NetworkPolicy", "x", "in")].Ingress[0].Src.Sets[0]; got != allowID {
		t.Errorf("allow set %s with a deny in the cluster, %s without", got, allowID)
	}
	denyID := both.Policies[pk("ClusterNetworkPolicy", "", "deny")].Ingress[0].Src.Sets[0]
	if denyID == allowID || !strings.HasPrefix(string(denyID), "any_") {
		t.Errorf("deny set %s, allow set %s: want another ID, starting any_", denyID, allowID)
	}
	if d := both.Sets[denyID].Description; !strings.HasSuffix(d, " (any holder)") {
		t.Errorf("deny set described %q, want it to end in (any holder)", d)
	}
}

func member(st *graphtest.State, id dataplane.SetID, mb dataplane.Member) bool {
	s := st.Sets[id]
	if s == nil {
		return false
	}
	_, ok := s.Members[mb]
	return ok
}
