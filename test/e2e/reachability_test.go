package e2e

// Expected connectivity the upstream way (after netpol/reachability.go and truthtable.go,
// Apache-2.0) is the harness's expected/observed tables (netns.Reachability): start from a
// default, then override with Expect, ExpectPeer (empty fields are wildcards), ExpectAllIngress
// (a column) and ExpectAllEgress (a row). Loopback cells are never compared (upstream
// ignoreLoopback, k/k issue #95879).

import "github.com/nftpolicy/nftpolicy/internal/testenv/netns"

type (
	// Reachability is the expected truth table of one probe over a fixed list of pod keys "ns/name".
	Reachability = netns.Reachability
	// Peer matches pods by namespace and/or name; an empty field matches everything.
	Peer = netns.Peer
)

// NewReachability returns a table over pods with every cell expected def.
func NewReachability(pods []string, def bool) *Reachability { return netns.NewReachability(pods, def) }

// compare returns the number of non-loopback cells where observed differs from expected, and
// the report: expected, observed and comparison tables and the wrong cells.
func compare(expected *Reachability, observed func(from, to string) bool) (wrong int, report string) {
	return expected.Compare(observed)
}
