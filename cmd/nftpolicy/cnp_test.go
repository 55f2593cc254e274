package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	api "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestAgentClusterNetworkPoliciesWithoutCRD runs one agent process per node against an API
// server of its own that does not serve ClusterNetworkPolicies: the agents turn ready and
// enforce NetworkPolicy. Then, with the agents still running, the CRD is installed and
// ClusterNetworkPolicies are enforced as the three layers define — an Admin Accept over a
// NetworkPolicy's isolation, a Baseline Deny where no NetworkPolicy applies, an Admin Pass down
// to the NetworkPolicy — while a policy the converter rejects changes nothing (it would deny
// everything) and is counted and logged, and a domainNames peer allows nothing without
// --dns-answers-group (the agent says so). The table's
// comments name the policies' tiers, priorities and rules. Removing the CRD leaves the
// NetworkPolicies alone in force. Every step is checked with real TCP over IPv4 and IPv6.
func TestAgentClusterNetworkPoliciesWithoutCRD(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft", "go")
	s := kube.StartForTest(t) // its own: the CRD comes and goes
	ctx := context.Background()
	ac := newAgentCluster(t, s)
	for _, n := range []string{"a", "b"} {
		if err := agentproc.ForwardAPI(ac.c, ac.c.Node(n).NetNS, s); err != nil {
			t.Fatal(err)
		}
		ac.startAgent(n, "--crd-recheck-interval", "1s")
	}
	for _, n := range []string{"a", "b"} {
		if err := ac.agents[n].WaitReady(ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	inX := func(key string) bool { return strings.HasPrefix(key, "x/") }
	ac.expect("no policy, no CRD", func(string, string) bool { return true })
	np := readExample(t, "01-default-deny-ingress-x.yaml")
	if _, err := s.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	onlyNP := func(_, to string) bool { return !inX(to) }
	ac.expect("a NetworkPolicy isolating x, no CRD", onlyNP)
	for _, n := range []string{"a", "b"} {
		if !logHas(ac.agents[n], "does not serve ClusterNetworkPolicies") {
			t.Errorf("agent %s did not log that ClusterNetworkPolicies are not served", n)
		}
	}

	if err := s.InstallClusterNetworkPolicyExperimentalCRD(ctx); err != nil {
		t.Fatal(err)
	}
	cnps, err := s.ClusterNetworkPolicyClient()
	if err != nil {
		t.Fatal(err)
	}
	create := func(p *api.ClusterNetworkPolicy) {
		t.Helper()
		if _, err := cnps.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ClusterNetworkPolicy %s: %v", p.Name, err)
		}
	}
	ns := func(name string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": name}}
	}
	policy := func(name string, tier api.Tier, priority int32, subject api.ClusterNetworkPolicySubject,
		in []api.ClusterNetworkPolicyIngressRule, eg []api.ClusterNetworkPolicyEgressRule) *api.ClusterNetworkPolicy {
		return &api.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: api.ClusterNetworkPolicySpec{Tier: tier, Priority: priority, Subject: subject, Ingress: in, Egress: eg}}
	}
	fromNS := func(action api.ClusterNetworkPolicyRuleAction, sel *metav1.LabelSelector) []api.ClusterNetworkPolicyIngressRule {
		return []api.ClusterNetworkPolicyIngressRule{{Action: action, From: []api.ClusterNetworkPolicyIngressPeer{{Namespaces: sel}}}}
	}
	// The API server's schema takes any operator; the converter does not. Were it enforced, this
	// policy would deny every pod everything.
	create(policy("bad", api.AdminTier, 0, api.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		fromNS(api.ClusterNetworkPolicyRuleActionDeny, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "kubernetes.io/metadata.name", Operator: "Near", Values: []string{"x"}}}}), nil))
	create(policy("admin-accept-y", api.AdminTier, 20, api.ClusterNetworkPolicySubject{Namespaces: ns("x")},
		fromNS(api.ClusterNetworkPolicyRuleActionAccept, ns("y")), nil))
	create(policy("baseline-deny-x", api.BaselineTier, 10, api.ClusterNetworkPolicySubject{Namespaces: ns("y")},
		fromNS(api.ClusterNetworkPolicyRuleActionDeny, ns("x")), nil))
	fromY := func(from, _ string) bool { return !inX(from) }
	ac.expect("the CRD installed: Admin Accept over the NetworkPolicy, Baseline Deny under none", fromY)
	for _, n := range []string{"a", "b"} {
		_, m := ac.get(n, agentproc.MetricsURL)
		if v, _ := testenv.MetricValue(m, `nftpolicy_invalid_objects_total{kind="ClusterNetworkPolicy"}`); v != 1 {
			t.Errorf("agent %s: nftpolicy_invalid_objects_total{kind=\"ClusterNetworkPolicy\"} = %v, want 1 (bad)", n, v)
		}
		if !logHas(ac.agents[n], `"skipping invalid object"`, `"kind":"ClusterNetworkPolicy"`, `"name":"bad"`, `spec.ingress[0].from[0].namespaces`) {
			t.Errorf("agent %s did not log the invalid policy with its kind, name and field", n)
		}
	}
	out, err := netns.Exec(ctx, ac.c.Node("a").NetNS, "nft", "list", "table", "inet", "nftpolicy")
	if err != nil {
		t.Fatalf("nft list table: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"ingress: [admin] ClusterNetworkPolicy/admin-accept-y [default] NetworkPolicy/x/default-deny-ingress | `,
		`"ingress: [baseline] ClusterNetworkPolicy/baseline-deny-x | `,
		`"ClusterNetworkPolicy/admin-accept-y admin priority 20 ingress rule 0 (allow)"`,
		`"ClusterNetworkPolicy/baseline-deny-x baseline priority 10 ingress rule 0 (deny)"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("node a's table lacks the comment %s\n%s", want, out)
		}
	}

	create(policy("admin-pass-y", api.AdminTier, 5, api.ClusterNetworkPolicySubject{Namespaces: ns("x")},
		fromNS(api.ClusterNetworkPolicyRuleActionPass, ns("y")), nil))
	yOnly := func(from, to string) bool { return !inX(from) && !inX(to) }
	ac.expect("an Admin Pass before the Accept: the NetworkPolicy decides", yOnly)

	// y/b's egress: an Accept to a domain name (not enforced), then a Deny of every pod.
	create(policy("admin-domain", api.AdminTier, 1,
		api.ClusterNetworkPolicySubject{Pods: &api.NamespacedPod{NamespaceSelector: *ns("y"), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "b"}}}},
		nil, []api.ClusterNetworkPolicyEgressRule{
			{Action: api.ClusterNetworkPolicyRuleActionAccept, To: []api.ClusterNetworkPolicyEgressPeer{{DomainNames: []api.DomainName{"*.svc.cluster.local"}}}},
			{Action: api.ClusterNetworkPolicyRuleActionDeny, To: []api.ClusterNetworkPolicyEgressPeer{{Namespaces: &metav1.LabelSelector{}}}},
		}))
	ac.expect("a domainNames peer allows nothing", func(from, to string) bool { return yOnly(from, to) && from != "y/b" })
	for _, n := range []string{"a", "b"} {
		_, m := ac.get(n, agentproc.MetricsURL)
		if v, _ := testenv.MetricValue(m, `nftpolicy_partly_enforced_objects_total{kind="ClusterNetworkPolicy"}`); v != 0 {
			t.Errorf("agent %s: nftpolicy_partly_enforced_objects_total{kind=\"ClusterNetworkPolicy\"} = %v, want 0 (domainNames are converted)", n, v)
		}
	}
	// the agent of y/b's node, whose table uses the pattern, says why it matches nothing
	if !logHas(ac.agents["a"], "domainNames peers match nothing", "--dns-answers-group is 0", "*.svc.cluster.local") &&
		!logHas(ac.agents["b"], "domainNames peers match nothing", "--dns-answers-group is 0", "*.svc.cluster.local") {
		t.Errorf("no agent said that the domainNames peer matches nothing without --dns-answers-group")
	}

	if err := s.DeleteClusterNetworkPolicyCRD(ctx); err != nil {
		t.Fatal(err)
	}
	ac.expect("the CRD deleted: the NetworkPolicy alone", onlyNP)
	for _, n := range []string{"a", "b"} {
		if exited, err := ac.agents[n].Exited(); exited {
			t.Errorf("agent %s exited: %v", n, err)
		}
	}
}

// logHas reports whether one line of the agent's log holds every one of parts.
func logHas(p *agentproc.Process, parts ...string) bool {
	for line := range strings.Lines(p.Tail(1 << 22)) {
		if !slices.ContainsFunc(parts, func(s string) bool { return !strings.Contains(line, s) }) {
			return true
		}
	}
	return false
}
