package kernel_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestSharedAddressInKernel: a real pod x/w on node a and a second pod object holding w's
// address (same labels, node and namespace; a pod that finished, a status written late) are
// created, relabelled, moved and deleted through the graph into one lasting dataplane, as the
// agent runs them. After every step the kernel's dispatch maps and sources_v4/v6 hold w's
// address once, with the comment of the owner the rule names, and w's policy is enforced with
// real TCP connections: y/ok reaches it on port 80, y/no does not. Removing or relabelling
// the other pod never strips w's entries, and when the other pod owned the address, w takes it
// over in the same apply.
func TestSharedAddressInKernel(t *testing.T) {
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}})
	pods := map[string]*netns.Pod{}
	for _, p := range []struct{ node, ns, name string }{{"a", "x", "w"}, {"a", "y", "ok"}, {"b", "y", "no"}} {
		np, err := c.AddPod(p.node, p.ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		pods[p.name] = np
	}
	w := pods["w"]
	if err := c.Serve(w.NetNS, netns.TCP, 80); err != nil {
		t.Fatal(err)
	}
	nodeA := c.Node("a")
	fd := nodeFD(t, nodeA)
	prefix := workloadPrefix(t, w)

	created := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	endpoint := func(ns, name, node string, labels map[string]string, addrs []netip.Addr, running bool, age time.Duration) model.Endpoint {
		return model.Endpoint{Key: model.EndpointKey{Namespace: ns, Name: name}, Node: node, Labels: model.LabelsOf(labels),
			Addrs: addrs, Running: running, Created: created.Add(-age)}
	}
	real := endpoint("x", "w", "a", map[string]string{"app": "w"}, w.Addrs, true, time.Hour)
	base := []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}},
		model.NamespaceSet{Namespace: model.Namespace{Name: "y", Labels: map[string]string{"ns": "y"}}},
		model.EndpointSet{Endpoint: real},
		model.EndpointSet{Endpoint: endpoint("y", "ok", "a", map[string]string{"role": "ok"}, pods["ok"].Addrs, true, time.Hour)},
		model.EndpointSet{Endpoint: endpoint("y", "no", "b", map[string]string{"role": "no"}, pods["no"].Addrs, true, time.Hour)},
		model.PolicySet{Policy: nfttest.NP("x", "w-in", "app == 'w'",
			[]model.Rule{nfttest.AllowTCP(model.Peer{Selector: "role == 'ok'", NamespaceSelector: "all()"}, model.Peer{Ports: []model.Port{nfttest.TCP(80)}})},
			nil, model.Ingress)},
		model.SyncStatusUpdate{Status: model.InSync},
	}
	for _, p := range pods {
		if p.Node == "a" {
			for _, a := range p.Addrs {
				base = append(base, model.RouteSet{Dst: netip.PrefixFrom(a, a.BitLen()), Interface: p.HostIface})
			}
		}
	}

	type step struct {
		name  string
		other []model.Update // to the other pod object
		owner string         // the key whose comment w's address must carry
	}
	other := func(name string, labels map[string]string, node string, running bool, age time.Duration) model.Update {
		return model.EndpointSet{Endpoint: endpoint("x", name, node, labels, w.Addrs, running, age)}
	}
	gone := func(name string) model.Update {
		return model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: name}}
	}
	app := func(v string) map[string]string { return map[string]string{"app": v} }
	tests := []struct {
		name  string
		steps []step
	}{
		{"an older object that does not run loses, and its removal leaves w alone", []step{
			{"created", []model.Update{other("w-old", app("w"), "a", false, 2*time.Hour)}, "x/w"},
			{"relabelled", []model.Update{other("w-old", app("other"), "a", false, 2*time.Hour)}, "x/w"},
			{"deleted", []model.Update{gone("w-old")}, "x/w"},
		}},
		{"a newer object that does not run yet loses until it runs", []step{
			{"created pending", []model.Update{other("w-next", app("w"), "a", false, 0)}, "x/w"},
			{"deleted", []model.Update{gone("w-next")}, "x/w"},
		}},
		{"a newer running object wins; w takes over when it goes", []step{
			{"created", []model.Update{other("w-new", app("w"), "a", true, 0)}, "x/w-new"},
			{"deleted", []model.Update{gone("w-new")}, "x/w"},
		}},
		{"a winner whose key sorts first: w takes over in the same apply", []step{
			{"created", []model.Update{other("a-new", app("w"), "a", true, 0)}, "x/a-new"},
			{"deleted", []model.Update{gone("a-new")}, "x/w"},
		}},
		{"a winner moved to another node leaves the address to w", []step{
			{"created", []model.Update{other("w-new", app("w"), "a", true, 0)}, "x/w-new"},
			{"moved to node b", []model.Update{other("w-new", app("w"), "b", true, 0)}, "x/w"},
			{"deleted", []model.Update{gone("w-new")}, "x/w"},
		}},
		{"a winner that finishes (its object withdrawn) leaves the address to w", []step{
			{"created", []model.Update{other("w-new", app("w"), "a", true, 0)}, "x/w-new"},
			{"older, relabelled: loses", []model.Update{other("w-new", app("other"), "a", true, 2*time.Hour)}, "x/w"},
			{"deleted", []model.Update{gone("w-new")}, "x/w"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph.New(graph.Config{NodeName: "a"})
			for _, u := range base {
				g.OnUpdate(u)
			}
			dp, err := kernel.Open(fd, nft.Config{WorkloadPrefixes: []string{prefix}})
			if err != nil {
				t.Fatal(err)
			}
			defer dp.Close()
			if err := dp.Apply(g.Flush()); err != nil {
				t.Fatal(err)
			}
			checkSharedAddress(t, "before", nodeA.NetNS, dp, pods, "x/w")
			for _, st := range tt.steps {
				for _, u := range st.other {
					g.OnUpdate(u)
				}
				if err := dp.Apply(g.Flush()); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				checkSharedAddress(t, st.name, nodeA.NetNS, dp, pods, st.owner)
			}
		})
	}
}

