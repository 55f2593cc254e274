package nft

import (
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// TestSharedSelectorSetsAreStateStorage: the table's shared selector sets are the State's own
// storage of the sets' members (one copy of each member), before and after members change.
func TestSharedSelectorSetsAreStateStorage(t *testing.T) {
	spec := scale.Spec{Pods: 400, Namespaces: 4, Policies: 40, LocalPods: 20, Node: "n", Seed: 3}
	ups := scale.Generate(spec)
	g := graph.New(graph.Config{NodeName: spec.Node})
	d := NewBuilder(Config{})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	msgs := g.Flush()
	d.Apply(msgs)
	for i, m := range msgs { // consumed: the first flush's member lists are not held to the commit
		if m != nil {
			t.Fatalf("message %d (%T) still held after Apply", i, m)
		}
	}
	check := func(when string) {
		t.Helper()
		shared := 0
		for id, set := range d.state.Sets {
			if set.Kind != dataplane.SetAddrs {
				continue
			}
			for _, is4 := range []bool{true, false} {
				s, inTable := d.table.Sets[selSetName(id, is4)]
				if !inTable {
					continue
				}
				shared++
				if s != set.family(is4) {
					t.Errorf("%s: table set %s is a copy of the State's members", when, s.Name)
				}
			}
		}
		if shared == 0 {
			t.Fatalf("%s: no shared selector set in the table", when)
		}
	}
	check("first apply")
	elements := func() int { return d.table.Stats().Elements }
	before := elements()
	// pods leave, then come back: members change in place
	pods := ups[spec.Namespaces : spec.Namespaces+spec.Pods/2]
	for _, u := range pods {
		g.OnUpdate(model.EndpointDeleted{Key: u.(model.EndpointSet).Endpoint.Key})
	}
	d.Apply(g.Flush())
	check("after pods left")
	if elements() >= before {
		t.Fatalf("%d elements after half the pods left, %d before", elements(), before)
	}
	for _, u := range pods {
		g.OnUpdate(u)
	}
	d.Apply(g.Flush())
	check("after they came back")
	if elements() != before {
		t.Errorf("%d elements after the pods came back, want %d", elements(), before)
	}
}
