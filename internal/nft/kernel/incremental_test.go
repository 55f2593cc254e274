package kernel_test

import (
	"maps"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// recorder is a fake committer: it records what each commit was told to look at and keeps a
// copy of the committed elements, so a test can count what an apply changed.
type recorder struct {
	commits  []ruleset.Changes
	replaces int
	elements map[string]map[ruleset.ElementKey]ruleset.Value
	chains   map[string]int
}

func (r *recorder) snapshot(t *ruleset.Table) {
	r.elements = map[string]map[ruleset.ElementKey]ruleset.Value{}
	r.chains = map[string]int{}
	for n, s := range t.Sets {
		r.elements[n] = maps.Collect(s.Entries())
	}
	for n, c := range t.Chains {
		r.chains[n] = len(c.Rules)
	}
}

func (r *recorder) Commit(t *ruleset.Table, c *ruleset.Changes) error {
	r.commits = append(r.commits, ruleset.Changes{Sets: maps.Clone(c.Sets), Chains: maps.Clone(c.Chains)})
	return nil
}
func (r *recorder) Replace(t *ruleset.Table) error { r.replaces++; return nil }
func (r *recorder) Verify() (bool, error)          { return false, nil }
func (r *recorder) DeleteTable(string) error       { return nil }
func (r *recorder) Close() error                   { return nil }

// elementDiff counts elements added, removed or changed between the snapshot and the table.
func elementDiff(before map[string]map[ruleset.ElementKey]ruleset.Value, t *ruleset.Table) (n int, where []string) {
	seen := map[string]bool{}
	for name, set := range t.Sets {
		seen[name] = true
		old := before[name]
		for k, e := range set.Entries() {
			if o, ok := old[k]; !ok || o != e {
				n++
				where = append(where, name)
			}
		}
		for k := range old {
			if _, ok := set.Get(k); !ok {
				n++
				where = append(where, name)
			}
		}
	}
	for name, old := range before {
		if !seen[name] {
			n += len(old)
			where = append(where, name)
		}
	}
	sort.Strings(where)
	return n, where
}

// TestIncrementalApply: after the first apply (one Replace), a pod joining a selector that one
// policy allows changes one element per family in the selector's shared set (the group has the
// listed shape), and no chain; deleting the policy removes its group's objects.
func TestIncrementalApply(t *testing.T) {
	rec := &recorder{}
	dp := kernel.NewApplier(nft.NewBuilder(nft.Config{}), rec, nil)
	g := graph.New(graph.Config{NodeName: "b"}) // x/b, the policy's subject, lives on b
	feed := func(us ...model.Update) {
		t.Helper()
		for _, u := range us {
			g.OnUpdate(u)
		}
		if err := dp.Apply(g.Flush()); err != nil {
			t.Fatal(err)
		}
	}
	sc := nfttest.Scenarios[2] // allow-from-pod-a-in-x: x/b admits x/a only
	feed(nfttest.ModelUpdates(nfttest.FixedAddrs(), sc.Policies(nil))...)
	if rec.replaces != 1 || len(rec.commits) != 0 {
		t.Fatalf("first apply: %d replaces and %d commits, want one replace", rec.replaces, len(rec.commits))
	}
	rec.snapshot(dp.Table())

	// y/b gets pod=a — but it is in namespace y, so the selector (scoped to x) still excludes it:
	// nothing changes in the kernel
	feed(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "y", Name: "b"}, Node: "b",
		Labels: model.LabelsOf(map[string]string{"pod": "a"}), Addrs: []netip.Addr{nfttest.Pods[3].V4, nfttest.Pods[3].V6}}})
	if n, where := elementDiff(rec.elements, dp.Table()); n != 0 {
		t.Errorf("relabel outside the selector's namespace changed %d elements: %v", n, where)
	}

	// a new pod x/c with pod=a on node b joins the selector: one element per family
	feed(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "c"}, Node: "b",
		Labels: model.LabelsOf(map[string]string{"pod": "a"}), Addrs: []netip.Addr{netip.MustParseAddr("10.244.1.20"), netip.MustParseAddr("fd00:10:244:1::20")}}})
	n, where := elementDiff(rec.elements, dp.Table())
	if n != 2 {
		t.Errorf("a pod joining the selector changed %d elements (%v), want 2 (one per family)", n, where)
	}
	for _, w := range where {
		if !strings.HasPrefix(w, "sel_") {
			t.Errorf("changed set %s, want only the selector's shared sets", w)
		}
	}
	last := rec.commits[len(rec.commits)-1]
	for c := range last.Chains {
		if _, ok := dp.Table().Chains[c]; ok && rec.chains[c] != len(dp.Table().Chains[c].Rules) {
			t.Errorf("chain %s rewritten by a membership change", c)
		}
	}

	// deleting the policy: x/b has no policy left, no group chain remains
	feed(model.PolicyDeleted{Key: nfttest.NPKey("x", "allow-a")})
	for name := range dp.Table().Chains {
		if len(name) > 3 && (name[:3] == "in_" || name[:3] == "eg_" || name[:2] == "c_") {
			t.Errorf("chain %s left after the last policy was deleted", name)
		}
	}
	for name, s := range dp.Table().Sets {
		if s.Len() > 0 {
			t.Errorf("set %s keeps %d elements after the last policy was deleted", name, s.Len())
		}
	}
}
