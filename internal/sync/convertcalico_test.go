package sync_test

import (
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/selector"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// sel is the canonical form of a selector.
func sel(s string) string { return selector.MustParse(s).String() }

// decodeStrict decodes a YAML manifest into out, refusing unknown fields as kubectl does.
func decodeStrict(t *testing.T, doc string, out any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), out); err != nil {
		t.Fatalf("decoding %q: %v", doc, err)
	}
}

// convertCalico converts a GlobalNetworkPolicy, or a NetworkPolicy of namespace x when the
// manifest's kind says so.
func convertCalico(t *testing.T, doc string) (model.Policy, []string, error) {
	t.Helper()
	if strings.Contains(doc, "kind: NetworkPolicy") {
		var p sync.CalicoNetworkPolicy
		decodeStrict(t, doc, &p)
		return sync.ConvertCalicoNetworkPolicy(&p)
	}
	var p sync.GlobalNetworkPolicy
	decodeStrict(t, doc, &p)
	return sync.ConvertGlobalNetworkPolicy(&p)
}

const gnpHead = "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: p}\n"
const npHead = "apiVersion: projectcalico.org/v3\nkind: NetworkPolicy\nmetadata: {name: p, namespace: x}\n"

// gnpModel is the model of a GlobalNetworkPolicy p of the default tier, order unset, selecting
// every endpoint and host endpoint, changed by edit.
func gnpModel(edit func(p *model.Policy)) model.Policy {
	p := model.Policy{Key: model.PolicyKey{Kind: sync.KindGlobalNetworkPolicy, Name: "p"}, Tier: model.TierNetworkPolicy,
		Order: math.Inf(1), Selector: "all()", Hosts: true, ApplyIngress: true}
	edit(&p)
	return p
}

