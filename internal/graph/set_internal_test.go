package graph

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestSetSizeAndAddrIndex: through random endpoint changes where addresses and named ports are
// shared between endpoints and repeated within one, every emitted set's size is the number of
// its members (it decides between a delta and a replacement), and the address index lists
// exactly the endpoints holding each address, in a set or not (an endpoint in no set still
// contests an address it shares).
func TestSetSizeAndAddrIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := New(Config{NodeName: "n"})
	g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})
	g.OnUpdate(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "local"}, Node: "n",
		Labels: model.LabelsOf(map[string]string{"app": "l"}), Addrs: []netip.Addr{netip.MustParseAddr("10.1.0.1")}}})
	to := func(proto model.Protocol, sel string) model.Rule {
		return model.Rule{Action: model.ActionAllow, Protocol: proto,
			Destination: model.Peer{Selector: sel, Ports: []model.Port{{Name: "http"}}}}
	}
	rules := []model.Rule{to(model.ProtocolTCP, "app == 'a'"), to(model.ProtocolAny, "has(app)")}
	policy := func(rules ...model.Rule) model.Update {
		return model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "p"},
			Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "app == 'l'", ApplyEgress: true, EgressRules: rules}}
	}
	g.OnUpdate(policy(rules...))
	g.Flush()

	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::1")}
	ports := []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 80}, {Name: "http", Protocol: model.ProtocolUDP, Port: 80},
		{Name: "http", Protocol: model.ProtocolTCP, Port: 81}, {Name: "dns", Protocol: model.ProtocolUDP, Port: 53}}
	for step := range 3000 {
		key := model.EndpointKey{Namespace: "x", Name: fmt.Sprintf("e%d", r.IntN(5))}
		switch {
		case r.IntN(20) == 0: // sets come and go with endpoints in them
			g.OnUpdate(policy([][]model.Rule{rules[:1], rules[1:], rules}[r.IntN(3)]...))
		case r.IntN(4) == 0:
			g.OnUpdate(model.EndpointDeleted{Key: key})
		default:
			e := model.Endpoint{Key: key, Node: "other", Labels: model.LabelsOf(map[string]string{"app": []string{"a", "b"}[r.IntN(2)]})}
			for range r.IntN(3) + 1 {
				e.Addrs = append(e.Addrs, addrs[r.IntN(len(addrs))]) // repeats too
			}
			for range r.IntN(4) {
				e.NamedPorts = append(e.NamedPorts, ports[r.IntN(len(ports))])
			}
			g.OnUpdate(model.EndpointSet{Endpoint: e})
		}
		if r.IntN(3) > 0 {
			continue // several changes per flush now and then
		}
		g.Flush()
		for _, s := range g.sets.sets {
			if n := len(g.sets.members(s)); s.size != n {
				t.Fatalf("step %d: set %s (%s) has size %d, %d members", step, s.id, s.desc, s.size, n)
			}
		}
		held := 0
		for e := range g.index.store.all() {
			n := 0
			for _, m := range e.matches.all() {
				n += len(m.sets)
			}
			if int(e.inSets) != n {
				t.Fatalf("step %d: %s is counted in %d sets, is in %d", step, e.key(), e.inSets, n)
			}
			for a := range e.net.addrs() { // each once (appendNet)
				held++
				n := 0
				for h := range g.sets.holders.of(a) {
					if h == e {
						n++
					}
				}
				if n != 1 {
					t.Fatalf("step %d: %s is listed %d times under %s", step, e.key(), n, a)
				}
			}
		}
		n := len(g.sets.holders.first)
		for _, hs := range g.sets.holders.others {
			n += len(hs)
		}
		if n != held {
			t.Fatalf("step %d: the address index has %d entries, the endpoints hold %d addresses", step, n, held)
		}
	}
}
