// Package kernel is the kernel side of the dataplane (docs/design.md: internal/graph →
// internal/nft → kernel): its Applier keeps the kernel's `inet nftpolicy` table equal to the
// desired table of an nft.Builder, through internal/nft/ruleset's netlink connection (a
// Committer). The Builder computes; the Applier commits, reads back, repairs, cleans up and reads
// the kernel's counters. It imports internal/nft and internal/nft/ruleset; internal/nft never
// imports it.
//
// After each commit that changed the checked workload prefixes or the sources sets, and after each
// replace, the Applier writes the bridge companion (bridge.go): a stateless `bridge nftpolicy`
// table that checks anti-spoofing and fail-closed ingress on bridge ports, which only the bridge
// family sees; whole, in a transaction of its own, deleted with the inet table by Cleanup and
// once no prefix is checked. Its drops are among Packets' Denied. An Applier of NewApplier (a
// fake Committer) has none.
//
// The Applier's methods Apply, Resync, Repair and Stats (through the agent's adapter) are what
// the agent's loop drives; Monitor opens the kernel's reports of changes other processes make to
// the table; Packets and DenyChain serve the metrics and the deny log from any goroutine.
//
// # Transactions
//
// The first commit of an Applier replaces any table of the same name in one transaction (add,
// delete, add, then everything), so a previous run's table stays in force until then; nothing is
// written before in-sync (the Builder returns no changes before). Later applies send only the
// objects the apply touched (the Builder's ruleset.Changes), a set that has outgrown its size among
// them (nft.Builder.RegrowSets): that set is deleted and added anew with a size for its elements
// now, and the chains that look it up flushed and refilled, in the same transaction — O(its
// elements + those chains' rules), the other sets untouched. A
// failed commit leaves the kernel unchanged; the agent then calls Resync, which replaces the
// whole table. When the kernel refuses that too and names the object it refused
// (ruleset.KernelError), the Builder rejects the costliest policy of the groups that object
// belongs to (nft.Builder.Refused) and the table is written again — at most 16 times per
// replace — so every other policy stays enforced.
//
// Resync first checks, without a read-back, that the committer accounts for every object of the
// desired table (ruleset.Conn.Unjournaled: a change no commit sent leaves the kernel equal to the
// committed table, which no read-back can tell), then reads the table back (ruleset.Conn.Verify);
// it replaces the table on either finding or after a failed apply. Monitor opens the kernel's reports of changes that other processes make to the table
// (ruleset.Monitor); the agent answers a reported change with Repair, which replaces the table
// without reading it back, a report that changes may have gone unreported with Resync, and runs
// Resync periodically as well.
//
// # Invariants
//
//   - After a successful Apply, Resync or Repair the kernel's table is the Builder's desired
//     table (TestIncrementalInKernel, TestDriftRepair); after a failed one the kernel's table is
//     the last committed one and the next Resync replaces it whole.
//   - The counter reads use the nft.Counted published by the last commit (an atomic pointer) on
//     a netlink connection and a namespace handle of their own: they never wait for an apply and
//     may run after the caller closed its namespace handle.
//   - Stats equals the desired table's ruleset.Table.Stats: the rules are tallied from each
//     apply's changes (ruleset.Tally) and counted anew by every replace, so a commit's gauges
//     cost O(sets), not a walk of every chain (TestIncrementalInKernel checks both agree).
//   - Apply, Resync, Repair, Cleanup and Close are called from one goroutine.
//
// # Tests
//
// The tests of this package that need the kernel run as root, in network namespaces of their
// own (the internal/testenv/netns helpers); none touches the root namespace. They compare the
// kernel's listing with internal/nft/testdata/golden, check real traffic against the scenarios'
// truth tables (internal/nft/nfttest), drift repair, refusals, anti-spoofing and counters.
package kernel
