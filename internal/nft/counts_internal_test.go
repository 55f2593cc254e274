package nft

import (
	"fmt"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestReasonOrigin: every reason the compiler writes for a rule, a rejected policy or a tier
// default is read back by ReasonOrigin as what the endpoint's tiers name (State.origin), but for
// what the reason does not hold (a tier default's direction and policies).
func TestReasonOrigin(t *testing.T) {
	d := NewBuilder(Config{})
	cnp := model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "admin-x"}
	np := model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "allow-a.b-c"}
	rejected := model.PolicyKey{Kind: "NetworkPolicy", Namespace: "y", Name: "too-costly"}
	// rules are commented as the graph comments them; their index as written is one more than
	// their place (the graph left a rule out before them)
	rules := func(k model.PolicyKey, dir model.Direction, actions ...model.Action) []dataplane.Rule {
		var rs []dataplane.Rule
		for i, a := range actions {
			rs = append(rs, dataplane.Rule{Action: a, Index: i + 1, Comment: fmt.Sprintf("%s %s rule %d", k, dir, i+1)})
		}
		return rs
	}
	named := rules(np, model.Ingress, model.ActionAllow)
	named[0].Comment += " (a rule with spaces (and parentheses))"
	d.Apply([]dataplane.Message{
		dataplane.PolicyUpdated{Key: cnp, Tier: model.TierAdmin, Ingress: rules(cnp, model.Ingress, model.ActionPass, model.ActionDeny, model.ActionAllow),
			Egress: rules(cnp, model.Egress, model.ActionDeny)},
		dataplane.PolicyUpdated{Key: np, Tier: model.TierNetworkPolicy, Ingress: named},
		dataplane.PolicyUpdated{Key: rejected, Tier: model.TierNetworkPolicy, Egress: rules(rejected, model.Egress, model.ActionDeny)},
	})
	d.state.reject(rejected, "test")
	tiers := []dataplane.TierPolicies{
		{Tier: model.TierAdmin, DefaultAction: model.ActionPass, Policies: []model.PolicyKey{cnp}},
		{Tier: model.TierNetworkPolicy, DefaultAction: model.ActionDeny, Policies: []model.PolicyKey{np, rejected}},
		{Tier: model.TierBaseline, DefaultAction: model.ActionAllow, Policies: []model.PolicyKey{cnp}},
	}
	n := 0
	for _, dir := range []model.Direction{model.Ingress, model.Egress} {
		var reasons []string
		for _, tp := range tiers {
			for r := range d.state.tierRules(dir, tp) {
				switch r.Action {
				case model.ActionAllow:
					reasons = append(reasons, r.reason()+" (allow)")
				case model.ActionDeny:
					reasons = append(reasons, r.reason()+" (deny)")
				}
			}
			if o := tierDefault(tp); o.Verdict != 0 {
				reasons = append(reasons, o.Reason)
			}
		}
		for _, reason := range reasons {
			want := d.state.origin(dir, tiers, reason)
			if want.Kind == OriginTierDefault {
				want.Direction, want.Policies = 0, nil
			}
			if want.Kind == OriginRejected {
				want.Direction = 0
			}
			if got := d.ReasonOrigin(reason); !equalOrigins(got, want) {
				t.Errorf("%q: ReasonOrigin %+v, want %+v", reason, got, want)
			}
			n++
		}
	}
	if n < 8 {
		t.Fatalf("only %d reasons checked", n)
	}
	// a ClusterNetworkPolicy's rules are labelled by the converter with the API rule's tier,
	// priority, direction and index
	for reason, want := range map[string]Origin{
		"ClusterNetworkPolicy/admin-x admin priority 10 ingress rule 2 (deny-y) (deny)": {Kind: OriginRule, Tier: model.TierAdmin,
			Policy: cnp, Direction: model.Ingress, Rule: 2, Action: model.ActionDeny},
		"ClusterNetworkPolicy/admin-x admin priority 10 egress rule 0 (allow)": {Kind: OriginRule, Tier: model.TierAdmin,
			Policy: cnp, Direction: model.Egress, Rule: 0, Action: model.ActionAllow},
	} {
		if got := d.ReasonOrigin(reason); !equalOrigins(got, want) {
			t.Errorf("%q: ReasonOrigin %+v, want %+v", reason, got, want)
		}
	}
	for _, reason := range []string{"no tier decided: allow", "spoofed source, or a workload interface without a programmed endpoint",
		"NetworkPolicy/gone/policy ingress rule 0 (allow)", "tier admin"} {
		if got := d.ReasonOrigin(reason); got.Kind != OriginUnknown {
			t.Errorf("%q: ReasonOrigin %+v, want unknown", reason, got)
		}
	}
}

func equalOrigins(a, b Origin) bool {
	return a.Kind == b.Kind && a.Direction == b.Direction && a.Tier == b.Tier && a.Policy == b.Policy &&
		a.Rule == b.Rule && a.Action == b.Action && len(a.Policies) == len(b.Policies)
}
