package bench_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	nsync "github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// The Calico benchmarks write their policies as projectcalico.org/v3 objects and convert them
// with internal/sync's converters, the agent's path for them, into the graph's input.

// calicoTiers is how many tiers the Calico rows spread their policies over: tier t is
// "bench-<t>" at order 100·(t+1), its default Pass but the last's, which is Deny.
const calicoTiers = 10

// calicoActions are the actions of the Calico rows' rules, by policy index modulo 4.
var calicoActions = []string{"Allow", "Deny", "Pass", "Log"}

// calicoDenyLog is the deny logging (--log-denied) the Calico rows run with: without it Log
// rules compile to nothing, with it they are in the table.
var calicoDenyLog = &nft.DenyLog{Group: 100, Limit: nft.DefaultDenyLogLimit}

// calicoTierUpdates converts the calicoTiers tiers.
func calicoTierUpdates(tb testing.TB) []model.Update {
	tb.Helper()
	var ups []model.Update
	for t := range calicoTiers {
		action := "Pass"
		if t == calicoTiers-1 {
			action = "Deny"
		}
		ct := &nsync.CalicoTier{Spec: nsync.CalicoTierSpec{Order: ptr(float64(100 * (t + 1))), DefaultAction: &action}}
		ct.Name = fmt.Sprintf("bench-%d", t)
		tier, builtin, err := nsync.ConvertCalicoTier(ct)
		if err != nil || builtin {
			tb.Fatalf("tier %s: builtin %v, %v", ct.Name, builtin, err)
		}
		ups = append(ups, model.TierSet{Tier: tier})
	}
	return ups
}

// calicoPolicy converts policy i of n of the Calico rows: in tier bench-<i·calicoTiers/n>
// (the policies in index order across the tiers), at order i mod 100 (equal orders go by
// name), a GlobalNetworkPolicy for even i and a NetworkPolicy of namespace for odd i, selecting
// subject, with one ingress rule of action calicoActions[i mod 4] on TCP 80 from the pods
// source selects.
func calicoPolicy(tb testing.TB, i, n int, namespace, subject, source string) model.Policy {
	tb.Helper()
	spec := nsync.CalicoPolicySpec{
		Tier:     fmt.Sprintf("bench-%d", i*calicoTiers/n),
		Order:    ptr(float64(i % 100)),
		Selector: subject,
		Types:    []string{"Ingress"},
		Ingress: []nsync.CalicoRule{{
			Action:      calicoActions[i%4],
			Protocol:    &nsync.NumOrString{Str: "TCP"},
			Source:      nsync.CalicoEntityRule{Selector: source},
			Destination: nsync.CalicoEntityRule{Ports: []nsync.NumOrString{{Num: 80, IsNum: true}}},
		}},
	}
	return convertCalicoPolicy(tb, fmt.Sprintf("cal-%05d", i), namespace, i%2 == 1, spec)
}

// convertCalicoPolicy converts a GlobalNetworkPolicy (namespaced false) or a NetworkPolicy of
// namespace named name with spec.
func convertCalicoPolicy(tb testing.TB, name, namespace string, namespaced bool, spec nsync.CalicoPolicySpec) model.Policy {
	tb.Helper()
	var (
		p       model.Policy
		ignored []string
		err     error
	)
	if namespaced {
		np := &nsync.CalicoNetworkPolicy{Spec: spec}
		np.Name, np.Namespace = name, namespace
		p, ignored, err = nsync.ConvertCalicoNetworkPolicy(np)
	} else {
		gnp := &nsync.GlobalNetworkPolicy{Spec: spec}
		gnp.Name = name
		p, ignored, err = nsync.ConvertGlobalNetworkPolicy(gnp)
	}
	if err != nil || len(ignored) > 0 {
		tb.Fatalf("Calico policy %s: %v %v", name, err, ignored)
	}
	return p
}

