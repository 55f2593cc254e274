package scale_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// counts tallies an update list.
type counts struct {
	namespaces, pods, local, policies, inSync int
	shapes                                    map[string]int
	addrs                                     map[netip.Addr]int
}

func tally(ups []model.Update, node string) counts {
	c := counts{shapes: map[string]int{}, addrs: map[netip.Addr]int{}}
	for _, u := range ups {
		switch u := u.(type) {
		case model.NamespaceSet:
			c.namespaces++
		case model.EndpointSet:
			c.pods++
			if u.Endpoint.Node == node {
				c.local++
			}
			for _, a := range u.Endpoint.Addrs {
				c.addrs[a]++
			}
		case model.PolicySet:
			c.policies++
			c.shapes[strings.SplitN(u.Policy.Key.Name, "-", 3)[2]]++ // np-<index>-<shape>
		case model.SyncStatusUpdate:
			c.inSync++
		}
	}
	return c
}

func TestGenerateCounts(t *testing.T) {
	for _, s := range []scale.Spec{
		{Pods: 1000, Namespaces: 20, Policies: 120, LocalPods: 25, Node: "n1", Seed: 1},
		{Pods: 10, Namespaces: 3, Policies: 6, LocalPods: 10, Node: "n1", Seed: 2},
		{Pods: 5000, Namespaces: 100, Policies: 250, LocalPods: 0, Node: "n1", Seed: 3},
	} {
		t.Run(fmt.Sprintf("%d-pods", s.Pods), func(t *testing.T) {
			ups := scale.Generate(s)
			c := tally(ups, s.Node)
			if c.namespaces != s.Namespaces || c.pods != s.Pods || c.local != s.LocalPods || c.policies != s.Policies || c.inSync != 1 {
				t.Errorf("got %d namespaces, %d pods (%d local), %d policies, %d in-sync; want %d, %d (%d), %d, 1",
					c.namespaces, c.pods, c.local, c.policies, c.inSync, s.Namespaces, s.Pods, s.LocalPods, s.Policies)
			}
			if _, ok := ups[len(ups)-1].(model.SyncStatusUpdate); !ok {
				t.Errorf("last update is %T, want SyncStatusUpdate", ups[len(ups)-1])
			}
			if len(c.addrs) != 2*s.Pods {
				t.Errorf("%d distinct addresses for %d pods, want 2 per pod (v4 and v6)", len(c.addrs), s.Pods)
			}
			if s.Policies >= 6 && len(c.shapes) != 6 {
				t.Errorf("policy shapes %v, want all 6", c.shapes)
			}
		})
	}
}

func TestGenerateSpreadsLocalPods(t *testing.T) {
	s := scale.Spec{Pods: 10000, Namespaces: 100, Policies: 0, LocalPods: 100, Node: "here", Seed: 7}
	nss := map[string]bool{}
	for _, u := range scale.Generate(s) {
		if e, ok := u.(model.EndpointSet); ok && e.Endpoint.Node == "here" {
			nss[e.Endpoint.Key.Namespace] = true
		}
	}
	// a seeded permutation: 100 local pods land in many namespaces, not in 1 or 2
	if len(nss) < 40 {
		t.Errorf("100 local pods in only %d namespaces", len(nss))
	}
}

func TestGenerateIsDeterministic(t *testing.T) {
	s := scale.Spec{Pods: 2000, Namespaces: 30, Policies: 200, LocalPods: 40, Node: "n1", Seed: 42}
	a, b := scale.Generate(s), scale.Generate(s)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same spec differ")
	}
	s.Seed = 43
	if reflect.DeepEqual(a, scale.Generate(s)) {
		t.Fatal("a different seed gives the same cluster")
	}
}

// flush feeds updates to a fresh graph for node and returns its first flush, folded into a
// checked state.
func flush(t *testing.T, node string, ups []model.Update) ([]dataplane.Message, *graphtest.State) {
	t.Helper()
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	msgs := g.Flush()
	st := graphtest.NewState()
	if err := st.ApplyAll(msgs); err != nil {
		t.Fatalf("graph output breaks integrity: %v", err)
	}
	if ps := g.Problems(); len(ps) > 0 {
		t.Errorf("generated input has problems: %v", ps)
	}
	return msgs, st
}

func TestGenerateFeedsGraph(t *testing.T) {
	s := scale.Spec{Pods: 3000, Namespaces: 30, Policies: 300, LocalPods: 60, Node: "n1", Seed: 5}
	msgs, st := flush(t, s.Node, scale.Generate(s))
	var kinds = map[string]int{}
	for _, m := range msgs {
		kinds[fmt.Sprintf("%T", m)]++
	}
	if !st.InSync || len(st.Endpoints) != s.LocalPods || len(st.Policies) == 0 || len(st.Sets) == 0 {
		t.Fatalf("graph output: %v; want in-sync, %d endpoints, some policies and sets", kinds, s.LocalPods)
	}
	isolated := 0
	for _, e := range st.Endpoints {
		if len(e.Ingress) > 0 {
			isolated++
		}
	}
	if isolated == 0 {
		t.Errorf("no local endpoint is isolated for ingress")
	}
	named := 0
	for _, set := range st.Sets {
		if set.Kind == dataplane.SetNamedPorts {
			named++
		}
	}
	if named == 0 {
		t.Errorf("no named-port set in the graph output")
	}
}

