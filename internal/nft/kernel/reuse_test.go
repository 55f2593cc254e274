package kernel_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// TestRemoteAddressReuse: a remote pod's address taken by a pod of other labels and given back
// to one of the first pod's labels, each write a commit of its own, as the API server's events
// of a kubelet's pods come (the pod, then its status with the address): after each swap the
// selector set that names the first pod's labels holds the address again, in the kernel, and
// nothing drifted. The graph replaces the set whole while the address is in doubt, so the
// Builder rebuilds it as another object of equal (empty) elements, whose next change the commit
// must still see (the chaos suite's IP reuse step).
func TestRemoteAddressReuse(t *testing.T) {
	addrs := []netip.Addr{netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("fd00:10:244::5")}
	created := int64(0)
	pod := func(ns, name, app string) model.Endpoint {
		created++
		return model.Endpoint{Key: model.EndpointKey{Namespace: ns, Name: name}, Node: "a", Labels: model.LabelsOf(map[string]string{"app": app}),
			Addrs: addrs, Running: true, Created: time.Unix(created, 0)}
	}
	pending := func(e model.Endpoint) model.Endpoint { e.Addrs, e.Running = nil, false; return e }
	web := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "web"}, Node: "b", Labels: model.LabelsOf(map[string]string{"app": "web"}),
		Addrs: []netip.Addr{netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("fd00:10:244:1::2")}, Running: true}
	policy := model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "web-ingress"}, Tier: model.TierNetworkPolicy,
		Namespace: "x", Selector: "app == 'web'", ApplyIngress: true,
		IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'client'"}}}}
	for _, newFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "old pod deleted first", true: "new pod created first"}[newFirst], func(t *testing.T) {
			ns, fd := bareNetns(t)
			g := graph.New(graph.Config{NodeName: "b"})
			a, err := kernel.Open(fd, nft.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			step := func(what string, us ...model.Update) {
				t.Helper()
				for _, u := range us {
					g.OnUpdate(u)
				}
				if err := a.Apply(g.Flush()); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if drift, err := a.Resync(); drift || err != nil {
					t.Fatalf("%s: the kernel drifted from the committed table (%v)", what, err)
				}
			}
			step("start", model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}},
				model.NamespaceSet{Namespace: model.Namespace{Name: "y", Labels: map[string]string{"ns": "y"}}},
				model.EndpointSet{Endpoint: web}, model.EndpointSet{Endpoint: pod("x", "client-0", "client")},
				model.PolicySet{Policy: policy}, model.SyncStatusUpdate{Status: model.InSync})
			for i := range 3 {
				old := model.EndpointKey{Namespace: "x", Name: fmt.Sprint("client-", i)}
				other := pod("y", fmt.Sprint("other-", i), "other")
				if newFirst {
					step("other created", model.EndpointSet{Endpoint: pending(other)})
					step("other's status", model.EndpointSet{Endpoint: other})
					step("client deleted", model.EndpointDeleted{Key: old})
				} else {
					step("client deleted", model.EndpointDeleted{Key: old})
					step("other created", model.EndpointSet{Endpoint: pending(other)})
					step("other's status", model.EndpointSet{Endpoint: other})
				}
				back := pod("x", fmt.Sprint("client-", i+1), "client")
				step("other deleted", model.EndpointDeleted{Key: other.Key})
				step("client created", model.EndpointSet{Endpoint: pending(back)})
				step("client's status", model.EndpointSet{Endpoint: back})
				for f, fam := range []string{"_v4", "_v6"} {
					var set string
					for n := range a.Table().Sets {
						if strings.HasPrefix(n, "sel_") && strings.HasSuffix(n, fam) {
							set = n
						}
					}
					element := regexp.MustCompile(`[\s{,]` + regexp.QuoteMeta(addrs[f].String()) + `[\s},]`)
					if out := nftIn(t, ns, "list", "set", "inet", "nftpolicy", set); !element.MatchString(out) {
						t.Fatalf("swap %d: the kernel's %s lacks %s, given back to %s:\n%s", i, set, addrs[f], back.Key, out)
					}
				}
			}
		})
	}
}

// TestResyncRepairsUnjournaled: a change of the desired table that no commit sent (here a
// selector set swapped behind the commits for a copy holding one more address) leaves the kernel
// equal to the committed table, so no read-back sees it; Resync finds it without one, replaces
// the table and reports the repair, and the kernel then holds the address.
func TestResyncRepairsUnjournaled(t *testing.T) {
	ns, fd := bareNetns(t)
	g := graph.New(graph.Config{NodeName: "b"})
	a, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	client := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "client"}, Node: "a", Labels: model.LabelsOf(map[string]string{"app": "client"}),
		Addrs: []netip.Addr{netip.MustParseAddr("10.244.0.5")}, Running: true}
	web := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "web"}, Node: "b", Labels: model.LabelsOf(map[string]string{"app": "web"}),
		Addrs: []netip.Addr{netip.MustParseAddr("10.244.1.2")}, Running: true}
	for _, u := range []model.Update{model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}, model.EndpointSet{Endpoint: client}, model.EndpointSet{Endpoint: web},
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "web-ingress"}, Tier: model.TierNetworkPolicy,
			Namespace: "x", Selector: "app == 'web'", ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{Selector: "app == 'client'"}}}}},
		model.SyncStatusUpdate{Status: model.InSync}} {
		g.OnUpdate(u)
	}
	if err := a.Apply(g.Flush()); err != nil {
		t.Fatal(err)
	}
	if repaired, err := a.Resync(); repaired || err != nil {
		t.Fatalf("right after the commit: repaired %v (%v), want nothing to repair", repaired, err)
	}
	var set string
	for n := range a.Table().Sets {
		if strings.HasPrefix(n, "sel_") && strings.HasSuffix(n, "_v4") {
			set = n
		}
	}
	swapped := a.Table().Sets[set].Clone()
	swapped.Put(ruleset.Element{ElementKey: ruleset.AddrKey(netip.MustParseAddr("10.244.0.9"))})
	a.Table().Sets[set] = swapped
	if out := nftIn(t, ns, "list", "set", "inet", "nftpolicy", set); strings.Contains(out, "10.244.0.9") {
		t.Fatalf("the kernel holds the address before any commit:\n%s", out)
	}
	if repaired, err := a.Resync(); !repaired || err != nil {
		t.Fatalf("Resync: repaired %v (%v), want a repair of %s", repaired, err, set)
	}
	if out := nftIn(t, ns, "list", "set", "inet", "nftpolicy", set); !strings.Contains(out, "10.244.0.9") {
		t.Fatalf("after the repair the kernel's %s lacks the address:\n%s", set, out)
	}
	if repaired, err := a.Resync(); repaired || err != nil {
		t.Fatalf("after the repair: repaired %v (%v), want nothing to repair", repaired, err)
	}
}
