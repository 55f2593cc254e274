package graph_test

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// holder is a pod object holding addresses, with what the owner rule reads.
type holder struct {
	ns, name, node string
	running        bool
	age            time.Duration // created t0 - age
	addrs          []string
	labels         map[string]string
}

func (h holder) key() model.EndpointKey { return model.EndpointKey{Namespace: h.ns, Name: h.name} }

func (h holder) set() model.Update {
	var addrs []netip.Addr
	for _, a := range h.addrs {
		addrs = append(addrs, netip.MustParseAddr(a))
	}
	labels := h.labels
	if labels == nil {
		labels = lbl("app", "a")
	}
	return model.EndpointSet{Endpoint: model.Endpoint{Key: h.key(), Node: h.node, Labels: model.LabelsOf(labels),
		Addrs: addrs, Running: h.running, Created: t0.Add(-h.age)}}
}

func (h holder) deleted() model.Update { return model.EndpointDeleted{Key: h.key()} }

// ownerBase is a namespace and a policy selecting app == 'a' (ingress from app == 'client'),
// so that the holders have dispatch entries, and sets over app == 'a' pods of both polarities:
// one an Allow rule uses, one a Deny rule uses, and a named-port set a Deny rule uses negated.
func ownerBase() []model.Update {
	return []model.Update{
		nsU("x", lbl("kubernetes.io/metadata.name", "x")),
		nsU("y", lbl("kubernetes.io/metadata.name", "y")),
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "a-in"},
			Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "app == 'a'", ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'client'"}}}}},
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "to-a"},
			Tier: model.TierAdmin, Selector: "app == 'client'", ApplyEgress: true,
			EgressRules: []model.Rule{{Action: model.ActionAllow, Destination: model.Peer{Selector: "app == 'a'", NamespaceSelector: "all()",
				Ports: []model.Port{{Name: "http"}}}}}}},
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "deny-a"},
			Tier: model.TierBaseline, Selector: "app == 'client'", ApplyEgress: true,
			EgressRules: []model.Rule{
				{Action: model.ActionDeny, Destination: model.Peer{Selector: "app == 'a'", NamespaceSelector: "all()"}},
				{Action: model.ActionDeny, Destination: model.Peer{Selector: "app == 'a'", NamespaceSelector: "all()",
					NotPorts: []model.Port{{Name: "http"}}}}}}},
		pod("x", "client", node, "10.0.0.100", lbl("app", "client")),
	}
}

// owners maps each address the state's endpoints list to the endpoint listing it.
func owners(st *graphtest.State) map[netip.Addr]model.EndpointKey {
	out := map[netip.Addr]model.EndpointKey{}
	for k, e := range st.Endpoints {
		for _, a := range e.Addrs {
			out[a] = k
		}
	}
	return out
}