func npModel(edit func(p *model.Policy)) model.Policy {
	p := model.Policy{Key: model.PolicyKey{Kind: sync.KindCalicoNetworkPolicy, Namespace: "x", Name: "p"}, Tier: model.TierNetworkPolicy,
		Order: math.Inf(1), Namespace: "x", Selector: "all()", ApplyIngress: true}
	edit(&p)
	return p
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// calicoPeer is a Calico rule peer: it also picks network sets.
func calicoPeer(p model.Peer) model.Peer { p.NetworkSets = true; return p }

var anyCalicoPeer = calicoPeer(model.Peer{})

func label(tier, order string, dir model.Direction, i int) string {
	return tier + " order " + order + " " + dir.String() + " rule " + string(rune('0'+i))
}

// calicoRule is a rule of the default tier, order unset, with its peers any.
func calicoRule(act model.Action, dir model.Direction, i int, edit func(r *model.Rule)) model.Rule {
	r := model.Rule{Action: act, Source: anyCalicoPeer, Destination: anyCalicoPeer, Label: label("default", "unset", dir, i)}
	if edit != nil {
		edit(&r)
	}
	return r
}

// TestConvertCalicoPolicy reads like Calico's "Global network policy", "Network policy" and
// "Rule" reference pages: a manifest, and the model it means.
func TestConvertCalicoPolicy(t *testing.T) {
	u8 := func(v uint8) *uint8 { return &v }
	cases := []struct {
		name    string
		doc     string
		want    model.Policy
		ignored int
	}{
		{"empty spec: default tier, order unset, all(), ingress only",
			gnpHead + "spec: {}", gnpModel(func(*model.Policy) {}), 0},
		{"tier, order, selector, namespaceSelector",
			gnpHead + "spec: {tier: security, order: 10.5, selector: \"app == 'a'\", namespaceSelector: \"team == 'x'\"}",
			gnpModel(func(p *model.Policy) {
				p.Tier, p.Order, p.Selector, p.NamespaceSelector = "security", 10.5, sel("app == 'a'"), sel("team == 'x'")
				p.Hosts = false // a namespace selector picks pods only
			}), 0},
		{"serviceAccountSelector: ANDed with the selector and the namespaceSelector",
			gnpHead + "spec: {selector: \"app == 'a'\", namespaceSelector: \"team == 'x'\", serviceAccountSelector: \"role == 'trusted'\"}",
			gnpModel(func(p *model.Policy) {
				p.Selector, p.NamespaceSelector, p.ServiceAccountSelector = sel("app == 'a'"), sel("team == 'x'"), sel("role == 'trusted'")
				p.Hosts = false // a host endpoint has no service account
			}), 0},
		{"serviceAccountSelector of a NetworkPolicy, by the account's name; the selector unset: all()",
			npHead + "spec: {serviceAccountSelector: \"projectcalico.org/name in {'sa-a', 'sa-b'}\"}",
			npModel(func(p *model.Policy) {
				p.ServiceAccountSelector = sel("projectcalico.org/name in {'sa-a', 'sa-b'}")
			}), 0},
		{"serviceAccountSelector: all() is no restriction beyond the selector's",
			gnpHead + "spec: {serviceAccountSelector: all()}",
			gnpModel(func(p *model.Policy) {
				p.ServiceAccountSelector = "all()"
				p.Hosts = false // any serviceAccountSelector selects endpoints with an account
			}), 0},
		{"Calico's built-in tiers by the model's names",
			gnpHead + "spec: {tier: kube-admin, order: 1}", gnpModel(func(p *model.Policy) { p.Tier, p.Order = model.TierAdmin, 1 }), 0},
		{"a user tier named like a model built-in",
			gnpHead + "spec: {tier: baseline}", gnpModel(func(p *model.Policy) { p.Tier = "calico:baseline" }), 0},
		{"types unset with egress rules only: egress",
			gnpHead + "spec: {egress: [{action: Allow}]}",
			gnpModel(func(p *model.Policy) {
				p.ApplyIngress, p.ApplyEgress = false, true
				p.EgressRules = []model.Rule{calicoRule(model.ActionAllow, model.Egress, 0, nil)}
			}), 0},
		{"types unset with both: both",
			gnpHead + "spec: {ingress: [{action: Deny}], egress: [{action: Allow}]}",
			gnpModel(func(p *model.Policy) {
				p.ApplyEgress = true
				p.IngressRules = []model.Rule{calicoRule(model.ActionDeny, model.Ingress, 0, nil)}
				p.EgressRules = []model.Rule{calicoRule(model.ActionAllow, model.Egress, 0, nil)}
			}), 0},
		{"explicit types ignore the other direction's rules",
			gnpHead + "spec: {types: [Egress], ingress: [{action: Deny}], egress: [{action: Pass}]}",
			gnpModel(func(p *model.Policy) {
				p.ApplyIngress, p.ApplyEgress = false, true
				p.EgressRules = []model.Rule{calicoRule(model.ActionPass, model.Egress, 0, nil)}
			}), 0},
		{"actions Allow, Deny, Pass, Log in order",
			gnpHead + "spec: {ingress: [{action: Log}, {action: Pass}, {action: Deny}, {action: Allow}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionLog, model.Ingress, 0, nil), calicoRule(model.ActionPass, model.Ingress, 1, nil),
					calicoRule(model.ActionDeny, model.Ingress, 2, nil), calicoRule(model.ActionAllow, model.Ingress, 3, nil)}
			}), 0},
		{"protocol by name and number, notProtocol, ipVersion",
			gnpHead + "spec: {ingress: [{action: Allow, protocol: TCP, ipVersion: 6}, {action: Allow, protocol: 47, notProtocol: udplite}, {action: Allow, notProtocol: \"17\"}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{
					calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) { r.Protocol, r.IPVersion = model.ProtocolTCP, 6 }),
					calicoRule(model.ActionAllow, model.Ingress, 1, func(r *model.Rule) { r.Protocol, r.NotProtocol = 47, 136 }),
					calicoRule(model.ActionAllow, model.Ingress, 2, func(r *model.Rule) { r.NotProtocol = model.ProtocolUDP }),
				}
			}), 0},
		{"icmp and notICMP type and code",
			gnpHead + "spec: {ingress: [{action: Allow, protocol: ICMP, icmp: {type: 8, code: 0}, notICMP: {type: 3}}, {action: Deny, protocol: ICMPv6, icmp: {type: 128}}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{
					calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
						r.Protocol, r.ICMP, r.NotICMP = model.ProtocolICMP, &model.ICMPMatch{Type: 8, Code: u8(0)}, &model.ICMPMatch{Type: 3}
					}),
					calicoRule(model.ActionDeny, model.Ingress, 1, func(r *model.Rule) {
						r.Protocol, r.ICMP = model.ProtocolICMPv6, &model.ICMPMatch{Type: 128}
					}),
				}
			}), 0},
		{"source and destination nets, notNets (an address is its /32)",
			gnpHead + "spec: {ingress: [{action: Allow, source: {nets: [10.0.0.1/8, 10.1.2.3], notNets: [\"fd00::/64\"]}, destination: {nets: [192.168.0.0/16]}}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
					r.Source = calicoPeer(model.Peer{Nets: []netip.Prefix{pfx("10.0.0.0/8"), pfx("10.1.2.3/32")}, NotNets: []netip.Prefix{pfx("fd00::/64")}})
					r.Destination = calicoPeer(model.Peer{Nets: []netip.Prefix{pfx("192.168.0.0/16")}})
				})}
			}), 0},
		{"ports: numbers, ranges, names, on both sides; notPorts",
			gnpHead + "spec: {ingress: [{action: Allow, protocol: TCP, source: {ports: [1024:2048], notPorts: [1500]}, destination: {ports: [80, \"443\", http]}}, {action: Allow, destination: {ports: [metrics]}}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{
					calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
						r.Protocol = model.ProtocolTCP
						r.Source = calicoPeer(model.Peer{Ports: []model.Port{{First: 1024, Last: 2048}}, NotPorts: []model.Port{{First: 1500, Last: 1500}}})
						r.Destination = calicoPeer(model.Peer{Ports: []model.Port{{First: 80, Last: 80}, {First: 443, Last: 443}, {Name: "http"}}})
					}),
					calicoRule(model.ActionAllow, model.Ingress, 1, func(r *model.Rule) {
						r.Destination = calicoPeer(model.Peer{Ports: []model.Port{{Name: "metrics"}}})
					}),
				}
			}), 0},
		{"selector, namespaceSelector, global()",
			gnpHead + "spec: {ingress: [{action: Allow, source: {selector: \"role == 'db'\", namespaceSelector: \"env == 'prod'\"}}, {action: Allow, source: {selector: \"has(ext)\", namespaceSelector: global()}}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{
					calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
						r.Source = calicoPeer(model.Peer{Selector: sel("role == 'db'"), NamespaceSelector: sel("env == 'prod'")})
					}),
					calicoRule(model.ActionAllow, model.Ingress, 1, func(r *model.Rule) {
						r.Source = calicoPeer(model.Peer{Selector: sel("has(ext)"), Global: true})
					}),
				}
			}), 0},
		{"notSelector alone in a global policy: excluded",
			gnpHead + "spec: {ingress: [{action: Deny, source: {notSelector: \"app == 'ok'\"}}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionDeny, model.Ingress, 0, func(r *model.Rule) {
					r.Source = calicoPeer(model.Peer{NotSelector: sel("app == 'ok'")})
				})}
			}), 0},
		{"notSelector with a selector: merged into it, as Felix does",
			gnpHead + "spec: {ingress: [{action: Allow, source: {selector: \"app == 'a'\", notSelector: \"tier == 'x'\"}}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
					r.Source = calicoPeer(model.Peer{Selector: sel("app == 'a' && !(tier == 'x')")})
				})}
			}), 0},
		{"notSelector in a namespaced policy: its namespace's objects but those",
			npHead + "spec: {ingress: [{action: Allow, source: {notSelector: \"app == 'b'\"}}]}",
			npModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
					r.Source = calicoPeer(model.Peer{Selector: sel("!(app == 'b')")})
				})}
			}), 0},
		{"serviceAccounts: names and selector ANDed",
			npHead + "spec: {ingress: [{action: Allow, source: {serviceAccounts: {names: [api, web], selector: \"team == 'a'\"}}}]}",
			npModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionAllow, model.Ingress, 0, func(r *model.Rule) {
					r.Source = calicoPeer(model.Peer{ServiceAccountSelector: sel("team == 'a' && projectcalico.org/name in {'api', 'web'}")})
				})}
			}), 0},
		{"a namespaced policy: its selector in its namespace",
			npHead + "spec: {tier: default, order: 100, selector: \"role == 'frontend'\", ingress: [{action: Allow, protocol: UDP, destination: {ports: [53]}}]}",
			npModel(func(p *model.Policy) {
				p.Order, p.Selector = 100, sel("role == 'frontend'")
				p.IngressRules = []model.Rule{{Action: model.ActionAllow, Protocol: model.ProtocolUDP, Source: anyCalicoPeer,
					Destination: calicoPeer(model.Peer{Ports: []model.Port{{First: 53, Last: 53}}}), Label: "default order 100 ingress rule 0"}}
			}), 0},
		{"http in an Allow rule: the rule matches nothing",
			gnpHead + "spec: {ingress: [{action: Allow, http: {methods: [GET]}}, {action: Deny}]}",
			gnpModel(func(p *model.Policy) {
				p.IngressRules = []model.Rule{calicoRule(model.ActionDeny, model.Ingress, 1, nil)}
			}), 1},
		{"services in a Deny rule: kept without them",
			gnpHead + "spec: {egress: [{action: Deny, destination: {services: {name: kube-dns, namespace: kube-system}}}]}",
			gnpModel(func(p *model.Policy) {
				p.ApplyIngress, p.ApplyEgress = false, true
				p.EgressRules = []model.Rule{calicoRule(model.ActionDeny, model.Egress, 0, nil)}
			}), 1},
		{"services in a Pass rule: a Deny without them",
			gnpHead + "spec: {egress: [{action: Pass, destination: {services: {name: kube-dns, namespace: kube-system}}}]}",
			gnpModel(func(p *model.Policy) {
				p.ApplyIngress, p.ApplyEgress = false, true
				p.EgressRules = []model.Rule{calicoRule(model.ActionDeny, model.Egress, 0, nil)}
			}), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ignored, err := convertCalico(t, c.doc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if len(ignored) != c.ignored {
				t.Errorf("ignored %q, want %d sentences", ignored, c.ignored)
			}
		})
	}
}

