package nft

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// unionCluster is a namespace of local servers that many NetworkPolicy-shaped policies select,
// each allowing TCP ports from its own selector of remote pods: the union shape (P7's).
type unionCluster struct {
	pods     map[model.EndpointKey]model.Endpoint
	policies map[model.PolicyKey]model.Policy
}

func (c *unionCluster) updates() []model.Update {
	us := []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "m", Labels: map[string]string{"kubernetes.io/metadata.name": "m"}}}}
	for _, k := range slices.SortedFunc(maps.Keys(c.pods), func(a, b model.EndpointKey) int { return cmpString(a.String(), b.String()) }) {
		us = append(us, model.EndpointSet{Endpoint: c.pods[k]})
	}
	for _, k := range slices.SortedFunc(maps.Keys(c.policies), func(a, b model.PolicyKey) int { return cmpString(a.String(), b.String()) }) {
		us = append(us, model.PolicySet{Policy: c.policies[k]})
	}
	return append(us, model.SyncStatusUpdate{Status: model.InSync})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func unionPod(name, node string, i int, labels map[string]string) model.Endpoint {
	return model.Endpoint{Key: model.EndpointKey{Namespace: "m", Name: name}, Node: node, Labels: model.LabelsOf(labels),
		Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}), netip.AddrFrom16([16]byte{0: 0xfd, 1: 9, 14: byte(i >> 8), 15: byte(i)})}}
}

func manyPolicy(i int, server string, ports ...uint16) model.Policy {
	var ps []model.Port
	for _, p := range ports {
		ps = append(ps, model.Port{First: p, Last: p})
	}
	return model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "m", Name: fmt.Sprintf("allow-%03d", i)},
		Tier: model.TierNetworkPolicy, Namespace: "m", Selector: server, ApplyIngress: true,
		IngressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Source: model.Peer{Selector: fmt.Sprintf("peer == 'g%d'", i%12)}, Destination: model.Peer{Ports: ps}}}}
}

// TestUnionIncrementalMatchesFresh: a group of many allow-only policies of selector peers and
// single ports takes the union shape, which lays out the same table as the plan's map shape;
// policies added and removed one at a time (the group keeps its name), pods joining and leaving
// the selectors, a group split and merged again and its lowest address leaving give, after every
// step, the table a fresh builder computes — with the union shape and without it.
func TestUnionIncrementalMatchesFresh(t *testing.T) {
	t.Run("budget", func(t *testing.T) { unionIncrementalMatchesFresh(t, 0) })
	// a budget near the union's work bound: the group goes from the union to the plan and back as
	// policies come and go (a budget the plan exceeds is not tested here: a rejection holds until
	// the policy's next version, so an incremental builder may reject what a fresh one does not)
	t.Run("tight", func(t *testing.T) { unionIncrementalMatchesFresh(t, 6000) })
}

