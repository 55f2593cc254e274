package kernel

import (
	"fmt"

	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Packets is what the kernel has counted in the committed table, summed two ways.
type Packets struct {
	// Denied is the packets dropped per deny reason: the deny chains' and the bridge
	// companion's drops (bridge.go), every reason of the table present.
	Denied map[string]uint64
	// Policies is the packets each policy (or tier default) allowed and denied, per
	// nft.PolicyCount: the deny chains' drops and, with CountAllowed, the accepting rules' and
	// elements' accepts.
	Policies map[nft.PolicyCount]uint64
}

// Packets reads the kernel's counters of the committed table once (ruleset.ReadCounts of its
// deny chains and, with CountAllowed, its counting chains and sets), and the bridge companion's.
// It may be called from any goroutine, during an apply too: it reads the table last committed,
// on netlink connections of its own. Nothing (nil maps) before the first commit.
func (a *Applier) Packets() (Packets, error) {
	c := a.counted.Load()
	if c == nil {
		return Packets{}, nil
	}
	counts, err := ruleset.ReadCounts(a.netnsFD, c.Table(), c.CountingChains(), c.CountingSets())
	if err != nil {
		return Packets{}, fmt.Errorf("reading counters: %w", err)
	}
	p := Packets{Denied: c.Denied(counts), Policies: c.PolicyPackets(counts)}
	if a.bridge != nil {
		if err := a.bridge.denied(p.Denied); err != nil {
			return Packets{}, fmt.Errorf("reading the bridge table's counters: %w", err)
		}
	}
	return p, nil
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
