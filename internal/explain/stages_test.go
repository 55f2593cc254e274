package explain

import (
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestExplainNodeStages explains flows to and from nodes of testdata/hoststages through the
// host endpoint stages before the node's own policy, in Calico's order: doNotTrack, then
// preDNAT (arriving), then the node's own policy; each stage's allow and deny, a stage that
// decides nothing, and the failsafe ports, which every stage lets through.
func TestExplainNodeStages(t *testing.T) {
	c := loaded(t, "testdata/hoststages")
	const notJudged = "allow by not judged; tiers []; nft []"
	checkNodeCases(t, c, []nodeCase{
		{name: "a doNotTrack allow decides, untracked", q: Query{From: "172.31.0.200", To: "node/node-a", Proto: model.ProtocolTCP, Port: 9000},
			allowed: true, egress: notJudged,
			ingress: "allow by rule GlobalNetworkPolicy/untracked #0 [default]; tiers [default:decided host-endpoint-undecided:not reached]; nft [raw raw raw in prednat input]",
			text:    "stage: doNotTrack (untracked), before the node's own policy; not tracked"},
		{name: "another client: on through every stage to the node's own default", q: Query{From: "172.31.0.201", To: "node/node-a", Proto: model.ProtocolTCP, Port: 9000},
			egress: notJudged, ingress: "deny by tier default [default]; tiers [default:decided host-endpoint-default:not reached]; nft [raw raw raw in c host prednat prednat in c host input in c deny]"},
		{name: "the same over IPv6", q: Query{From: "fd00:99::1", To: "node/node-a", Proto: model.ProtocolTCP, Port: 9000},
			egress: notJudged, ingress: "deny by tier default [default]; tiers [default:decided host-endpoint-default:not reached]; nft [raw raw raw in c host prednat prednat in c host input in c deny]"},
		{name: "a preDNAT deny", q: Query{From: "172.31.0.66", To: "node/node-a", Proto: model.ProtocolTCP, Port: 30080},
			egress: notJudged, ingress: "deny by rule GlobalNetworkPolicy/nodeports #0 [default]; tiers [default:decided host-endpoint-undecided:not reached]; nft [raw raw raw in c host prednat prednat in c deny]",
			text: "stage: preDNAT, before the node's own policy"},
		{name: "a preDNAT allow", q: Query{From: "172.31.0.200", To: "node/node-a", Proto: model.ProtocolTCP, Port: 30081},
			allowed: true, egress: notJudged,
			ingress: "allow by rule GlobalNetworkPolicy/nodeports #1 [default]; tiers [default:decided host-endpoint-undecided:not reached]; nft [raw raw raw in c host prednat prednat in c input]",
			text:    "decided by GlobalNetworkPolicy/nodeports ingress rule 1 (allow)"},
		{name: "a preDNAT deny through the * endpoint", q: Query{From: "172.31.0.66", To: "node/node-b", Proto: model.ProtocolTCP, Port: 30080, Interface: "eth1"},
			egress: notJudged, ingress: "deny by rule GlobalNetworkPolicy/nodeports #0 [default]; tiers [default:decided host-endpoint-undecided:not reached]; nft [raw raw raw in c host prednat prednat in c deny]",
			text: "host endpoint node-b-all (interface eth1)"},
		{name: "an allow of a stage's undecided policy leaves it to the node's own", q: Query{From: "172.31.0.200", To: "node/node-a", Proto: model.ProtocolTCP, Port: 8080},
			allowed: true, egress: notJudged,
			ingress: "allow by rule GlobalNetworkPolicy/nodes-admit-8080 #0 [default]; tiers [default:decided host-endpoint-default:not reached]; nft [raw raw raw in c host prednat prednat in c host input in]"},
		{name: "a failsafe port passes every stage", q: Query{From: "172.31.0.66", To: "node/node-a", Proto: model.ProtocolTCP, Port: 22},
			allowed: true, egress: notJudged, ingress: "allow by exception; tiers []; nft [raw raw prednat input]",
			text: "reason: failsafe port: never blocked by a host endpoint's policy"},
		{name: "a doNotTrack deny out", q: Query{From: "node/node-a", To: "10.9.9.9", Proto: model.ProtocolTCP, Port: 25},
			egress:  "deny by rule GlobalNetworkPolicy/untracked #0 [default]; tiers [default:decided host-endpoint-undecided:not reached]; nft [raw raw raw eg c deny]",
			ingress: notJudged, text: "stage: doNotTrack (untracked)"},
		{name: "a failsafe port out", q: Query{From: "node/node-a", To: "10.9.9.9", Proto: model.ProtocolUDP, Port: 53},
			allowed: true, egress: "allow by exception; tiers []; nft [raw raw output]", ingress: notJudged},
		{name: "out: on to the node's own default", q: Query{From: "node/node-a", To: "10.9.9.9", Proto: model.ProtocolTCP, Port: 443},
			egress:  "deny by tier default [host-endpoint-default]; tiers [host-endpoint-default:decided]; nft [raw raw raw eg c host output eg c deny]",
			ingress: notJudged},
	})
}
