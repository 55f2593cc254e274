package explain

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// summary is a side in one line: verdict, what decided it (kind, tier, policy, rule), the tiers'
// outcomes, and the chains of the table the packet goes through (names without their hashes).
func summary(s Side) string {
	d := s.DecidedBy
	by := d.Kind
	if d.Policy != "" {
		by += " " + d.Policy
	}
	if d.Rule != nil {
		by += fmt.Sprintf(" #%d", *d.Rule)
	}
	if d.Tier != "" {
		by += " [" + d.Tier + "]"
	}
	var tiers, chains []string
	for _, t := range s.Tiers {
		tiers = append(tiers, t.Tier+":"+t.Outcome)
	}
	for _, st := range s.NFTables {
		name, _, _ := strings.Cut(st.Chain, "_")
		if strings.HasPrefix(st.Chain, "forward_") {
			name = st.Chain
		}
		chains = append(chains, name)
	}
	return fmt.Sprintf("%s by %s; tiers %v; nft %v", s.Verdict, by, tiers, chains)
}

// TestExplain explains flows of a cluster of manifests (testdata/cluster) and of a model with
// an admin tier: each side's verdict, deciding rule or default, tiers and path through the
// node's table.
func TestExplain(t *testing.T) {
	manifests, errs := Load("testdata/cluster")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	tiered := New(tieredCluster())
	icmpc := New(icmpCluster())
	for _, tc := range []struct {
		name             string
		c                *Cluster
		q                Query
		allowed          bool
		egress, ingress  string
		peer, ports, err string // of the ingress side's deciding rule, or an error
	}{
		{name: "allowed by a namespace selector on a named port", c: manifests,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolTCP, Port: 80},
			allowed: true,
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "allow by rule NetworkPolicy/x/allow-from-y #0 [default]; tiers [default:decided]; nft [forward_ingress in]",
			peer:    `in namespaces ns == "y"`, ports: "tcp named port serve-80-tcp"},
		{name: "another port: the tier's default", c: manifests,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolTCP, Port: 81, IPv6: true},
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "deny by tier default [default]; tiers [default:decided]; nft [forward_ingress in c deny]"},
		{name: "egress allowed to a pod, across nodes", c: manifests,
			q:       Query{From: "y/b", To: "y/a", Proto: model.ProtocolTCP, Port: 80},
			allowed: true,
			egress:  "allow by rule NetworkPolicy/y/restrict-egress-b #0 [default]; tiers [default:decided]; nft [forward_egress eg]",
			ingress: "allow by no policy; tiers []; nft []"},
		{name: "denied on both sides", c: manifests,
			q:       Query{From: "y/b", To: "x/b", Proto: model.ProtocolUDP, Port: 53, IPv6: true},
			egress:  "deny by tier default [default]; tiers [default:decided]; nft [forward_egress eg c deny]",
			ingress: "deny by tier default [default]; tiers [default:decided]; nft [forward_ingress in c deny]"},
		{name: "an address outside the cluster, allowed by an ipBlock", c: manifests,
			q:       Query{From: "y/b", To: "10.9.9.9", Proto: model.ProtocolTCP, Port: 443},
			allowed: true,
			egress:  "allow by rule NetworkPolicy/y/restrict-egress-b #1 [default]; tiers [default:decided]; nft [forward_egress eg]",
			ingress: "allow by not judged; tiers []; nft []"},
		{name: "a pod's address is that pod", c: manifests,
			q:       Query{From: "y/b", To: "10.244.0.10", Proto: model.ProtocolTCP, Port: 80},
			egress:  "deny by tier default [default]; tiers [default:decided]; nft [forward_egress eg c deny]",
			ingress: "allow by rule NetworkPolicy/x/allow-from-y #0 [default]; tiers [default:decided]; nft [forward_ingress in]",
			peer:    `in namespaces ns == "y"`, ports: "tcp named port serve-80-tcp"},
		{name: "ICMP has no port", c: manifests,
			q:       Query{From: "x/b", To: "x/a", Proto: model.ProtocolICMP, Port: 80},
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "deny by tier default [default]; tiers [default:decided]; nft [forward_ingress in c deny]"},
		{name: "a pass rule leaves the admin tier", c: tiered,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolTCP, Port: 80},
			allowed: true,
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "allow by rule NetworkPolicy/x/allow-all #0 [default]; tiers [admin:passed default:decided]; nft [forward_ingress in c]",
			peer:    "in namespaces all()", ports: "any protocol and port"},
		{name: "a deny rule of the admin tier", c: tiered,
			q:       Query{From: "y/b", To: "x/a", Proto: model.ProtocolTCP, Port: 80},
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "deny by rule ClusterNetworkPolicy/admin-deny-y #1 [admin]; tiers [admin:decided default:not reached]; nft [forward_ingress in c deny]",
			peer:    "in namespaces ns == 'y'", ports: "any protocol and port"},
		{name: "an echo request allowed by its ICMP type", c: icmpc,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolICMP, ICMPType: 8},
			allowed: true,
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "allow by rule NetworkPolicy/x/echo #1 [default]; tiers [default:decided]; nft [forward_ingress in c]",
			peer:    "any peer", ports: "icmp type 8"},
		{name: "an echo request denied by its ICMP code", c: icmpc,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolICMP, ICMPType: 8, ICMPCode: 1},
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "deny by rule NetworkPolicy/x/echo #0 [default]; tiers [default:decided]; nft [forward_ingress in c deny]",
			peer:    "any peer", ports: "icmp type 8 code 1"},
		{name: "another ICMP type: the tier's default", c: icmpc,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolICMP, ICMPType: 13},
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "deny by tier default [default]; tiers [default:decided]; nft [forward_ingress in c deny]"},
		{name: "a source port a rule allows", c: icmpc,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolTCP, Port: 80, SrcPort: 5353},
			allowed: true,
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "allow by rule NetworkPolicy/x/echo #2 [default]; tiers [default:decided]; nft [forward_ingress in c c]",
			peer:    "any peer", ports: "tcp 80 from source ports 5300-5399"},
		{name: "another source port: the tier's default", c: icmpc,
			q:       Query{From: "y/a", To: "x/a", Proto: model.ProtocolTCP, Port: 80, SrcPort: 6000},
			egress:  "allow by no policy; tiers []; nft []",
			ingress: "deny by tier default [default]; tiers [default:decided]; nft [forward_ingress in c deny]"},
		{name: "no such pod", c: manifests, q: Query{From: "x/zz", To: "x/a", Proto: model.ProtocolTCP, Port: 80},
			err: "pod x/zz is no endpoint"},
		{name: "not a pod key", c: manifests, q: Query{From: "x/a", To: "a", Proto: model.ProtocolTCP, Port: 80},
			err: "want NAMESPACE/POD"},
		{name: "no address of the family", c: tiered, q: Query{From: "y/a", To: "fd00::1", Proto: model.ProtocolTCP, Port: 80},
			err: "pod y/a has no IPv6 address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := explained(t, tc.c, tc.q, tc.err, tc.allowed, tc.egress, tc.ingress)
			if r == nil {
				return
			}
			if d := r.Ingress.DecidedBy; d.Peer != tc.peer || d.Ports != tc.ports {
				t.Errorf("ingress rule matches %q, %q; want %q, %q", d.Peer, d.Ports, tc.peer, tc.ports)
			}
		})
	}
}