// TestConvertCalicoPolicyInvalid: what Calico's validation refuses makes the policy invalid,
// and the error names the field.
func TestConvertCalicoPolicyInvalid(t *testing.T) {
	cases := []struct{ doc, field string }{
		{gnpHead + "spec: {selector: \"app ==\"}", "spec.selector"},
		{gnpHead + "spec: {ingress: [{action: Accept}]}", "spec.ingress[0].action"},
		{gnpHead + "spec: {ingress: [{action: allow}]}", "spec.ingress[0].action"},
		{gnpHead + "spec: {types: [Both]}", "spec.types[0]"},
		{gnpHead + "spec: {tier: Bad_Tier}", "spec.tier"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: ICMP, destination: {ports: [80]}}]}", "spec.ingress[0].destination.ports[0]"},
		{gnpHead + "spec: {ingress: [{action: Allow, destination: {ports: [80]}}]}", "spec.ingress[0].destination.ports[0]"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: TCP, icmp: {type: 8}}]}", "spec.ingress[0].icmp"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: ICMP, ipVersion: 6, icmp: {type: 8}}]}", "spec.ingress[0].icmp"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: ICMP, icmp: {code: 1}}]}", "spec.ingress[0].icmp.code"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: ICMP, icmp: {type: 255}}]}", "spec.ingress[0].icmp.type"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: 256}]}", "spec.ingress[0].protocol"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: GRE}]}", "spec.ingress[0].protocol"},
		{gnpHead + "spec: {ingress: [{action: Allow, ipVersion: 5}]}", "spec.ingress[0].ipVersion"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: TCP, source: {ports: [\"9:8\"]}}]}", "spec.ingress[0].source.ports[0]"},
		{gnpHead + "spec: {ingress: [{action: Allow, protocol: TCP, source: {ports: [70000]}}]}", "spec.ingress[0].source.ports[0]"},
		{gnpHead + "spec: {ingress: [{action: Allow, source: {nets: [10.0.0.0/33]}}]}", "spec.ingress[0].source.nets[0]"},
		{gnpHead + "spec: {ingress: [{action: Allow, source: {notSelector: \"a in\"}}]}", "spec.ingress[0].source.notSelector"},
		{gnpHead + "spec: {egress: [{action: Allow, destination: {namespaceSelector: \"(\"}}]}", "spec.egress[0].destination.namespaceSelector"},
		{gnpHead + "spec: {serviceAccountSelector: \"a ==\"}", "spec.serviceAccountSelector"},
		{npHead + "spec: {serviceAccountSelector: \"has(\"}", "spec.serviceAccountSelector"},
		{gnpHead + "spec: {doNotTrack: true, preDNAT: true, applyOnForward: true}", "spec"},
		{gnpHead + "spec: {doNotTrack: true}", "spec.applyOnForward"},
		{gnpHead + "spec: {preDNAT: true}", "spec.applyOnForward"},
		{gnpHead + "spec: {preDNAT: true, applyOnForward: true, egress: [{action: Deny}]}", "spec"},
		{gnpHead + "spec: {preDNAT: true, applyOnForward: true, types: [Ingress, Egress]}", "spec"},
		{npHead + "spec: {preDNAT: true, applyOnForward: true}", "spec"},
		{gnpHead + "spec: {namespaceSelector: global()}", "spec.namespaceSelector"},
		{npHead + "spec: {namespaceSelector: \"a == 'b'\"}", "spec"},
	}
	for _, c := range cases {
		_, _, err := convertCalico(t, c.doc)
		if err == nil {
			t.Errorf("%s: converted", c.doc)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%s: error %q does not name %s", c.doc, err, c.field)
		}
	}
}

