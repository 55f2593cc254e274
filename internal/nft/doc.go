// Package nft is the dataplane of DESIGN.md's data flow (internal/graph → internal/nft → kernel):
// it compiles the graph's messages into the decision structures of the one `inet nftpolicy`
// table and (through internal/nft/ruleset) commits the difference as one netlink transaction.
//
// # Status
//
// Built so far: the pure compiler core (decide.go) — State folds graph messages (sets, policies);
// State.Compile resolves, in Go, the policy model's evaluation order for one endpoint group,
// direction and family into a Decision; State.Evaluate is the reference semantics it is tested
// against; State.GroupKey says which endpoints share one Decision (tiers + every fact of the
// local address that Compile reads). Not yet built: the translation of Decisions into ruleset objects, the Dataplane
// (New/Apply/Resync/Cleanup/Render), golden and traffic tests. The layout below is the design
// that translation follows.
//
// # Decision shape (DESIGN.md "two verdict maps", with overlap-free intervals)
//
// Evaluation order — tiers in order, policies in order, rules in order, first Allow/Deny wins,
// Pass to the next tier, a tier's DefaultAction when none decided, allow after the last tier — is
// resolved at compile time. For one group/direction/family a Decision holds:
//
//  1. Peers: an exact map, known endpoint address (member of any set a peer side of the group's
//     rules references, named-port sets included for egress) → class. Its class accounts for
//     every rule, CIDR rules included.
//  2. Intervals: a disjoint, sorted partition of the address space cut at every referenced prefix
//     boundary (Nets and NotNets, so ipBlock except is subtracted), adjacent equal classes merged,
//     consulted on an exact miss; intervals whose class equals Default are left out.
//  3. Default: the class of an address in no set and no referenced prefix.
//
// A Class is the peer's whole decision function: a disjoint partition of (tcp|udp|sctp) × port
// 0–65535 into outcomes (cut at every numeric range bound and every named port of the destination
// — the local endpoint for ingress, the peer for egress), segments equal to the final outcome
// dropped, the outcome of each non-port protocol a rule names (ICMP: `meta l4proto vmap`), plus
// the outcome for every other protocol (the chain's explicit final verdict). Peers
// with equal functions share one class, hence one chain in the kernel. Each outcome carries the
// reason (rule comment, or "tier X default: deny") for comments.
//
// Kernel shape: `ip saddr vmap @<group>_peers_v4` (goto class chain), then `ip saddr vmap
// @<group>_nets_v4` (interval map), then `goto <default class>`; each class chain holds `meta
// l4proto . th dport vmap { … }` (interval concatenation, disjoint by construction) and its final
// verdict. Per first packet: conntrack + 2 dispatch lookups + at most 3 lookups per direction,
// whatever the number of policies. Elements per group and family: |known peers| + |intervals| +
// Σ over classes of their port segments. A pod joining a selector: one element add/replace in
// every group whose rules reference the selector (plus a class chain when its function is new).
// A policy change: recompute the groups it applies to.
//
// # Limits (documented, never widening an allow)
//
// Rules with ICMP type/code, or with source-port matches, match nothing yet; a missing set has no
// members. ICMP traffic is judged by protocol-level rules only.
//
// # Layout of the table (planned; priorities unique among kube-proxy -100 dstnat / 0 filter and
// Felix ±)
//
// forward at priority 5, output at 5, input at 5 (policy accept); conntrack first; egress judged
// by `jump` into egress group chains whose allow is `return` (so the destination's ingress is still
// judged in the same base chain), ingress by `goto`.
package nft
