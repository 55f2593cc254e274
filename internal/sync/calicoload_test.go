package sync_test

import (
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// describeCalico is describe with the updates of Calico's kinds.
func describeCalico(u model.Update) string {
	switch u := u.(type) {
	case model.TierSet:
		return "tier " + u.Tier.Name
	case model.NetworkSetSet:
		return "netset " + u.NetworkSet.Key.String()
	}
	return describe(u)
}

// TestLoadDirCalico reads a manifest of each Calico kind, among them the samples of Calico's
// "Tier", "Global network policy" and "Network policy" pages and of "Get started with Calico
// network policy", and checks the model they mean.
func TestLoadDirCalico(t *testing.T) {
	ups, errs := sync.LoadDir("testdata/calico")
	var got []string
	policies := map[string]model.Policy{}
	var tiers []model.Tier
	var netsets []model.NetworkSet
	for _, u := range ups {
		got = append(got, describeCalico(u))
		switch u := u.(type) {
		case model.PolicySet:
			policies[u.Policy.Key.String()] = u.Policy
		case model.TierSet:
			tiers = append(tiers, u.Tier)
		case model.NetworkSetSet:
			netsets = append(netsets, u.NetworkSet)
		}
	}
	want := []string{
		"tier internal-access", "tier platform",
		"ns partners", "ns production",
		"netset external", "netset partners/partners",
		"pol CalicoNetworkPolicy/production/allow-tcp-6379", "pol CalicoNetworkPolicy/production/http-only",
		"pol GlobalNetworkPolicy/allow-ping-in-cluster", "pol GlobalNetworkPolicy/egress-external",
		"pol GlobalNetworkPolicy/internal-access.allow-tcp-6379", "pol NetworkPolicy/production/allow-tcp-6379",
		"sync in-sync",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("updates:\n got %q\nwant %q", got, want)
	}
	wantTiers := []model.Tier{{Name: "internal-access", Order: 100, DefaultAction: model.ActionDeny},
		{Name: "platform", Order: math.Inf(1), DefaultAction: model.ActionPass}}
	if !reflect.DeepEqual(tiers, wantTiers) {
		t.Errorf("tiers %+v, want %+v", tiers, wantTiers)
	}
	wantSets := []model.NetworkSet{
		{Key: model.NetworkSetKey{Name: "external"}, Labels: model.LabelsOf(map[string]string{"role": "external"}),
			Nets: []netip.Prefix{pfx("198.51.100.0/28"), pfx("203.0.113.7/32")}},
		{Key: model.NetworkSetKey{Namespace: "partners", Name: "partners"}, Labels: model.LabelsOf(map[string]string{"role": "partner"}),
			Nets: []netip.Prefix{pfx("192.0.2.0/24")}},
	}
	if !reflect.DeepEqual(netsets, wantSets) {
		t.Errorf("network sets %+v, want %+v", netsets, wantSets)
	}

	frontendTo6379 := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
		Source:      calicoPeer(model.Peer{Selector: sel("role == 'frontend'")}),
		Destination: calicoPeer(model.Peer{Ports: []model.Port{{First: 6379, Last: 6379}}})}
	wantPolicies := map[string]model.Policy{
		"GlobalNetworkPolicy/internal-access.allow-tcp-6379": {
			Key:   model.PolicyKey{Kind: sync.KindGlobalNetworkPolicy, Name: "internal-access.allow-tcp-6379"},
			Hosts: true,
			Tier:  "internal-access", Order: math.Inf(1), Selector: sel("role == 'database'"), ApplyIngress: true, ApplyEgress: true,
			IngressRules: []model.Rule{withLabel(frontendTo6379, "internal-access order unset ingress rule 0")},
			EgressRules:  []model.Rule{{Action: model.ActionAllow, Source: anyCalicoPeer, Destination: anyCalicoPeer, Label: "internal-access order unset egress rule 0"}},
		},
		"CalicoNetworkPolicy/production/allow-tcp-6379": {
			Key:  model.PolicyKey{Kind: sync.KindCalicoNetworkPolicy, Namespace: "production", Name: "allow-tcp-6379"},
			Tier: model.TierNetworkPolicy, Order: math.Inf(1), Namespace: "production", Selector: sel("role == 'database'"),
			ApplyIngress: true, ApplyEgress: true,
			IngressRules: []model.Rule{withLabel(frontendTo6379, "default order unset ingress rule 0")},
			EgressRules:  []model.Rule{{Action: model.ActionAllow, Source: anyCalicoPeer, Destination: anyCalicoPeer, Label: "default order unset egress rule 0"}},
		},
		"GlobalNetworkPolicy/allow-ping-in-cluster": {
			Key:   model.PolicyKey{Kind: sync.KindGlobalNetworkPolicy, Name: "allow-ping-in-cluster"},
			Hosts: true,
			Tier:  model.TierNetworkPolicy, Order: math.Inf(1), Selector: "all()", ApplyIngress: true,
			IngressRules: []model.Rule{
				{Action: model.ActionAllow, Protocol: model.ProtocolICMP, ICMP: &model.ICMPMatch{Type: 8},
					Source: calicoPeer(model.Peer{Selector: "all()"}), Destination: anyCalicoPeer, Label: "default order unset ingress rule 0"},
				{Action: model.ActionAllow, Protocol: model.ProtocolICMPv6, ICMP: &model.ICMPMatch{Type: 128},
					Source: calicoPeer(model.Peer{Selector: "all()"}), Destination: anyCalicoPeer, Label: "default order unset ingress rule 1"},
			},
		},
		"GlobalNetworkPolicy/egress-external": {
			Key:   model.PolicyKey{Kind: sync.KindGlobalNetworkPolicy, Name: "egress-external"},
			Hosts: true,
			Tier:  "platform", Order: 20, Selector: sel("has(app)"), ApplyEgress: true,
			EgressRules: []model.Rule{
				{Action: model.ActionPass, Source: anyCalicoPeer, Destination: calicoPeer(model.Peer{Selector: sel("role == 'external'")}), Label: "platform order 20 egress rule 0"},
				{Action: model.ActionLog, Source: anyCalicoPeer, Destination: anyCalicoPeer, Label: "platform order 20 egress rule 1"},
				{Action: model.ActionDeny, Source: anyCalicoPeer, Destination: calicoPeer(model.Peer{NotNets: []netip.Prefix{pfx("10.0.0.0/8")}}), Label: "platform order 20 egress rule 2"},
			},
		},
		"CalicoNetworkPolicy/production/http-only": {
			Key:  model.PolicyKey{Kind: sync.KindCalicoNetworkPolicy, Namespace: "production", Name: "http-only"},
			Tier: model.TierNetworkPolicy, Order: math.Inf(1), Namespace: "production", Selector: "all()", ApplyIngress: true,
		},
	}
	for k, w := range wantPolicies {
		if !reflect.DeepEqual(policies[k], w) {
			t.Errorf("%s:\n got %+v\nwant %+v", k, policies[k], w)
		}
	}
	if p := policies["NetworkPolicy/production/allow-tcp-6379"]; p.Tier != model.TierNetworkPolicy || p.Order != 1000 {
		t.Errorf("the Kubernetes NetworkPolicy is in tier %s at order %v, want default at 1000", p.Tier, p.Order)
	}

	// Each bad object is reported, naming it; the partly enforced one says what.
	var msgs []string
	partly := 0
	for _, err := range errs {
		msgs = append(msgs, err.Error())
		if _, ok := err.(*sync.PartlyEnforcedError); ok {
			partly++
		}
	}
	all := strings.Join(msgs, "\n")
	for _, w := range []string{
		`GlobalNetworkPolicy lost: tier "nowhere" does not exist`,
		"GlobalNetworkPolicy accept: spec.ingress[0].action",
		"90-bad.yaml (document 3)",
		"NetworkPolicy.projectcalico.org production/http-only: not enforced as written",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("errors do not say %q:\n%s", w, all)
		}
	}
	if len(errs) != 4 || partly != 1 {
		t.Errorf("%d errors (%d partly enforced), want 4 (1):\n%s", len(errs), partly, all)
	}
}