func TestConvertCalicoTier(t *testing.T) {
	head := "apiVersion: projectcalico.org/v3\nkind: Tier\n"
	cases := []struct {
		doc     string
		want    model.Tier
		builtin bool
		err     bool
	}{
		{head + "metadata: {name: security}\nspec: {order: 300}", model.Tier{Name: "security", Order: 300, DefaultAction: model.ActionDeny}, false, false},
		{head + "metadata: {name: platform}\nspec: {defaultAction: Pass}", model.Tier{Name: "platform", Order: math.Inf(1), DefaultAction: model.ActionPass}, false, false},
		{head + "metadata: {name: admin}\nspec: {order: 5}", model.Tier{Name: "calico:admin", Order: 5, DefaultAction: model.ActionDeny}, false, false},
		{head + "metadata: {name: default}\nspec: {order: 1000000, defaultAction: Deny}", model.Tier{Name: model.TierNetworkPolicy, Order: 1e6, DefaultAction: model.ActionDeny}, true, false},
		{head + "metadata: {name: kube-admin}\nspec: {order: 1000, defaultAction: Pass}", model.Tier{Name: model.TierAdmin, Order: 1000, DefaultAction: model.ActionPass}, true, false},
		{head + "metadata: {name: kube-baseline}\nspec: {order: 10000000, defaultAction: Pass}", model.Tier{Name: model.TierBaseline, Order: 1e7, DefaultAction: model.ActionPass}, true, false},
		{head + "metadata: {name: kube-admin}\nspec: {order: 7, defaultAction: Pass}", model.Tier{}, false, true},
		{head + "metadata: {name: x}\nspec: {defaultAction: Allow}", model.Tier{}, false, true},
	}
	for _, c := range cases {
		var tier sync.CalicoTier
		decodeStrict(t, c.doc, &tier)
		got, builtin, err := sync.ConvertCalicoTier(&tier)
		if (err != nil) != c.err || got != c.want || builtin != c.builtin {
			t.Errorf("%s:\n got %+v builtin %v err %v\nwant %+v builtin %v err %v", c.doc, got, builtin, err, c.want, c.builtin, c.err)
		}
	}
}