// explained explains q on c and checks the verdict and each side's summary, or, with wantErr,
// that Explain fails with it (then the result is nil). The explanation's text is logged if the
// test fails.
func explained(t *testing.T, c *Cluster, q Query, wantErr string, allowed bool, egress, ingress string) (*Result, string) {
	t.Helper()
	r, err := c.Explain(q)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("Explain: %v; want an error with %q", err, wantErr)
		}
		return nil, ""
	}
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("explanation:\n%s", text.String())
		}
	})
	if r.Allowed != allowed {
		t.Errorf("allowed %v, want %v", r.Allowed, allowed)
	}
	if got := summary(r.Egress); got != egress {
		t.Errorf("egress\n got %s\nwant %s", got, egress)
	}
	if got := summary(r.Ingress); got != ingress {
		t.Errorf("ingress\n got %s\nwant %s", got, ingress)
	}
	return r, text.String()
}

// tieredCluster is x/a and y/a, y/b (IPv4 only) on one node, an admin-tier policy that passes
// y/a's traffic to x and denies the rest of y's, and a NetworkPolicy allowing everyone into x.
// icmpCluster is pods x/a and y/a, where x/a admits echo requests of every code but 1, and TCP
// port 80 from source ports 5300-5399.
func icmpCluster() []model.Update {
	code := uint8(1)
	return []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x"}}, model.NamespaceSet{Namespace: model.Namespace{Name: "y"}},
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "a"}, Node: "n",
			Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Running: true}},
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "y", Name: "a"}, Node: "n",
			Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Running: true}},
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "echo"},
			Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "all()", ApplyIngress: true,
			IngressRules: []model.Rule{
				{Action: model.ActionDeny, Protocol: model.ProtocolICMP, ICMP: &model.ICMPMatch{Type: 8, Code: &code}},
				{Action: model.ActionAllow, Protocol: model.ProtocolICMP, ICMP: &model.ICMPMatch{Type: 8}},
				{Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{Ports: []model.Port{{First: 5300, Last: 5399}}},
					Destination: model.Peer{Ports: []model.Port{{First: 80, Last: 80}}}},
			}}},
		model.SyncStatusUpdate{Status: model.InSync},
	}
}

func tieredCluster() []model.Update {
	ns := func(name string) model.Update {
		return model.NamespaceSet{Namespace: model.Namespace{Name: name, Labels: map[string]string{"ns": name}}}
	}
	pod := func(ns, name, addr string) model.Update {
		return model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: ns, Name: name}, Node: "n",
			Labels: model.LabelsOf(map[string]string{"pod": name}), Addrs: []netip.Addr{netip.MustParseAddr(addr)}, Running: true}}
	}
	return []model.Update{
		ns("x"), ns("y"),
		pod("x", "a", "10.0.0.1"), pod("y", "a", "10.0.0.2"), pod("y", "b", "10.0.0.3"),
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: "admin-deny-y"},
			Tier: model.TierAdmin, Order: 10, Namespace: "x", Selector: "all()", ApplyIngress: true,
			IngressRules: []model.Rule{
				{Action: model.ActionPass, Source: model.Peer{NamespaceSelector: "ns == 'y'", Selector: "pod == 'a'"}},
				{Action: model.ActionDeny, Source: model.Peer{NamespaceSelector: "ns == 'y'"}},
			}}},
		model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: "x", Name: "allow-all"},
			Tier: model.TierNetworkPolicy, Namespace: "x", Selector: "all()", ApplyIngress: true,
			IngressRules: []model.Rule{{Action: model.ActionAllow, Source: model.Peer{NamespaceSelector: "all()"}}}}},
		model.SyncStatusUpdate{Status: model.InSync},
	}
}
