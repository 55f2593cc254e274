package ruleset

import (
	"fmt"
	"strings"
	"testing"
)

// TestWalk follows packets through the sample table and a small table of jumps: each walk's
// matched rules (chain#index, the elements of its lookups, the verdict) and its final verdict.
func TestWalk(t *testing.T) {
	sample := sampleTable("walk")
	jumps := NewTable("jumps")
	jumps.Chains["base"] = &Chain{Name: "base", Base: &Base{Hook: HookForward}, Rules: []Rule{
		{Verdict: Verdict{Kind: Jump, Chain: "sub"}},
		{L4Proto: 6, Verdict: Verdict{Kind: Drop}},
	}}
	jumps.Chains["sub"] = &Chain{Name: "sub", Rules: []Rule{
		{L4Proto: 17, Verdict: Verdict{Kind: Return}},
		{Limit: &Limit{Rate: 1, Unit: PerSecond}, Log: &Log{Group: 1}},
	}}
	jumps.Chains["loop"] = &Chain{Name: "loop", Rules: []Rule{{Verdict: Verdict{Kind: Goto, Chain: "loop"}}}}
	jumps.Chains["lost"] = &Chain{Name: "lost", Rules: []Rule{{Verdict: Verdict{Kind: Goto, Chain: "gone"}}}}

	pkt := func(src, dst string, proto uint8, port uint16) Packet {
		return Packet{Iifname: "eth0", Oifname: "eth1", Src: ip(src), Dst: ip(dst), Proto: proto, Dport: port}
	}
	for _, tc := range []struct {
		name  string
		table *Table
		chain string
		p     Packet
		want  string // the steps, then the final verdict
		err   string
	}{
		{"allowed by the allow set", sample, "forward", pkt("10.0.1.5", "10.0.0.1", 6, 80),
			"forward#2 ingress_v4[10.0.0.1 comment \"default/a\" : goto pod_a] goto pod_a | pod_a#0 allow_a[10.0.1.5 . tcp . 80 counter comment \"web/x\"] accept | accept", ""},
		{"a known peer's class denies the port", sample, "forward", pkt("10.0.1.5", "10.0.0.1", 6, 8050),
			"forward#2 ingress_v4[10.0.0.1 comment \"default/a\" : goto pod_a] goto pod_a | pod_a#2 peers_a[10.0.1.5 comment \"web/x\" : goto class_x] goto class_x | " +
				"class_x#0 class_x_ports[tcp . 8000-8100 counter : goto deny_x] goto deny_x | deny_x#0 drop | drop", ""},
		{"a peer element drops", sample, "forward", pkt("10.0.1.6", "10.0.0.2", 17, 53),
			"forward#2 ingress_v4[10.0.0.2 comment \"default/b\" : goto pod_a] goto pod_a | pod_a#2 peers_a[10.0.1.6 : drop] drop | drop", ""},
		{"an ipBlock range, a port allowed", sample, "forward", pkt("10.1.2.3", "10.0.0.1", 17, 53),
			"forward#2 ingress_v4[10.0.0.1 comment \"default/a\" : goto pod_a] goto pod_a | pod_a#3 nets_v4[10.1.0.0/16 comment \"allow-web rule 0\" : goto class_x] goto class_x | " +
				"class_x#0 class_x_ports[udp . 53 counter comment \"dns\" : accept] accept | accept", ""},
		{"a protocol without ports", sample, "forward", pkt("10.1.2.3", "10.0.0.1", 1, 0),
			"forward#2 ingress_v4[10.0.0.1 comment \"default/a\" : goto pod_a] goto pod_a | pod_a#3 nets_v4[10.1.0.0/16 comment \"allow-web rule 0\" : goto class_x] goto class_x | " +
				"class_x#1 class_x_l4[icmp comment \"icmp\" : accept] accept | accept", ""},
		{"another peer takes the chain's last rule", sample, "forward", pkt("10.7.0.1", "10.0.0.1", 6, 80),
			"forward#2 ingress_v4[10.0.0.1 comment \"default/a\" : goto pod_a] goto pod_a | pod_a#5 goto deny_x | deny_x#0 drop | drop", ""},
		{"IPv6 through the IPv6 map", sample, "forward", pkt("fd00:1::7", "fd00::1", 6, 80),
			"forward#3 ingress_v6[fd00::1 comment \"default/a\" : goto pod_a] goto pod_a | pod_a#4 nets_v6[fd00:1::/64 comment \"v6 block\" : goto class_x] goto class_x | " +
				"class_x#0 class_x_ports[tcp . 80 counter comment \"allow-web port 80\" : accept] accept | accept", ""},
		{"no rule matches: the base chain's policy", sample, "forward", pkt("10.7.0.1", "10.9.9.9", 6, 80), "accept", ""},
		{"a spoofed source on a workload interface", sample, "forward",
			Packet{Iifname: "veth3", Src: ip("10.0.0.9"), Dst: ip("10.9.9.9"), Proto: 6, Dport: 80},
			"forward#4 sources_v4[] drop | drop", ""},
		{"a jump returns", jumps, "base", pkt("10.0.0.1", "10.0.0.2", 17, 53), "base#0 jump sub | sub#0 return | accept", ""},
		{"a logging rule goes on; the end of a jumped chain returns", jumps, "base", pkt("10.0.0.1", "10.0.0.2", 6, 80),
			"base#0 jump sub | sub#1 - | base#1 drop | drop", ""},
		{"a loop", jumps, "loop", pkt("10.0.0.1", "10.0.0.2", 6, 80), "", "a loop?"},
		{"a missing chain", jumps, "lost", pkt("10.0.0.1", "10.0.0.2", 6, 80), "", "no chain gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, v, err := tc.table.Walk(tc.chain, tc.p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Walk: %v; want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, s := range steps {
				part := fmt.Sprintf("%s#%d", s.Chain, s.Rule)
				for _, f := range s.Found {
					part += fmt.Sprintf(" %s[%s]", f.Set, f.ElementText)
				}
				verdict := s.Verdict.String()
				if verdict == "" {
					verdict = "-"
				}
				parts = append(parts, part+" "+verdict)
			}
			if got := strings.Join(append(parts, v.String()), " | "); got != tc.want {
				t.Errorf("walk\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
