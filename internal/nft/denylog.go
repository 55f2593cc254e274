package nft

import (
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// DefaultDenyLogLimit is the rate deny logging defaults to, per deny chain: 10 packets a second
// after a burst of 5.
var DefaultDenyLogLimit = ruleset.Limit{Rate: 10, Unit: ruleset.PerSecond, Burst: 5}

// DenyLog makes every deny chain log the packets it drops to an NFLOG group, within a rate: a
// chain's first rule is `limit rate … log prefix "<chain>" group N`, then its `counter drop`.
// Only denied packets meet it, so the accept path costs nothing more; packets over the rate skip
// the log and are dropped all the same. The rate holds per deny chain (per deny reason).
type DenyLog struct {
	Group uint16
	Limit ruleset.Limit
}

// denyRules are the rules of a deny chain: log within the rate (with DenyLog; the prefix is the
// chain's name, which DenyChain resolves), then count and drop.
func (b *Builder) denyRules(name, reason string) []ruleset.Rule {
	drop := ruleset.Rule{Counter: true, Verdict: ruleset.Verdict{Kind: ruleset.Drop}, Comment: ruleset.Comment(reason)}
	if b.opts.denyLog == nil {
		return []ruleset.Rule{drop}
	}
	limit := b.opts.denyLog.Limit
	return []ruleset.Rule{
		{Limit: &limit, Log: &ruleset.Log{Group: b.opts.denyLog.Group, Prefix: name}, Comment: "log denied packets, within a rate"},
		drop,
	}
}

// DenyInfo is what a deny chain stands for.
type DenyInfo struct {
	// Reason is the reason the chain counts, whole (its comment is cut at 128 bytes).
	Reason string
	// Origin is what the reason names (ReasonOrigin; OriginUnknown for the anti-spoofing and
	// fail-closed chains).
	Origin Origin
}
