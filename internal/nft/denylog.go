package nft

import (
	"strconv"
	"strings"

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

// DenyInfo is what a deny chain stands for, or a log chain's rule (Logged).
type DenyInfo struct {
	// Reason is the reason the chain counts, whole (its comment is cut at 128 bytes).
	Reason string
	// Origin is what the reason names (ReasonOrigin; OriginUnknown for the anti-spoofing and
	// fail-closed chains).
	Origin Origin
	// Logged: the prefix is a Log rule's (the packet was logged and went on; Reason names the
	// Log rule), not a deny chain's.
	Logged bool
}

// logRules are the rules of a log chain: per Log rule of logs (reasons, each ending in "\n"),
// within the deny log's rate per rule, `log prefix "<chain>.<i>" group N`; then v, the
// outcome's verdict. It returns the Log rules' reasons too.
func (b *Builder) logRules(name, logs string, v ruleset.Verdict, reason string) ([]ruleset.Rule, []string) {
	reasons := strings.Split(strings.TrimSuffix(logs, "\n"), "\n")
	rules := make([]ruleset.Rule, 0, len(reasons)+1)
	for i, r := range reasons {
		limit := b.opts.denyLog.Limit
		rules = append(rules, ruleset.Rule{Limit: &limit, Log: &ruleset.Log{Group: b.opts.denyLog.Group, Prefix: logPrefix(name, i)},
			Comment: ruleset.Comment(r)})
	}
	final := ruleset.Rule{Verdict: v, Counter: b.opts.countAllowed && v.Kind == ruleset.Accept, Comment: ruleset.Comment(reason)}
	return append(rules, final), reasons
}

// logPrefix is the NFLOG prefix of log chain name's rule i: what DenyChain resolves.
func logPrefix(name string, i int) string { return name + "." + strconv.Itoa(i) }
