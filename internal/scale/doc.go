// Package scale generates synthetic clusters for the benchmarks of test/bench (BENCHMARKS.md) and
// for anyone who needs a realistic, large model input: it produces the model.Update stream that
// internal/sync would feed to internal/graph (docs/design.md's data flow: sync → graph → nft),
// without an API server.
//
// The generators, each deterministic (the same arguments give the same updates, byte for byte):
//
//   - Generate(Spec): N pods in M namespaces with K NetworkPolicy-tier policies mixing the shapes
//     clusters really hold — default deny, allow from a namespace, allow from a pod selector,
//     named ports, ipBlock with except, egress to a CIDR (plus DNS) — with distinct selectors,
//     dual-stack pod addresses and LocalPods pods on Spec.Node (spread over namespaces and apps by
//     a seeded permutation, so the policies that become active are a fair sample). Updates yields
//     the same stream one update at a time, for measuring the memory of what consumes it.
//   - PacketPathPolicies: the packet-path benchmark's table: n policies selecting one server,
//     each allowing TCP 80 from a different peer selector, the clients allowed only by the last —
//     the worst case for rulesets that walk policies in order.
//   - NewFanout: the incremental benchmark's cluster: policies over as many distinct peer
//     selectors of a fixed number of members each, and spare pods that join and leave one selector.
//   - LargePolicy: one policy of many rules of many peers (selectors, namespace selectors and
//     nested ipBlocks) over a cluster, the compiler's worst realistic input (LargePolicyBench:
//     200 rules × 50 peers over 10,000 pods).
//   - Churn: an endless stream of pod changes over Generate's cluster — creates, deletes and
//     label changes, 2 : 2 : 1, a share of them on Spec.Node — the churn benchmark's writer's
//     input (BenchmarkChurn).
//
// Invariants: addresses are unique per generated pod (v4 in 10.0.0.0/8 or 10.200.0.0/16, v6 in
// fd00::/8), names are valid Kubernetes names, every update list ends with
// SyncStatusUpdate{InSync}. The package has no state and does no I/O.
package scale
