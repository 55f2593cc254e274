package nft

import (
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// TestGroupChainKeepsItsProperties: the kernel keeps a chain's comment as it was created, so a
// changed one costs a write of the whole table; a group chain's name keeps its properties when
// it passes to a group of other policies. Pod a holds the lowest address; relabelled from
// policy 0's selector to policy 1's, it brings the name of its old group to its new one, whose
// last rule then names policy 1.
func TestGroupChainKeepsItsProperties(t *testing.T) {
	c := &unionCluster{pods: map[model.EndpointKey]model.Endpoint{}, policies: map[model.PolicyKey]model.Policy{}}
	a := unionPod("a", "n", 1, map[string]string{"app": "a"})
	for _, e := range []model.Endpoint{a, unionPod("b", "n", 2, map[string]string{"app": "b"})} {
		c.pods[e.Key] = e
	}
	for _, p := range []model.Policy{manyPolicy(0, "app == 'a'", 80), manyPolicy(1, "app == 'b'", 443)} {
		c.policies[p.Key] = p
	}
	g := graph.New(graph.Config{NodeName: "n"})
	b := NewBuilder(Config{})
	for _, u := range c.updates() {
		g.OnUpdate(u)
	}
	b.Apply(g.Flush())
	before := map[string]ruleset.Chain{}
	for n, ch := range b.table.Chains {
		before[n] = *ch
	}
	name := groupName(model.Ingress, dispatchKey{dir: model.Ingress, addr: a.Addrs[0]})
	last := func(ch *ruleset.Chain) string { return ch.Rules[len(ch.Rules)-1].Comment }
	if ch := b.table.Chains[name]; ch == nil || !strings.Contains(last(ch), "NetworkPolicy/m/allow-000") {
		t.Fatalf("before: chain %s is %+v, want pod a's group, whose last rule names allow-000", name, ch)
	}

	a.Labels = model.LabelsOf(map[string]string{"app": "b"})
	g.OnUpdate(model.EndpointSet{Endpoint: a})
	b.Apply(g.Flush())
	ch := b.table.Chains[name]
	if ch == nil || !strings.Contains(last(ch), "NetworkPolicy/m/allow-001") {
		t.Fatalf("after: chain %s is %+v, want the group of allow-001, which pod a joined with the lowest address", name, ch)
	}
	for n, ch := range b.table.Chains {
		old, ok := before[n]
		if !ok {
			continue
		}
		if old.Comment != ch.Comment || (old.Base == nil) != (ch.Base == nil) || (old.Base != nil && *old.Base != *ch.Base) {
			t.Errorf("chain %s changed its properties: comment %q → %q, base %v → %v", n, old.Comment, ch.Comment, old.Base, ch.Base)
		}
	}
}
