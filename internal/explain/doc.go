// Package explain answers "why is this connection allowed or denied?" for one flow between two
// pods (or a pod and an address), as the agents of their nodes decide it: the verdict of the
// egress side (judged on the source pod's node) and of the ingress side (on the destination
// pod's node), each with the ordered tiers and policies that applied, the rule or tier default
// that decided, and the nftables objects on that node that implement it.
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
// The table explain computes is the one the node's agent programs, but for what needs the host:
// without the nodes' interfaces it leaves out anti-spoofing and fail-closed ingress (their
// sets hold interface names), which judge spoofed sources and pods not yet programmed, never a
// policy. A side is judged only where a pod of the cluster holds its address: an address
// outside the cluster's pods has no ingress policy, and as a source no egress one.
//
// Tests: TestExplain (explain_test.go) on manifests, every side and origin kind; test/e2e's
// TestConformance compares explain's verdicts, on the live API server, with the traffic every
// upstream NetworkPolicy case lets through, over IPv4 and IPv6.
package explain
