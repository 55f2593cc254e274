// Package explain answers "why is this connection allowed or denied?" for one flow between two
// ends — pods, nodes (their own traffic, through their host endpoints) or addresses — as the
// agents of their nodes decide it: the verdict of the egress side (judged on the source's node)
// and of the ingress side (on the destination's node), each with the ordered tiers and policies
// that applied, the rule or tier default that decided, and the nftables objects on that node
// that implement it.
//
// Place in the data flow: it runs the agent's own stages offline, on top of them —
// internal/sync (a live cluster through a Watcher until in-sync, or a directory of manifests
// through LoadDir) → internal/graph (one per node concerned) → internal/nft (an
// nft.Builder, which computes the node's table without a kernel). Nothing here evaluates a policy:
//
//   - the verdict and its reason come from Builder.Decide, the compiled decision structure of
//     the pod's group looked up as the kernel looks it up, and the origin of that reason (the
//     policy, tier and rule, or the tier default) from the reasons the compiler attaches;
//   - the nftables objects come from ruleset.Table.Walk over the node's computed table, from the
//     forward chain of the side (forward_egress, forward_ingress) to the verdict: the dispatch
//     element, the group chain, the set or map element that decided, the class and deny chains,
//     each with its comment. Decide and the walk must agree; Explain fails if they do not.
//
// A node's own traffic (node.go) is walked in Calico's order through the stages the node's
// table has: raw_in or raw_out (doNotTrack), then, arriving, prednat (preDNAT), then input_host
// or output_host. An exception of a chain (loopback, the node's pods, ICMPv6, a failsafe port)
// lets the packet on and, on the last chain, is the answer; otherwise the host endpoint the
// dispatch maps pick (the node's interface's, else its "*" one) is judged by the stage's
// policy: Builder.DecideStage at the doNotTrack and preDNAT stages, whose allow or deny
// decides (Side.Stage names it; the walk carries the mark an allow sets to the later chains,
// which must accept) and whose undecided outcome leaves the packet to the next stage, then
// Builder.DecideHost. Each decision must agree with the walk as a pod's does. A node's
// address is the smallest of its host endpoints' expectedIPs of the family; its interface the one of its named host endpoint, unless the query names one. Between a node and
// its own pods the dataplane's exceptions decide: a pod's traffic to its node is judged by the
// pod's egress alone, the node's traffic to its pods by nothing. The tables carry the agent's
// default failsafe ports, or those Cluster.SetFailsafes gives (the agent's flags); its API
// server exception, which needs the agent's kubeconfig, is left out.
//
// A node that forwards the flow (forward.go, Query.Via; neither end is the node itself) adds
// its forward stage (Result.Forward): the fwd_in chain for the host endpoint of the interface
// the packet enters by, its destination the local side, and fwd_out for the one it leaves by,
// its source the local side, each decided by Builder.DecideStage and checked against the walk
// of the chain; a stage whose policy decides nothing must accept. A pod of the node is behind
// a workload interface, which the chains accept: its end has no such side. The forward stage
// is walked on its own, without the preDNAT or doNotTrack answer of the same packet.
//
// The table explain computes is the one the node's agent programs, but for what needs the host:
// without the nodes' interfaces it leaves out anti-spoofing and fail-closed ingress (their
// sets hold interface names), which judge spoofed sources and pods not yet programmed, never a
// policy. A side is judged only where a pod of the cluster holds its address: an address
// outside the cluster's pods has no ingress policy, and as a source no egress one.
//
// Domain names (domains.go): a domainNames rule matches the addresses the agent's DNS observer
// writes into the pattern's sets at run time, which no cluster object records; the compiled
// decision, and so the verdict, takes such a rule as matching nothing. A pod's egress side lists
// every domainNames pattern of its policies (Side.Domains) with the rules naming it and its two
// sets; where explain runs on the side's node and is given its kernel's sets (SetDomainSets), it
// lists each address they hold with the time it has left, and marks the flow's destination.
//
// Tests: TestExplain (explain_test.go) on manifests, every side and origin kind; TestExplainNodes
// (node_test.go) for nodes as either end, their exceptions and host endpoint defaults;
// TestExplainNodeStages (stages_test.go) for their doNotTrack and preDNAT stages;
// TestExplainForward (forward_test.go) for a node's forward stage; test/e2e's
// TestConformance compares explain's verdicts, on the live API server, with the traffic every
// upstream NetworkPolicy case lets through, over IPv4 and IPv6; TestExplainDomains (domains_test.go)
// the domain names of a side, offline and read from a node.
package explain
