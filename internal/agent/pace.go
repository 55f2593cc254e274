package agent

import "time"

// defaultCommitInterval is the least time between two commits of changes while they keep
// coming (Config.CommitInterval): at most ≈ 67 commits a second however fast the cluster
// changes, each change waiting at most that long for its commit besides the commit itself.
const defaultCommitInterval = 15 * time.Millisecond

// pacer spaces the loop's commits of changes under sustained churn: a change after a quiet
// period (no commit for interval) commits at once; a change sooner waits until interval after
// the last commit, and that commit takes every change that arrived meanwhile.
type pacer struct {
	interval time.Duration
	last     time.Time // when the last commit of changes ended; zero: none yet
}

// delay is how long changes arriving at now wait before their commit: 0 after a quiet period.
func (p *pacer) delay(now time.Time) time.Duration {
	if p.last.IsZero() {
		return 0
	}
	return max(0, p.last.Add(p.interval).Sub(now))
}

// committed records the end of a commit of changes at now.
func (p *pacer) committed(now time.Time) { p.last = now }