func unionIncrementalMatchesFresh(t *testing.T, budget int64) {
	c := &unionCluster{pods: map[model.EndpointKey]model.Endpoint{}, policies: map[model.PolicyKey]model.Policy{}}
	for i := range 3 {
		e := unionPod(fmt.Sprintf("server-%d", i), "n", 1+i, map[string]string{"app": "server", "idx": fmt.Sprint(i)})
		c.pods[e.Key] = e
	}
	for i := range 48 {
		e := unionPod(fmt.Sprintf("peer-%d", i), "o", 100+i, map[string]string{"peer": fmt.Sprintf("g%d", i%12)})
		c.pods[e.Key] = e
	}
	for i := range 30 {
		ports := []uint16{80}
		if i%5 == 0 {
			ports = append(ports, 8080, 443)
		}
		c.policies[manyPolicy(i, "app == 'server'", ports...).Key] = manyPolicy(i, "app == 'server'", ports...)
	}
	g := graph.New(graph.Config{NodeName: "n"})
	b := NewBuilder(Config{CompileBudget: budget})
	apply := func(step string, us ...model.Update) {
		t.Helper()
		for _, u := range us {
			g.OnUpdate(u)
		}
		b.Apply(g.Flush())
		fresh := func(noUnion bool) string {
			fg := graph.New(graph.Config{NodeName: "n"})
			for _, u := range c.updates() {
				fg.OnUpdate(u)
			}
			fb := NewBuilder(Config{CompileBudget: budget})
			fb.opts.noUnion = noUnion
			fb.Apply(fg.Flush())
			return fb.Render()
		}
		got, want, plan := b.Render(), fresh(false), fresh(true)
		if want != plan {
			t.Fatalf("%s: the union shape's table differs from the plan's:\n--- plan\n%s\n--- union\n%s", step, plan, want)
		}
		if got != want {
			t.Fatalf("%s: the incremental table differs from a fresh one:\n--- fresh\n%s\n--- incremental\n%s", step, want, got)
		}
	}
	for _, u := range c.updates() {
		g.OnUpdate(u)
	}
	b.Apply(g.Flush())
	unions := 0
	for _, gr := range b.layout.groups {
		if gr.union != nil {
			unions++
		}
	}
	if budget == 0 && unions != 2 { // one group a family
		t.Fatalf("%d union-shaped groups, want 2: the test no longer exercises the union shape", unions)
	}
	names := slices.Sorted(maps.Keys(b.layout.groups))
	for _, i := range []int{0, 29, 14, 5} {
		p := manyPolicy(i, "app == 'server'", 80)
		delete(c.policies, p.Key)
		apply(fmt.Sprintf("policy %d deleted", i), model.PolicyDeleted{Key: p.Key})
		if got := slices.Sorted(maps.Keys(b.layout.groups)); !slices.Equal(got, names) {
			t.Fatalf("policy %d deleted: groups %v, want the same names %v", i, got, names)
		}
		c.policies[p.Key] = p
		apply(fmt.Sprintf("policy %d created again", i), model.PolicySet{Policy: p})
	}
	// a policy's rules changed in place, a policy moved to the head and to the tail of the tier,
	// two policies added at once at both ends
	p7 := manyPolicy(7, "app == 'server'", 80, 8443)
	c.policies[p7.Key] = p7
	apply("policy 7 changed", model.PolicySet{Policy: p7})
	for _, order := range []float64{-1, 5, 0} {
		p3 := manyPolicy(3, "app == 'server'", 80)
		p3.Order = order
		c.policies[p3.Key] = p3
		apply(fmt.Sprintf("policy 3 at order %v", order), model.PolicySet{Policy: p3})
	}
	first, last := manyPolicy(50, "app == 'server'", 80, 8081), manyPolicy(51, "app == 'server'", 8080)
	first.Order, last.Order = -2, 2
	c.policies[first.Key], c.policies[last.Key] = first, last
	apply("policies at both ends", model.PolicySet{Policy: first}, model.PolicySet{Policy: last})
	// a policy of one server only splits the group, and its deletion merges it again
	one := manyPolicy(40, "idx == '1'", 9000)
	c.policies[one.Key] = one
	apply("a policy of server-1", model.PolicySet{Policy: one})
	delete(c.policies, one.Key)
	apply("the policy of server-1 deleted", model.PolicyDeleted{Key: one.Key})
	// pods joining and leaving selectors: one peer re-granted
	for _, gr := range b.layout.groups {
		if budget == 0 && gr.union == nil {
			t.Fatalf("group %s is not union-shaped: the test no longer exercises a union's peers", gr.name)
		}
	}
	for i, grp := range []string{"g3", "g7", "none", "g0"} {
		k := model.EndpointKey{Namespace: "m", Name: fmt.Sprintf("peer-%d", i*5)}
		e := c.pods[k]
		e.Labels = model.LabelsOf(map[string]string{"peer": grp})
		c.pods[k] = e
		apply(fmt.Sprintf("peer-%d relabelled %s", i*5, grp), model.EndpointSet{Endpoint: e})
	}
	// a selector's set sent whole (more changed than it holds) with a policy deleted in the same
	// apply: the rules of the replaced set find their peers anew
	var us []model.Update
	for i := 11; i < 48; i += 12 {
		k := model.EndpointKey{Namespace: "m", Name: fmt.Sprintf("peer-%d", i)}
		e := c.pods[k]
		e.Labels = model.LabelsOf(map[string]string{"peer": "gone"})
		c.pods[k] = e
		us = append(us, model.EndpointSet{Endpoint: e})
	}
	e := unionPod("peer-99", "o", 199, map[string]string{"peer": "g11"})
	c.pods[e.Key] = e
	p1 := manyPolicy(1, "app == 'server'", 80)
	delete(c.policies, p1.Key)
	apply("set g11 replaced, policy 1 deleted", append(us, model.EndpointSet{Endpoint: e}, model.PolicyDeleted{Key: p1.Key})...)
	// a peer granted more than maxFastPorts ports: the group takes the plan
	for i := range 6 {
		p := manyPolicy(60+i*12, "app == 'server'", 2000+uint16(3*i), 3000+uint16(3*i), 4000+uint16(3*i))
		c.policies[p.Key] = p
		apply(fmt.Sprintf("wide policy %d", i), model.PolicySet{Policy: p})
	}
	// the lowest server leaves: the groups are renamed
	k := model.EndpointKey{Namespace: "m", Name: "server-0"}
	delete(c.pods, k)
	apply("server-0 deleted", model.EndpointDeleted{Key: k})
}