func withLabel(r model.Rule, label string) model.Rule { r.Label = label; return r }

// TestLoadDirServiceAccounts: ServiceAccounts in manifests carry their labels to the model, for
// Calico's service-account selectors; a pod's account that no manifest defines exists with no
// label, as admission makes it exist in a cluster, and an account's namespace exists too.
func TestLoadDirServiceAccounts(t *testing.T) {
	dir := t.TempDir()
	const manifests = `apiVersion: v1
kind: ServiceAccount
metadata: {name: web, namespace: x, labels: {role: front}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: idle, namespace: "y"}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: x}
spec: {nodeName: n1, serviceAccountName: web, containers: [{name: c, image: pause}]}
status: {phase: Running, podIP: 10.0.0.1, podIPs: [{ip: 10.0.0.1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x}
spec: {nodeName: n1, serviceAccountName: builder, containers: [{name: c, image: pause}]}
status: {phase: Running, podIP: 10.0.0.2, podIPs: [{ip: 10.0.0.2}]}
`
	if err := os.WriteFile(filepath.Join(dir, "accounts.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	ups, errs := sync.LoadDir(dir)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	var accounts []model.ServiceAccount
	var namespaces []string
	for _, u := range ups {
		switch u := u.(type) {
		case model.ServiceAccountSet:
			accounts = append(accounts, u.ServiceAccount)
		case model.NamespaceSet:
			namespaces = append(namespaces, u.Namespace.Name)
		}
	}
	want := []model.ServiceAccount{
		{Namespace: "x", Name: "builder"},
		{Namespace: "x", Name: "web", Labels: map[string]string{"role": "front"}},
		{Namespace: "y", Name: "idle"},
	}
	if !reflect.DeepEqual(accounts, want) {
		t.Errorf("service accounts %+v, want %+v", accounts, want)
	}
	if !reflect.DeepEqual(namespaces, []string{"x", "y"}) {
		t.Errorf("namespaces %v, want [x y]", namespaces)
	}
}