// checkSharedAddress asserts that the kernel holds w's dispatch and sources elements, each once
// and commented with owner, that nothing drifted, and that w's policy is enforced: y/ok reaches
// w on TCP 80 in both families and y/no does not.
func checkSharedAddress(t *testing.T, step, nodeNS string, dp *kernel.Applier, pods map[string]*netns.Pod, owner string) {
	t.Helper()
	w := pods["w"]
	listed := nftIn(t, nodeNS, "list", "table", "inet", nft.DefaultTable)
	for _, a := range w.Addrs {
		fam := "v4"
		if a.Is6() {
			fam = "v6"
		}
		for _, want := range []string{
			fmt.Sprintf("%s comment %q : goto in_", a, owner),        // ingress_v4/v6
			fmt.Sprintf("%q . %s comment %q", w.HostIface, a, owner), // sources_v4/v6
		} {
			if n := strings.Count(listed, want); n != 1 {
				t.Errorf("%s: the table holds %d× %s (want once, in ingress_%s / sources_%s):\n%s", step, n, want, fam, fam, listed)
			}
		}
		if n := strings.Count(listed, " "+a.String()+" comment"); n != 2 {
			t.Errorf("%s: %s is listed %d times in elements, want 2 (dispatch, sources):\n%s", step, a, n, listed)
		}
	}
	if drift, err := dp.Resync(); err != nil || drift {
		t.Errorf("%s: drift=%v err=%v, want none", step, drift, err)
	}
	for _, is6 := range []bool{false, true} {
		for from, want := range map[string]bool{"ok": true, "no": false} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			got, err := netns.Probe(ctx, pods[from].NetNS, w.IP(is6), netns.TCP, 80, 500*time.Millisecond)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: y/%s → x/w %s TCP 80 connected=%v, want %v", step, from, w.IP(is6), got, want)
			}
		}
	}
}
