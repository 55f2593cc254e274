package graph_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestPodEdgeCases: API-valid but unusual pods each have a defined outcome. A policy in
// namespace x selects app == 'web' and allows ingress from app == 'client' pods of namespaces
// labelled team == 'blue' on the named port "http"; each case adds pods and states which set
// members and endpoint messages result.
func TestPodEdgeCases(t *testing.T) {
	long := strings.Repeat("v", 63)
	manyLabels := map[string]string{"kubernetes.io/metadata.name": "y", "team": "blue"}
	for i := range 62 {
		manyLabels[fmt.Sprintf("label-%02d", i)] = strings.Repeat(string(rune('a'+i%26)), 63)
	}
	var manyPorts []model.NamedPort
	for i := range 300 {
		manyPorts = append(manyPorts, model.NamedPort{Name: fmt.Sprint("p", i), Protocol: model.ProtocolTCP, Port: uint16(1000 + i)})
	}
	// "http" twice on two ports (two containers), and the whole list repeated (a sidecar
	// declaring the same ports): each distinct port once
	manyPorts = append(manyPorts, model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080},
		model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8081})
	manyPorts = append(manyPorts, manyPorts...)

	ep := func(ns, name, nodeName string, labels map[string]string, addrs []string, ports []model.NamedPort) model.Update {
		var as []netip.Addr
		for _, a := range addrs {
			as = append(as, netip.MustParseAddr(a))
		}
		return model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: ns, Name: name}, Node: nodeName,
			Labels: model.LabelsOf(labels), Addrs: as, NamedPorts: ports, Running: true}}
	}
	http := []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80}}
	base := []model.Update{
		nsU("x", lbl("kubernetes.io/metadata.name", "x")),
		nsU("y", lbl("kubernetes.io/metadata.name", "y", "team", "blue")),
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "web"},
			Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "app == 'web'", ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
				Source:      model.Peer{Selector: "app == 'client'", NamespaceSelector: "team == 'blue'"},
				Destination: model.Peer{Ports: []model.Port{{Name: "http"}}}}}}},
	}
	tests := []struct {
		name         string
		pods         []model.Update
		wantClients  []string // members of the clients' set
		wantHTTP     []string // members of the web pods' "http" set, addr/port
		wantLocal    map[string][]string
		extraUpdates []model.Update
	}{
		{"a pod without an IP: an endpoint without address, in no set, no dispatch entry",
			[]model.Update{ep("x", "web", node, lbl("app", "web"), nil, http), ep("y", "client", node, lbl("app", "client"), nil, nil)},
			nil, nil, map[string][]string{"x/web": nil, "y/client": nil}, nil},
		{"pods on a node that does not exist: remote, members of sets, no endpoint message",
			[]model.Update{ep("x", "web", "no-such-node", lbl("app", "web"), []string{"10.9.0.1"}, http),
				ep("y", "client", "no-such-node", lbl("app", "client"), []string{"10.9.0.2"}, nil),
				ep("x", "local-web", node, lbl("app", "web"), []string{"10.0.0.1"}, http)},
			[]string{"10.9.0.2"}, []string{"10.0.0.1/80", "10.9.0.1/80"}, map[string][]string{"x/local-web": {"10.0.0.1"}}, nil},
		{"a pod with 600 declared named ports: each distinct one resolves, repeats once",
			[]model.Update{ep("x", "web", node, lbl("app", "web"), []string{"10.0.0.1"}, manyPorts)},
			nil, []string{"10.0.0.1/8080", "10.0.0.1/8081"}, map[string][]string{"x/web": {"10.0.0.1"}}, nil},
		{"63-character label values and a namespace with 64 labels select exactly",
			[]model.Update{
				nsU("y", manyLabels),
				ep("y", "client", "node-b", lbl("app", "client", "long", long), []string{"10.1.0.1"}, nil),
				ep("y", "other", "node-b", lbl("app", "client-"+long[:55], "long", long[:62]), []string{"10.1.0.2"}, nil),
				ep("x", "web", node, lbl("app", "web", "long", long), []string{"10.0.0.1"}, http),
			},
			[]string{"10.1.0.1"}, []string{"10.0.0.1/80"}, map[string][]string{"x/web": {"10.0.0.1"}},
			[]model.Update{model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "long"},
				Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "long == '" + long + "'", ApplyIngress: true,
				IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "long == '" + long + "'",
					NamespaceSelector: "label-61 == '" + strings.Repeat("j", 63) + "' && label-00 == '" + strings.Repeat("a", 63) + "'"}}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ups := append(append(append([]model.Update{}, base...), tt.pods...), tt.extraUpdates...)
			_, st := run(t, ups...)
			web := st.Policies[model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "web"}]
			if len(web.Ingress) != 1 {
				t.Fatalf("policy x/web is not active: %s", st.Dump())
			}
			if got := setMembers(st, web.Ingress[0].Src.Sets[0]); got != fmt.Sprint(tt.wantClients) {
				t.Errorf("clients' set: %s, want %v", got, tt.wantClients)
			}
			if got := setMembers(st, web.Ingress[0].Dst.NamedPortSets[0]); got != fmt.Sprint(tt.wantHTTP) {
				t.Errorf("web pods' http set: %s, want %v", got, tt.wantHTTP)
			}
			got := map[string][]string{}
			for k, e := range st.Endpoints {
				var as []string
				for _, a := range e.Addrs {
					as = append(as, a.String())
				}
				got[k.String()] = as
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantLocal) {
				t.Errorf("endpoint messages %v, want %v", got, tt.wantLocal)
			}
			if tt.extraUpdates != nil {
				// the policy over 63-character values and 64 namespace labels: its peer set holds
				// exactly the pod whose value is the whole 63 characters
				p := st.Policies[model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "long"}]
				if len(p.Ingress) != 1 {
					t.Fatalf("policy x/long is not active: %s", st.Dump())
				}
				if got := setMembers(st, p.Ingress[0].Src.Sets[0]); got != "[10.1.0.1]" {
					t.Errorf("its peers' set: %s, want [10.1.0.1]", got)
				}
				if e := st.Endpoints[model.EndpointKey{Namespace: "x", Name: "web"}]; len(e.Ingress) != 1 || len(e.Ingress[0].Policies) != 2 {
					t.Errorf("x/web's ingress tiers %+v, want both policies (x/long selects its 63-character value)", e.Ingress)
				}
			}
		})
	}
}

// setMembers lists the members of set id ("[]" when it has none): addresses, and address/port
// for named-port sets.
func setMembers(st *graphtest.State, id dataplane.SetID) string {
	var out []string
	s := st.Sets[id]
	if s == nil {
		return "no set " + string(id)
	}
	ms := slices.SortedFunc(maps.Keys(s.Members), graph.CompareMembers)
	for _, m := range ms {
		if m.Port != 0 {
			out = append(out, fmt.Sprintf("%s/%d", m.Addr, m.Port))
		} else {
			out = append(out, m.Addr.String())
		}
	}
	return fmt.Sprint(out)
}