// packetPathEndpoints are the server (10.0.0.2) and 4 clients (10.0.1.1–4) of the packet-path
// tests, on node n1.
func packetPathEndpoints() (model.Endpoint, []model.Endpoint) {
	server := model.Endpoint{Key: model.EndpointKey{Name: "server"}, Node: "n1", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}}
	var clients []model.Endpoint
	for i := range 4 {
		clients = append(clients, model.Endpoint{Key: model.EndpointKey{Name: fmt.Sprintf("client%d", i)}, Node: "n1",
			Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})}})
	}
	return server, clients
}

func TestPacketPathPolicies(t *testing.T) {
	addr := netip.MustParseAddr
	server, clients := packetPathEndpoints()
	tcp80 := func(src netip.Addr) graphtest.Packet {
		return graphtest.Packet{Src: src, Dst: addr("10.0.0.2"), Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: 80}
	}
	for _, n := range []int{0, 1, 10, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pp := scale.PacketPathPolicies(n, server, clients...)
			if len(pp.Peers) != n {
				t.Fatalf("%d peer lists for %d policies", len(pp.Peers), n)
			}
			_, st := flush(t, "n1", pp.Updates)
			if got := len(st.Policies); got != n {
				t.Errorf("%d active policies, want %d", got, n)
			}
			for _, c := range clients {
				if !st.Allowed(tcp80(c.Addrs[0])) {
					t.Errorf("client %s not allowed to the server's port 80", c.Key.Name)
				}
				if n > 0 && st.Allowed(graphtest.Packet{Src: c.Addrs[0], Dst: addr("10.0.0.2"), Proto: model.ProtocolTCP, DstPort: 81}) {
					t.Errorf("client %s allowed to port 81 with %d policies", c.Key.Name, n)
				}
			}
			if n > 1 {
				if want := clients[0].Addrs[0]; pp.Peers[n-1][0] != want {
					t.Errorf("last policy's peers %v, want the clients", pp.Peers[n-1])
				}
				if !st.Allowed(tcp80(pp.Peers[0][0])) {
					t.Errorf("peer of policy 0 (%v) not allowed", pp.Peers[0][0])
				}
			}
			if n > 0 && st.Allowed(tcp80(addr("10.9.9.9"))) {
				t.Errorf("an unknown source is allowed with %d policies", n)
			}
		})
	}
}

// TestPacketPathClusterPolicies: the clients pass every policy's rules but the last's, which
// allows them TCP 80 and denies everything else; the peers get their policy's action through
// the layers (a Pass in the admin tier ends at the last policy's deny of every pod).
func TestPacketPathClusterPolicies(t *testing.T) {
	addr := netip.MustParseAddr
	server, clients := packetPathEndpoints()
	to := func(src netip.Addr, port uint16) graphtest.Packet {
		return graphtest.Packet{Src: src, Dst: addr("10.0.0.2"), Proto: model.ProtocolTCP, SrcPort: 40000, DstPort: port}
	}
	for _, n := range []int{1, 10, 100} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			pp := scale.PacketPathClusterPolicies(n, server, clients...)
			_, st := flush(t, "n1", pp.Updates)
			if got := len(st.Policies); got != n {
				t.Errorf("%d active policies, want %d", got, n)
			}
			for _, c := range clients {
				if !st.Allowed(to(c.Addrs[0], 80)) || st.Allowed(to(c.Addrs[0], 81)) {
					t.Errorf("client %s: port 80 allowed %v, 81 allowed %v; want true, false", c.Key.Name,
						st.Allowed(to(c.Addrs[0], 80)), st.Allowed(to(c.Addrs[0], 81)))
				}
			}
			for _, p := range []struct {
				i    int
				want bool
				why  string
			}{
				{0, false, "admin Deny"}, {1, true, "baseline Pass: nothing after the baseline tier"},
				{2, true, "admin Allow"}, {4, false, "admin Pass, then the last policy's deny of every pod"},
				{5, true, "baseline Allow"},
			} {
				if p.i >= n-1 {
					continue
				}
				if got := st.Allowed(to(pp.Peers[p.i][0], 80)); got != p.want {
					t.Errorf("peer of policy %d (%s): allowed %v, want %v", p.i, p.why, got, p.want)
				}
			}
		})
	}
}

func TestFanout(t *testing.T) {
	for _, cluster := range []bool{false, true} {
		t.Run(fmt.Sprintf("cluster=%v", cluster), func(t *testing.T) { testFanout(t, cluster) })
	}
}

