package explain

import (
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestExplainForward explains flows forwarded through node-a of testdata/forward by its host
// endpoint's interface, judged by its applyOnForward policy where they enter (fwd_in) and
// leave (fwd_out) besides their ends' sides: an allow, a deny, a stage that decides nothing,
// and a destination selector picking one of two pods.
func TestExplainForward(t *testing.T) {
	c := loaded(t, "testdata/forward")
	cases := []struct {
		name    string
		q       Query
		allowed bool
		forward []string // each forward side's summary
		text    string
		err     string
	}{
		{name: "the destination selector's pod", q: Query{From: "172.31.0.200", To: "x/a", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 80},
			allowed: true, forward: []string{"ingress allow by rule"}, text: "stage: applyOnForward, forwarded by node node-a"},
		{name: "the other pod", q: Query{From: "172.31.0.200", To: "y/a", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 80},
			forward: []string{"ingress deny by tier default"}},
		{name: "another port", q: Query{From: "172.31.0.200", To: "x/a", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 81},
			forward: []string{"ingress deny by"}},
		{name: "a pod out: denied leaving", q: Query{From: "x/a", To: "10.9.9.9", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 25},
			forward: []string{"egress deny by rule"}},
		{name: "a pod out: passed by every tier", q: Query{From: "x/a", To: "10.9.9.9", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 443},
			allowed: true, forward: []string{"egress allow by no tier decided"}},
		{name: "a pod out through the * endpoint: undecided", q: Query{From: "x/b", To: "10.9.9.9", Via: "node/node-b", Interface: "eth1", Proto: model.ProtocolTCP, Port: 25},
			allowed: true, forward: []string{"egress allow by no policy"}, text: "no applyOnForward policy of node node-b decides"},
		{name: "routed through the * endpoint", q: Query{From: "172.31.0.200", To: "10.9.9.9", Via: "node/node-b", Interface: "eth1", Proto: model.ProtocolTCP, Port: 81},
			forward: []string{"ingress deny by tier default", "egress allow by no policy"}},
		{name: "a pod in through the * endpoint", q: Query{From: "172.31.0.200", To: "y/b", Via: "node/node-b", Interface: "eth1", Proto: model.ProtocolTCP, Port: 80},
			allowed: true, forward: []string{"ingress allow by rule"}, text: "host endpoint node-b-all (interface eth1)"},
		{name: "without --via: no forward side", q: Query{From: "172.31.0.200", To: "y/a", Proto: model.ProtocolTCP, Port: 80},
			allowed: true},
		{name: "the node itself", q: Query{From: "172.31.0.200", To: "node/node-a", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 80},
			err: "the node itself"},
		{name: "two pods of the node", q: Query{From: "x/a", To: "y/a", Via: "node/node-a", Proto: model.ProtocolTCP, Port: 80},
			err: "both ends are pods of the node"},
		{name: "not a node", q: Query{From: "172.31.0.200", To: "x/a", Via: "node-a", Proto: model.ProtocolTCP, Port: 80},
			err: "want node/NODE"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Explain(tc.q)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			t.Log(text.String())
			if r.Allowed != tc.allowed {
				t.Errorf("allowed %v, want %v", r.Allowed, tc.allowed)
			}
			if len(r.Forward) != len(tc.forward) {
				t.Fatalf("%d forward sides, want %d", len(r.Forward), len(tc.forward))
			}
			for i, s := range r.Forward {
				if got := s.Direction + " " + s.Verdict + " by " + s.DecidedBy.Kind; !strings.HasPrefix(got, tc.forward[i]) {
					t.Errorf("forward side %d: %q, want %q", i, got, tc.forward[i])
				}
			}
			if !strings.Contains(text.String(), tc.text) {
				t.Errorf("the text has no %q", tc.text)
			}
		})
	}
}
