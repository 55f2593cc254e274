package nft_test

import (
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

// TestDomainNameRules: an admin policy's allow to a domain name, in front of a baseline deny,
// becomes an accepting lookup in the pattern's timed sets at the head of the group's chain,
// the sets declared `flags timeout` without elements; behind a Deny that comes first it stays
// matching nothing (never a wider allow), and so does it in a group its policies make a map.
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

	// a Deny before it may decide first: accepting early would allow more than written
	got = render(admin(denyTCP, toDomain), baseline)
	if strings.Contains(got, "@"+v4) || strings.Contains(got, "set "+v4) {
		t.Errorf("the domain rule behind a Deny is compiled:\n%s", got)
	}
}
