// Package ruleset is the kernel layer of internal/nft: an in-memory model of one `inet` table
// (Table, Chain, Rule, Set, Element), its rendering in `nft -f` syntax, and a committer that sends
// the difference between the committed and the desired table to the kernel as one netlink batch
// through github.com/google/nftables (one transaction: all of it or none).
//
// (Design notes are completed by the implementation.)
package ruleset