func testFanout(t *testing.T, cluster bool) {
	f := scale.Fanout{Selectors: 200, Members: 10, Pods: 500, Spares: 3, LocalPods: 4, Node: "n1", Cluster: cluster}
	ups := f.Updates()
	member := map[string]int{}
	for _, u := range ups {
		if e, ok := u.(model.EndpointSet); ok {
			for k := range e.Endpoint.Labels.All() {
				member[k]++
			}
		}
	}
	for k := range f.Selectors {
		if got := member[fmt.Sprintf("g%d", k)]; got != f.Members {
			t.Fatalf("selector g%d has %d members, want %d", k, got, f.Members)
		}
	}
	g := graph.New(graph.Config{NodeName: f.Node})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	st := graphtest.NewState()
	if err := st.ApplyAll(g.Flush()); err != nil {
		t.Fatal(err)
	}
	if len(st.Policies) != f.Selectors || len(st.Sets) != f.Selectors {
		t.Fatalf("%d policies and %d sets active, want %d each", len(st.Policies), len(st.Sets), f.Selectors)
	}
	// A spare joining one selector changes exactly that set, by its one address.
	g.OnUpdate(f.Join(1, 17))
	msgs := g.Flush()
	var changed []dataplane.SetMembersChanged
	for _, m := range msgs {
		if c, ok := m.(dataplane.SetMembersChanged); ok {
			changed = append(changed, c)
		}
	}
	if len(changed) != 1 || len(changed[0].Added) != 1 || changed[0].Added[0].Addr != f.SpareAddr(1) || len(changed[0].Removed) != 0 {
		t.Fatalf("join gave %#v, want one set gaining %v", msgs, f.SpareAddr(1))
	}
	g.OnUpdate(f.Leave(1))
	msgs = g.Flush()
	if len(msgs) != 1 {
		t.Fatalf("leave gave %#v, want one set change", msgs)
	}
}

func TestChurn(t *testing.T) {
	spec := scale.Spec{Pods: 2000, Namespaces: 20, Policies: 10, LocalPods: 50, Node: "n1", Seed: 4}
	churn := scale.Churn{Cluster: spec, Local: 0.1, Seed: 7}
	pods := map[model.EndpointKey]model.Endpoint{}
	addrs := map[netip.Addr]bool{}
	for _, u := range scale.Generate(spec) {
		if e, ok := u.(model.EndpointSet); ok {
			pods[e.Endpoint.Key] = e.Endpoint
			for _, a := range e.Endpoint.Addrs {
				addrs[a] = true
			}
		}
	}
	const n = 20000
	var changes []scale.PodChange
	kinds := map[scale.ChangeKind]int{}
	local := 0
	for ch := range churn.Changes() {
		if len(changes) == n {
			break
		}
		changes = append(changes, ch)
		kinds[ch.Kind]++
		if ch.Pod.Node == spec.Node {
			local++
		}
		switch ch.Kind {
		case scale.PodCreated:
			if _, ok := pods[ch.Pod.Key]; ok {
				t.Fatalf("change %d creates %v, which exists", len(changes), ch.Pod.Key)
			}
			for _, a := range ch.Pod.Addrs {
				if addrs[a] {
					t.Fatalf("change %d creates %v with %v, which another pod held", len(changes), ch.Pod.Key, a)
				}
				addrs[a] = true
			}
			pods[ch.Pod.Key] = ch.Pod
		case scale.PodDeleted:
			if !reflect.DeepEqual(pods[ch.Pod.Key], ch.Pod) {
				t.Fatalf("change %d deletes %v as %+v; it is %+v", len(changes), ch.Pod.Key, ch.Pod, pods[ch.Pod.Key])
			}
			delete(pods, ch.Pod.Key)
		case scale.PodRelabelled:
			if !reflect.DeepEqual(pods[ch.Pod.Key], ch.Before) {
				t.Fatalf("change %d relabels %v from %+v; it is %+v", len(changes), ch.Pod.Key, ch.Before, pods[ch.Pod.Key])
			}
			if ch.Pod.Labels.Map()["app"] == ch.Before.Labels.Map()["app"] {
				t.Fatalf("change %d relabels %v to the same app", len(changes), ch.Pod.Key)
			}
			pods[ch.Pod.Key] = ch.Pod
		}
	}
	// 2 : 2 : 1 within a few percent, and about the cluster's size at the end
	for kind, want := range map[scale.ChangeKind]float64{scale.PodCreated: 0.4, scale.PodDeleted: 0.4, scale.PodRelabelled: 0.2} {
		if got := float64(kinds[kind]) / n; got < want-0.02 || got > want+0.02 {
			t.Errorf("%v: %.3f of the changes, want %.2f", kind, got, want)
		}
	}
	if got := float64(local) / n; got < 0.08 || got > 0.12 {
		t.Errorf("%.3f of the changes on the local node, want 0.1", got)
	}
	if len(pods) < spec.Pods*8/10 || len(pods) > spec.Pods*12/10 {
		t.Errorf("%d pods after %d changes, from %d", len(pods), n, spec.Pods)
	}
	var again []scale.PodChange
	for ch := range churn.Changes() {
		if again = append(again, ch); len(again) == n {
			break
		}
	}
	if !reflect.DeepEqual(changes, again) {
		t.Error("the same Churn gave other changes")
	}
}