// TestAddressOwner: of the endpoints holding one address, exactly one lists it in its
// EndpointUpdated — a running one over one that does not run, then the newest, then the
// smallest key — and the others keep their other addresses. Remote endpoints take no part.
func TestAddressOwner(t *testing.T) {
	shared, own6 := "10.0.0.9", "fd00::9"
	tests := []struct {
		name    string
		holders []holder
		want    map[string]string // address → owner key
	}{
		{"running over pending, though older", []holder{
			{ns: "x", name: "a", node: node, running: true, age: time.Hour, addrs: []string{shared}},
			{ns: "x", name: "b", node: node, running: false, addrs: []string{shared}},
		}, map[string]string{shared: "x/a"}},
		{"both running: the newer", []holder{
			{ns: "x", name: "a", node: node, running: true, age: time.Hour, addrs: []string{shared}},
			{ns: "x", name: "b", node: node, running: true, addrs: []string{shared}},
		}, map[string]string{shared: "x/b"}},
		{"neither running: the newer", []holder{
			{ns: "x", name: "a", node: node, addrs: []string{shared}},
			{ns: "x", name: "b", node: node, age: time.Second, addrs: []string{shared}},
		}, map[string]string{shared: "x/a"}},
		{"equal claims: the smaller key", []holder{
			{ns: "x", name: "b", node: node, running: true, addrs: []string{shared}},
			{ns: "x", name: "a", node: node, running: true, addrs: []string{shared}},
		}, map[string]string{shared: "x/a"}},
		{"equal claims in two namespaces: the smaller namespace", []holder{
			{ns: "y", name: "a", node: node, running: true, addrs: []string{shared}},
			{ns: "x", name: "z", node: node, running: true, addrs: []string{shared}},
		}, map[string]string{shared: "x/z"}},
		{"a remote holder takes no part, however new and running", []holder{
			{ns: "x", name: "a", node: node, age: time.Hour, addrs: []string{shared}},
			{ns: "x", name: "b", node: "no-such-node", running: true, addrs: []string{shared}},
		}, map[string]string{shared: "x/a"}},
		{"the loser keeps the address it holds alone", []holder{
			{ns: "x", name: "a", node: node, running: true, addrs: []string{shared}},
			{ns: "x", name: "b", node: node, addrs: []string{shared, own6}},
		}, map[string]string{shared: "x/a", own6: "x/b"}},
		{"three holders", []holder{
			{ns: "x", name: "a", node: node, running: true, age: 2 * time.Hour, addrs: []string{shared}},
			{ns: "x", name: "b", node: node, running: true, age: time.Hour, addrs: []string{shared}},
			{ns: "x", name: "c", node: node, addrs: []string{shared}},
		}, map[string]string{shared: "x/b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// every order of arrival gives the same owner
			for _, order := range permutations(len(tt.holders)) {
				ups := ownerBase()
				for _, i := range order {
					ups = append(ups, tt.holders[i].set())
				}
				_, st := run(t, ups...)
				got := map[string]string{}
				for a, k := range owners(st) {
					if a.String() != "10.0.0.100" {
						got[a.String()] = k.String()
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("order %v: owners %v, want %v", order, got, tt.want)
				}
				for _, h := range tt.holders {
					if h.node != node {
						if _, ok := st.Endpoints[h.key()]; ok {
							t.Errorf("order %v: remote %s has an endpoint message", order, h.key())
						}
					} else if _, ok := st.Endpoints[h.key()]; !ok {
						t.Errorf("order %v: local %s has no endpoint message (a loser is still an endpoint)", order, h.key())
					}
				}
				// the set over app == 'a' holds the address once, whoever owns it
				if !setHas(st, `app == "a"`, netip.MustParseAddr(shared)) {
					t.Errorf("order %v: the set of app == 'a' lacks %s", order, shared)
				}
			}
		})
	}
}

// setHas reports whether the address set described as desc holds a.
func setHas(st *graphtest.State, desc string, a netip.Addr) bool {
	for _, s := range st.Sets {
		if s.Description == desc {
			_, ok := s.Members[dataplane.Member{Addr: a}]
			return ok
		}
	}
	return false
}

// permutations lists every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			out = append(out, slices.Insert(slices.Clone(p), i, n-1))
		}
	}
	return out
}

// interleavings lists every merge of the sequences that keeps each one's own order.
func interleavings(seqs [][]model.Update) [][]model.Update {
	var out [][]model.Update
	pos := make([]int, len(seqs))
	var cur []model.Update
	var walk func()
	walk = func() {
		done := true
		for i, s := range seqs {
			if pos[i] == len(s) {
				continue
			}
			done = false
			cur = append(cur, s[pos[i]])
			pos[i]++
			walk()
			pos[i]--
			cur = cur[:len(cur)-1]
		}
		if done {
			out = append(out, slices.Clone(cur))
		}
	}
	walk()
	return out
}

