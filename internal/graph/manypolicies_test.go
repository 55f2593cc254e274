package graph_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// manyPolicies is n NetworkPolicies selecting the server of namespace "many", policy i allowing
// TCP 80 from the pods labelled peer=p<i>, with peers pods per policy.
type manyPolicies struct{ n, peers int }

func (m manyPolicies) server() model.Update {
	return pod("many", "server", node, "10.9.0.1", lbl("role", "server"))
}

func (m manyPolicies) peerAddr(i, j int) string {
	k := i*m.peers + j + 1
	return fmt.Sprintf("10.8.%d.%d", k>>8, k&0xff)
}

// peer is pod j of policy i, labelled for policy to (i, or another one after a relabel).
func (m manyPolicies) peer(i, j, to int) model.Update {
	return pod("many", fmt.Sprintf("peer-%d-%d", i, j), "node-b", m.peerAddr(i, j), lbl("peer", fmt.Sprintf("p%d", to)))
}

func (m manyPolicies) policy(i int) model.Update {
	return model.PolicySet{Policy: model.Policy{
		Key:  model.PolicyKey{Kind: "NetworkPolicy", Namespace: "many", Name: fmt.Sprintf("allow-%04d", i)},
		Tier: model.TierNetworkPolicy, Namespace: "many", Selector: "role == 'server'", ApplyIngress: true,
		IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source:      model.Peer{Selector: fmt.Sprintf("peer == 'p%d'", i)},
			Destination: model.Peer{Ports: tcp(80)}}},
	}}
}

// TestManyPoliciesOnOneEndpoint: many policies selecting one endpoint, each with a selector of
// its own over one label key, added, deleted and re-added in random order while their peers
// are relabelled between the policies' values, flushed after every update: the state is at
// every tenth step a fresh graph's, and each peer is allowed to the server exactly when a
// present policy selects it (graphtest.Evaluate).
func TestManyPoliciesOnOneEndpoint(t *testing.T) {
	m := manyPolicies{n: 200, peers: 3}
	r := rand.New(rand.NewPCG(3, 5))
	current := map[string]model.Update{} // every object's latest update
	label := map[[2]int]int{}            // peer (i, j) → the policy its label names
	present := map[int]bool{}
	var order []string
	set := func(key string, u model.Update) {
		if _, ok := current[key]; !ok {
			order = append(order, key)
		}
		current[key] = u
	}
	g := graph.New(graph.Config{NodeName: node})
	st := graphtest.NewState()
	step := func(u model.Update) {
		t.Helper()
		g.OnUpdate(u)
		if err := st.ApplyAll(g.Flush()); err != nil {
			t.Fatalf("%#v: %v", u, err)
		}
	}
	step(model.SyncStatusUpdate{Status: model.InSync})
	for _, u := range []model.Update{nsU("many", lbl()), m.server()} {
		set(fmt.Sprint(u), u)
		step(u)
	}
	for i := range m.n {
		for j := range m.peers {
			u := m.peer(i, j, i)
			label[[2]int{i, j}] = i
			set(fmt.Sprintf("peer-%d-%d", i, j), u)
			step(u)
		}
	}
	for s := range 3 * m.n {
		i := r.IntN(m.n)
		key := fmt.Sprintf("policy-%d", i)
		switch {
		case s%7 == 6: // a peer moves to another policy's value
			j, to := r.IntN(m.peers), r.IntN(m.n)
			u := m.peer(i, j, to)
			label[[2]int{i, j}] = to
			set(fmt.Sprintf("peer-%d-%d", i, j), u)
			step(u)
		case present[i] && r.IntN(3) == 0:
			present[i] = false
			u := model.PolicyDeleted{Key: m.policy(i).(model.PolicySet).Policy.Key}
			set(key, nil)
			step(u)
		default:
			present[i] = true
			u := m.policy(i)
			set(key, u)
			step(u)
		}
		if s%10 != 9 && s != 3*m.n-1 {
			continue
		}
		var objs []model.Update
		for _, k := range order {
			if u := current[k]; u != nil {
				objs = append(objs, u)
			}
		}
		if got, want := st.Dump(), replay(t, objs, 0, 1<<30).Dump(); got != want {
			t.Fatalf("step %d: state differs from a fresh graph's\n--- got\n%s--- want\n%s", s, got, want)
		}
	}
	serverAddr := netip.MustParseAddr("10.9.0.1")
	anyPresent := false
	for i := range m.n {
		anyPresent = anyPresent || present[i]
	}
	for i := range m.n {
		for j := range m.peers {
			src := netip.MustParseAddr(m.peerAddr(i, j))
			want := present[label[[2]int{i, j}]] || !anyPresent
			if got := st.Allowed(graphtest.Packet{Src: src, Dst: serverAddr, Proto: model.ProtocolTCP, DstPort: 80}); got != want {
				t.Errorf("peer %d/%d (label p%d) → server TCP 80: allowed %v, want %v", i, j, label[[2]int{i, j}], got, want)
			}
			if got := st.Allowed(graphtest.Packet{Src: src, Dst: serverAddr, Proto: model.ProtocolTCP, DstPort: 81}); got != !anyPresent {
				t.Errorf("peer %d/%d → server TCP 81: allowed %v", i, j, got)
			}
		}
	}
}
