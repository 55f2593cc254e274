// Package dataplane is the contract between the calculation graph and the dataplane: the
// messages internal/graph emits and internal/nft consumes, and nothing else. It depends only on
// internal/model, so neither side needs the other (docs/design.md, data flow).
//
// Messages come in dependency order (see Message) and are coalesced per flush: at most one per
// object, carrying its final state. Sets are referenced by SetID from rules; endpoints name
// their policies per direction and tier.
package dataplane
