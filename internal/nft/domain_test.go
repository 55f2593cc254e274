package nft_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

// TestDomainNameRules: an admin policy's allow to a domain name, in front of a baseline deny,
// becomes an accepting lookup in the pattern's timed sets at the head of the group's chain,
// the sets declared `flags timeout` without elements; behind a Deny the prefix keeps the order in
// a chain of its own, and so does a Pass (both return to the shape); behind a Log rule it
// matches nothing (never a wider allow).
func TestDomainNameRules(t *testing.T) {
	v4, v6 := dataplane.DomainSetName("*.example.com", true), dataplane.DomainSetName("*.example.com", false)
	admin := func(rules ...model.Rule) model.Policy {
		return model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "dns"}, Tier: model.TierAdmin, Order: 1,
			Selector: "all()", NamespaceSelector: "all()", ApplyEgress: true, EgressRules: rules}
	}
	baseline := model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "deny"}, Tier: model.TierBaseline, Order: 1,
		Selector: "all()", NamespaceSelector: "all()", ApplyEgress: true,
		EgressRules: []model.Rule{{Action: model.ActionDeny}}}
	toDomain := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
		Destination: model.Peer{DomainNames: []string{"*.example.com"}, Ports: []model.Port{nfttest.TCP(443)}}}
	denyTCP := model.Rule{Action: model.ActionDeny, Protocol: model.ProtocolTCP}
	render := func(ps ...model.Policy) string {
		b := nft.NewBuilder(nft.Config{})
		sc := nfttest.Scenario{Name: "domain", Policies: nfttest.Static(ps...)}
		if b.Apply(nfttest.MessagesFor("a", nfttest.FixedAddrs(), sc)) == nil {
			t.Fatal("no changes after the in-sync apply")
		}
		return b.Render()
	}

	got := render(admin(toDomain), baseline)
	for _, want := range []string{
		"set " + v4 + " {\n\t\ttype ipv4_addr\n\t\tflags timeout\n",
		"set " + v6 + " {\n\t\ttype ipv6_addr\n\t\tflags timeout\n",
		"ip daddr @" + v4 + " meta l4proto . th dport @ports_",
		"ip6 daddr @" + v6 + " meta l4proto . th dport @ports_",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	for _, name := range []string{v4, v6} {
		if i := strings.Index(got, "set "+name+" {"); i >= 0 && strings.Contains(got[i:i+strings.Index(got[i:], "\t}\n")], "elements") {
			t.Errorf("set %s has elements in the table; they are the agent's:\n%s", name, got)
		}
	}

	// a Deny before it decides first, and a Pass skips the rest of the tier: the prefix, in a
	// chain of its own, returns what either matches to the shape before the domain rule can
	// accept it, and the shape denies or passes it
	for _, first := range []model.Rule{denyTCP, {Action: model.ActionPass, Protocol: model.ProtocolTCP}} {
		got = render(admin(first, toDomain), baseline)
		for _, want := range []string{
			"_fqdn comment \"domain-name rules in order, then the rest\"",
			"\t\tmeta l4proto tcp return comment \"ClusterNetworkPolicy/dns egress rule 0 (" + first.Action.String() + ")\"\n" +
				"\t\tip daddr @" + v4 + " meta l4proto . th dport @ports_",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("behind a %s, the table lacks %q:\n%s", first.Action, want, got)
			}
		}
	}

	// a Log rule before it (with deny logs) cannot be evaluated in the prefix: the domain rule
	// matches nothing
	logRule := model.Rule{Action: model.ActionLog, Protocol: model.ProtocolTCP}
	b := nft.NewBuilder(nft.Config{DenyLog: &nft.DenyLog{Group: 5}})
	b.Apply(nfttest.MessagesFor("a", nfttest.FixedAddrs(), nfttest.Scenario{Name: "domain", Policies: nfttest.Static(admin(logRule, toDomain), baseline)}))
	if got = b.Render(); strings.Contains(got, "@"+v4) || strings.Contains(got, "_fqdn") {
		t.Errorf("the domain rule behind a Log rule is compiled:\n%s", got)
	}

	// without a Deny in front, no chain of its own: the accepting rules head the group chain
	if got = render(admin(toDomain), baseline); strings.Contains(got, "_fqdn") {
		t.Errorf("a prefix without a Deny has a chain of its own:\n%s", got)
	}
}

// TestDomainNamesPruned: Builder.DomainNames lists a pattern while a rule uses it, and none once
// the policy naming it is gone; the builder then remembers no pattern of any set.
func TestDomainNamesPruned(t *testing.T) {
	dns := model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "dns"}, Tier: model.TierAdmin, Order: 1,
		Selector: "all()", NamespaceSelector: "all()", ApplyEgress: true,
		EgressRules: []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{DomainNames: []string{"*.example.com"}, Ports: []model.Port{nfttest.TCP(443)}}}}}
	deny := model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "deny"}, Tier: model.TierBaseline, Order: 1,
		Selector: "all()", NamespaceSelector: "all()", ApplyEgress: true, EgressRules: []model.Rule{{Action: model.ActionDeny}}}
	g := graph.New(graph.Config{NodeName: "a"})
	for _, u := range nfttest.ModelUpdates(nfttest.FixedAddrs(), []model.Policy{dns, deny}) {
		g.OnUpdate(u)
	}
	b := nft.NewBuilder(nft.Config{})
	b.Apply(g.Flush())
	if got := b.DomainNames(); !slices.Equal(got, []string{"*.example.com"}) {
		t.Fatalf("DomainNames %v while the policy names *.example.com", got)
	}
	g.OnUpdate(model.PolicyDeleted{Key: dns.Key})
	b.Apply(g.Flush())
	if got := b.DomainNames(); len(got) != 0 {
		t.Errorf("DomainNames %v once no policy names a domain", got)
	}
	if n := b.DomainSetsKnown(); n != 0 {
		t.Errorf("the builder remembers the pattern of %d domain sets once no policy names a domain", n)
	}
	if strings.Contains(b.Render(), "fqdn") {
		t.Errorf("the table keeps a domain set:\n%s", b.Render())
	}
}
