package kernel

import (
	"fmt"

	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// DeniedPackets reads the kernel's counters of the deny chains, and of the bridge companion's
// drops (bridge.go): packets dropped per reason. It
// may be called from any goroutine, during an apply too: it reads the table last committed, on a
// netlink connection of its own. Nothing before the first commit.
func (a *Applier) DeniedPackets() (map[string]uint64, error) {
	c := a.counted.Load()
	if c == nil {
		return nil, nil
	}
	counters, err := ruleset.ReadCounters(a.netnsFD, c.Table(), c.DenyChains())
	if err != nil {
		return nil, fmt.Errorf("reading counters: %w", err)
	}
	denied := c.Denied(counters)
	if a.bridge != nil {
		if err := a.bridge.denied(denied); err != nil {
			return nil, fmt.Errorf("reading the bridge table's counters: %w", err)
		}
	}
	return denied, nil
}

// PolicyPackets reads the kernel's counters of the committed table — the deny chains' and, with
// CountAllowed, the accepting rules' and elements' — summed per nft.PolicyCount. It may be called
// from any goroutine, during an apply too, on a netlink connection of its own.
func (a *Applier) PolicyPackets() (map[nft.PolicyCount]uint64, error) {
	c := a.counted.Load()
	if c == nil {
		return nil, nil
	}
	counts, err := ruleset.ReadCounts(a.netnsFD, c.Table(), c.CountingChains(), c.CountingSets())
	if err != nil {
		return nil, fmt.Errorf("reading counters: %w", err)
	}
	return c.PolicyPackets(counts), nil
}

// DenyChain says what the committed table's deny chain name stands for. Safe for concurrent use,
// during an apply too: it reads what the last commit published.
func (a *Applier) DenyChain(name string) (nft.DenyInfo, bool) {
	c := a.counted.Load()
	if c == nil {
		return nft.DenyInfo{}, false
	}
	return c.DenyChain(name)
}
