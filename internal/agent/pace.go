package agent

import "time"

// defaultCommitQuiet is the pacer's default gap after the previous burst that makes a burst a
// lone change, committed at once (Config.CommitQuiet); the pacer runs only with a
// Config.CommitInterval.
const defaultCommitQuiet = 5 * time.Millisecond

// pacer spaces the loop's commits of changes under sustained churn; a burst here is one that
// fed the graph. A burst that arrives at least quiet after the previous one is a lone change
// and commits at once; one that arrives sooner is churn, and waits until interval after the
// last commit, whose commit then takes every burst that arrived meanwhile.
type pacer struct {
	interval, quiet time.Duration
	last            time.Time // when the last commit of changes ended; zero: none yet
	arrived         time.Time // when the previous burst arrived; zero: none yet
}

// arrive records a burst arriving at now and returns how long it waits before its commit: 0
// for a lone change.
func (p *pacer) arrive(now time.Time) time.Duration {
	prev := p.arrived
	p.arrived = now
	if p.last.IsZero() || prev.IsZero() || now.Sub(prev) >= p.quiet {
		return 0
	}
	return max(0, p.last.Add(p.interval).Sub(now))
}

// committed records the end of a commit of changes at now.
func (p *pacer) committed(now time.Time) { p.last = now }