// TestSharedAddressEveryOrder: two local pods holding one address — w, running, and l, which
// does not run, or starts running and then owns it as the newer — are created, relabelled,
// moved to another node, started and deleted in every interleaving of their own sequences,
// with and without a remote pod holding the address too. Flushed after every update, the state
// is each time the one a fresh graph builds from the objects as they then are (so when the
// owner goes, the next one takes the address over, and the selector set keeps the address
// while any holder matches), and an update of one pod never emits a message for another one
// whose owned addresses did not change: removing, relabelling or moving the loser never
// touches the winner's entries.
func TestSharedAddressEveryOrder(t *testing.T) {
	const addr = "10.0.0.9"
	w := holder{ns: "x", name: "w", node: node, running: true, age: time.Hour, addrs: []string{addr, "fd00::9"},
		labels: lbl("app", "a")}
	l := holder{ns: "x", name: "l", node: node, addrs: []string{addr}, labels: lbl("app", "a")}
	relabel := func(h holder) holder { h.labels = lbl("app", "b"); return h }
	move := func(h holder) holder { h.node = "node-b"; return h }
	start := func(h holder) holder { h.running = true; return h }
	remote := holder{ns: "y", name: "r", node: "node-b", running: true, addrs: []string{addr}, labels: lbl("app", "a")}
	wSeqs := map[string][]model.Update{
		"create":                {w.set()},
		"create,relabel":        {w.set(), relabel(w).set()},
		"create,delete":         {w.set(), w.deleted()},
		"create,move":           {w.set(), move(w).set()},
		"create,relabel,delete": {w.set(), relabel(w).set(), w.deleted()},
	}
	lSeqs := map[string][]model.Update{
		"create,delete":         {l.set(), l.deleted()},
		"create,relabel,delete": {l.set(), relabel(l).set(), l.deleted()},
		"create,move,delete":    {l.set(), move(l).set(), l.deleted()},
		"create,start,delete":   {l.set(), start(l).set(), l.deleted()},
		"create,start,relabel":  {l.set(), start(l).set(), start(relabel(l)).set()},
	}
	runs := 0
	for _, wName := range slices.Sorted(maps.Keys(wSeqs)) {
		for _, lName := range slices.Sorted(maps.Keys(lSeqs)) {
			for _, withRemote := range []bool{false, true} {
				base := ownerBase()
				if withRemote {
					base = append(base, remote.set())
				}
				for _, ups := range interleavings([][]model.Update{wSeqs[wName], lSeqs[lName]}) {
					runs++
					checkEveryStep(t, fmt.Sprintf("w %s, l %s, remote %v, order %s", wName, lName, withRemote, describeOrder(ups)), base, ups)
				}
			}
		}
	}
	if runs < 400 {
		t.Fatalf("only %d interleavings ran", runs)
	}
}

func describeOrder(ups []model.Update) string {
	var parts []string
	for _, u := range ups {
		switch u := u.(type) {
		case model.EndpointSet:
			e := u.Endpoint
			parts = append(parts, fmt.Sprintf("set %s(%s,%s,running=%v)", e.Key.Name, e.Labels, e.Node, e.Running))
		case model.EndpointDeleted:
			parts = append(parts, "delete "+u.Key.Name)
		}
	}
	return strings.Join(parts, "; ")
}

// checkEveryStep feeds base, then ups one flush at a time, and checks each step against a
// fresh graph and that no endpoint but the updated one gets a message unless its owned
// addresses changed.
func checkEveryStep(t *testing.T, what string, base, ups []model.Update) {
	t.Helper()
	g, st := run(t, base...)
	current := map[model.EndpointKey]model.Update{}
	for i, u := range ups {
		var key model.EndpointKey
		switch u := u.(type) {
		case model.EndpointSet:
			key = u.Endpoint.Key
			current[key] = u
		case model.EndpointDeleted:
			key = u.Key
			delete(current, key)
		}
		before := maps.Clone(st.Endpoints)
		g.OnUpdate(u)
		msgs := g.Flush()
		if err := st.ApplyAll(msgs); err != nil {
			t.Fatalf("%s: step %d: %v", what, i, err)
		}
		for _, m := range msgs {
			var k model.EndpointKey
			switch m := m.(type) {
			case dataplane.EndpointUpdated:
				k = m.Key
			case dataplane.EndpointRemoved:
				k = m.Key
			default:
				continue
			}
			if k == key {
				continue
			}
			if old, ok := before[k]; ok && slices.Equal(old.Addrs, st.Endpoints[k].Addrs) {
				t.Fatalf("%s: step %d (%s) emitted %#v for %s, whose addresses did not change", what, i, describeOrder(ups[i:i+1]), m, k)
			}
		}
		fresh := slices.Clone(base)
		for _, k := range slices.SortedFunc(maps.Keys(current), func(a, b model.EndpointKey) int { return strings.Compare(a.String(), b.String()) }) {
			fresh = append(fresh, current[k])
		}
		if got, want := st.Dump(), replay(t, fresh, 0, 1<<30).Dump(); got != want {
			t.Fatalf("%s: step %d: state differs from a fresh graph's\n--- got\n%s--- want\n%s", what, i, got, want)
		}
	}
}