// calicoPacketPath is P1's cluster with its n policies written as Calico policies (see
// calicoPolicy) selecting the server: scale.PacketPathPolicies' namespace, server, clients and
// peers, policy i < n-1 acting on TCP 80 from peer p<i> only, and the last, a
// GlobalNetworkPolicy in the last tier with its order unset (after every other), allowing TCP
// 80 from the clients. The clients match no other rule: they pass the first nine tiers by
// their default and are allowed by the last policy; any other port of theirs is denied by the
// last tier's default.
func calicoPacketPath(tb testing.TB, n int, server model.Endpoint, clients ...model.Endpoint) scale.PacketPath {
	tb.Helper()
	pp := scale.PacketPathPolicies(n, server, clients...)
	var ups []model.Update
	for _, u := range pp.Updates {
		switch u.(type) {
		case model.PolicySet:
			continue
		case model.SyncStatusUpdate:
			ups = append(ups, calicoTierUpdates(tb)...)
			for i := range n - 1 {
				ups = append(ups, model.PolicySet{Policy: calicoPolicy(tb, i, n, scale.PacketPathNamespace,
					"role == 'server'", fmt.Sprintf("peer == 'p%d'", i))})
			}
			if n > 0 {
				spec := nsync.CalicoPolicySpec{Tier: fmt.Sprintf("bench-%d", calicoTiers-1), Selector: "role == 'server'",
					Ingress: []nsync.CalicoRule{{Action: "Allow", Protocol: &nsync.NumOrString{Str: "TCP"},
						Source:      nsync.CalicoEntityRule{Selector: "role == 'client'"},
						Destination: nsync.CalicoEntityRule{Ports: []nsync.NumOrString{{Num: 80, IsNum: true}}}}}}
				ups = append(ups, model.PolicySet{Policy: convertCalicoPolicy(tb, "zz-allow-clients", "", false, spec)})
			}
		}
		ups = append(ups, u)
	}
	pp.Updates = ups
	return pp
}

// calicoFanoutUpdates is f's cluster (without Cluster) with its policies written as Calico
// policies: policy k (calicoPolicy k of f.Selectors) selects local pod k mod f.LocalPods and
// acts on TCP 80 from selector "g<k> == 'in'" with calicoActions[k mod 4].
func calicoFanoutUpdates(tb testing.TB, f scale.Fanout) []model.Update {
	tb.Helper()
	var ups []model.Update
	for _, u := range f.Updates() {
		switch u.(type) {
		case model.PolicySet:
			continue
		case model.SyncStatusUpdate:
			ups = append(ups, calicoTierUpdates(tb)...)
			for k := range f.Selectors {
				ups = append(ups, model.PolicySet{Policy: calicoPolicy(tb, k, f.Selectors, scale.FanoutNamespace,
					fmt.Sprintf("srv == 's%d'", k%max(f.LocalPods, 1)), fmt.Sprintf("g%d == 'in'", k))})
			}
		}
		ups = append(ups, u)
	}
	return ups
}

// BenchmarkIncrementalCalicoPolicies is BenchmarkIncremental for Calico policies: fanout with
// its 2,000 policies written as Calico GlobalNetworkPolicies and NetworkPolicies in 10 tiers
// (calicoFanoutUpdates: Allow, Deny, Pass and Log rules in turn, deny logging on so that the
// Log rules are compiled), and one spare pod joining or leaving one policy's rule selector per
// change, timed from the graph's update to the dataplane's commit; by the action of the rule
// whose selector it joins, too.
func BenchmarkIncrementalCalicoPolicies(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	setStage("P2 incremental, Calico policies")
	f := fanout
	_, g, dp := programFanout(b, f, calicoFanoutUpdates(b, f), nft.Config{DenyLog: calicoDenyLog}, "bk",
		"table programmed for P2 with Calico policies in 10 tiers (first apply)")
	joinsByAction(b, f, g, dp, func(k int) string { return strings.ToLower(calicoActions[k%4]) },
		"one pod joins/leaves one Calico rule selector (10 tiers, Allow/Deny/Pass/Log, --log-denied)")
}
