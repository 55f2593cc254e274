package explain

import (
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
)

// TestExplainNodes explains flows to and from nodes of testdata/hosts: node-a's eth0 endpoint
// (denied by default) and node-b's "*" endpoint (default-allow), one GlobalNetworkPolicy
// admitting TCP 8080 from one client; the failsafe ports, loopback and the traffic between a
// node and its own pods as the dataplane's exceptions have them.
func TestExplainNodes(t *testing.T) {
	c := loaded(t, "testdata/hosts")
	const (
		admitted  = "allow by rule GlobalNetworkPolicy/nodes-admit-8080 #0 [default]; tiers [default:decided host-endpoint-default:not reached]; nft [input in]"
		denied    = "deny by tier default [default]; tiers [default:decided host-endpoint-default:not reached]; nft [input in c deny]"
		notJudged = "allow by not judged; tiers []; nft []"
		noPolicy  = "allow by no policy; tiers []; nft []"
	)
	checkNodeCases(t, c, []nodeCase{
		{name: "the client a policy admits", q: Query{From: "172.31.0.200", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			allowed: true, egress: notJudged, ingress: admitted,
			text: "ingress of host endpoint node-a-eth0 (interface eth0), on node node-a: allow"},
		{name: "another client: the tier's default", q: Query{From: "172.31.0.201", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			egress: notJudged, ingress: denied},
		{name: "a node's address is the node", q: Query{From: "172.31.0.200", To: "172.31.0.1", Proto: model.ProtocolTCP, Port: 8080},
			allowed: true, egress: notJudged, ingress: admitted,
			text: "172.31.0.200 → node node-a (172.31.0.1, interface eth0) tcp/8080: ALLOWED"},
		{name: "over IPv6", q: Query{From: "fd00:99::1", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			egress: notJudged, ingress: denied, text: "node node-a (fd00:31::1, interface eth0)"},
		{name: "a failsafe port", q: Query{From: "172.31.0.201", To: "node/node-a", Proto: model.ProtocolTCP, Port: 22},
			allowed: true, egress: notJudged, ingress: "allow by exception; tiers []; nft [input]",
			text: "reason: failsafe port: never blocked by a host endpoint's policy"},
		{name: "the node's own traffic out: the host endpoint default", q: Query{From: "node/node-a", To: "10.9.9.9", Proto: model.ProtocolTCP, Port: 443},
			egress:  "deny by tier default [host-endpoint-default]; tiers [host-endpoint-default:decided]; nft [output eg c deny]",
			ingress: "allow by not judged; tiers []; nft []", text: "egress of host endpoint node-a-eth0 (interface eth0), on node node-a: deny"},
		{name: "a failsafe port out", q: Query{From: "node/node-a", To: "10.9.9.9", Proto: model.ProtocolUDP, Port: 53},
			allowed: true, egress: "allow by exception; tiers []; nft [output]", ingress: notJudged},
		{name: "node to node: the default-allow profile", q: Query{From: "node/node-b", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			egress: noPolicy, ingress: denied},
		{name: "a pod to another node", q: Query{From: "y/b", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			egress: noPolicy, ingress: denied},
		{name: "a pod to its own node: its egress alone", q: Query{From: "x/a", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			allowed: true, egress: "allow by no policy; tiers []; nft [input]", ingress: notJudged,
			text: "from a pod of the node: judged by the pod's egress policy alone"},
		{name: "a node to its own pod: not policed", q: Query{From: "node/node-a", To: "x/a", Proto: model.ProtocolTCP, Port: 80},
			allowed: true, egress: "allow by exception; tiers []; nft [output]", ingress: notJudged,
			text: "reason: to a local pod: not policed"},
		{name: "a node to another node's pod", q: Query{From: "node/node-a", To: "y/b", Proto: model.ProtocolTCP, Port: 80},
			egress:  "deny by tier default [host-endpoint-default]; tiers [host-endpoint-default:decided]; nft [output eg c deny]",
			ingress: noPolicy},
		{name: "loopback", q: Query{From: "node/node-a", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			allowed: true, egress: "allow by exception; tiers []; nft [output]", ingress: "allow by exception; tiers []; nft [input]",
			text: "reason: loopback is never policed"},
		{name: "an interface no host endpoint covers", q: Query{From: "172.31.0.201", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080, Interface: "eth1"},
			allowed: true, egress: notJudged, ingress: "allow by no host endpoint; tiers []; nft []",
			text: "no host endpoint of node node-a covers its interface"},
		{name: "the * endpoint on any interface", q: Query{From: "172.31.0.201", To: "node/node-b", Proto: model.ProtocolTCP, Port: 8080, Interface: "eth1"},
			egress:  notJudged,
			ingress: "deny by tier default [default]; tiers [default:decided]; nft [input in c deny]",
			text:    "host endpoint node-b-all (interface eth1)"},
		{name: "a node without host endpoint", q: Query{From: "x/a", To: "node/node-c", Proto: model.ProtocolTCP, Port: 80},
			err: "node node-c has no host endpoint with an IPv4 address"},
		{name: "addresses of two families", q: Query{From: "172.31.0.200", To: "fd00:31::1", Proto: model.ProtocolTCP, Port: 80},
			err: "addresses of two families"},
	})
}

// nodeCase is one flow of a node test: the query, the verdict and each side's summary, and a
// piece of the text or an error.
type nodeCase struct {
	name            string
	q               Query
	allowed         bool
	egress, ingress string
	text, err       string // in the text, or an error
}

// checkNodeCases explains each case's flow on c as a subtest.
func checkNodeCases(t *testing.T, c *Cluster, cases []nodeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if r, text := explained(t, c, tc.q, tc.err, tc.allowed, tc.egress, tc.ingress); r != nil && !strings.Contains(text, tc.text) {
				t.Errorf("the text has no %q", tc.text)
			}
		})
	}
}

// loaded is the cluster of the manifests in dir.
func loaded(t *testing.T, dir string) *Cluster {
	t.Helper()
	c, errs := Load(dir)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return c
}

// TestExplainFailsafes: the failsafe ports explain's tables carry are the ones SetFailsafes
// gives, as the agent's flags set them: the defaults' 22 and 53 are then policed like any port.
func TestExplainFailsafes(t *testing.T) {
	c := loaded(t, "testdata/hosts")
	in, err := nft.ParseFailsafes("tcp:2222")
	if err != nil {
		t.Fatal(err)
	}
	c.SetFailsafes(in, nil)
	const notJudged = "allow by not judged; tiers []; nft []"
	checkNodeCases(t, c, []nodeCase{
		{name: "a default failsafe port no longer is", q: Query{From: "172.31.0.201", To: "node/node-a", Proto: model.ProtocolTCP, Port: 22},
			egress: notJudged, ingress: "deny by tier default [default]; tiers [default:decided host-endpoint-default:not reached]; nft [input in c deny]"},
		{name: "the given failsafe port", q: Query{From: "172.31.0.201", To: "node/node-a", Proto: model.ProtocolTCP, Port: 2222},
			allowed: true, egress: notJudged, ingress: "allow by exception; tiers []; nft [input]"},
		{name: "no failsafe port out", q: Query{From: "node/node-a", To: "10.9.9.9", Proto: model.ProtocolUDP, Port: 53},
			egress:  "deny by tier default [host-endpoint-default]; tiers [host-endpoint-default:decided]; nft [output eg c deny]",
			ingress: notJudged},
	})
}