func TestConvertNetworkSets(t *testing.T) {
	var g sync.GlobalNetworkSet
	decodeStrict(t, "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkSet\nmetadata: {name: ext, labels: {role: external}}\nspec: {nets: [198.51.100.7/24, \"2001:db8::1\", 10.0.0.0/8, 198.51.100.0/24]}", &g)
	got, ignored, err := sync.ConvertGlobalNetworkSet(&g)
	want := model.NetworkSet{Key: model.NetworkSetKey{Name: "ext"}, Labels: model.LabelsOf(map[string]string{"role": "external"}),
		Nets: []netip.Prefix{pfx("10.0.0.0/8"), pfx("198.51.100.0/24"), pfx("2001:db8::1/128")}}
	if err != nil || len(ignored) != 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("GlobalNetworkSet: got %+v %q %v, want %+v", got, ignored, err, want)
	}
	var n sync.CalicoNetworkSet
	decodeStrict(t, "apiVersion: projectcalico.org/v3\nkind: NetworkSet\nmetadata: {name: partners, namespace: x}\nspec: {nets: [203.0.113.0/24], allowedEgressDomains: [example.com]}", &n)
	got, ignored, err = sync.ConvertCalicoNetworkSet(&n)
	want = model.NetworkSet{Key: model.NetworkSetKey{Namespace: "x", Name: "partners"}, Nets: []netip.Prefix{pfx("203.0.113.0/24")}}
	if err != nil || len(ignored) != 1 || !reflect.DeepEqual(got, want) {
		t.Errorf("NetworkSet: got %+v %q %v, want %+v and allowedEgressDomains ignored", got, ignored, err, want)
	}
	n.Spec.Nets = []string{"nope"}
	if _, _, err := sync.ConvertCalicoNetworkSet(&n); err == nil || !strings.HasPrefix(err.Error(), "spec.nets[0]") {
		t.Errorf("a bad net: %v", err)
	}
}

// The host endpoint stages convert to the model's flags, whole (nothing ignored).
func TestConvertCalicoHostStages(t *testing.T) {
	cases := []struct {
		spec string
		edit func(p *model.Policy)
	}{
		{"spec: {applyOnForward: true}", func(p *model.Policy) { p.ApplyOnForward = true }},
		{"spec: {preDNAT: true, applyOnForward: true}", func(p *model.Policy) { p.ApplyOnForward, p.PreDNAT = true, true }},
		{"spec: {doNotTrack: true, applyOnForward: true, types: [Egress]}", func(p *model.Policy) {
			p.ApplyOnForward, p.DoNotTrack, p.ApplyIngress, p.ApplyEgress = true, true, false, true
		}},
	}
	for _, c := range cases {
		got, ignored, err := convertCalico(t, gnpHead+c.spec)
		if err != nil || len(ignored) > 0 {
			t.Fatalf("%s: err %v, ignored %q", c.spec, err, ignored)
		}
		if want := gnpModel(c.edit); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.spec, got, want)
		}
	}
}
