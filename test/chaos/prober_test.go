package chaos

// The continuous prober and its judge. Every cell — an ordered pair of probed pods over IPv4 or
// IPv6 — is probed in a loop of its own (TCP to port 80, netns.ProbeSpec) from the start of the
// suite to its end, and every probe is kept with its start and end. A step judges the probes
// that started within it against the expectation in force (a timeline of phases): a leak is a
// probe that connected where the table says blocked, a drop one that failed where it says
// connected. A phase may open a settle window for some cells (those whose expectation changes,
// or those a fault touches): their probes that overlap the window are not judged.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

const (
	// probeTimeout bounds one probe: a connection the table allows takes a millisecond; the
	// margin is for a loaded machine, where a probe's goroutine may wait long for a thread.
	probeTimeout = 2 * time.Second
	// probeInterval separates the probes of one cell.
	probeInterval = 250 * time.Millisecond
	// probePort is the port every probed pod serves (TCP) and the policies name.
	probePort = 80
)

// cell is one probed path.
type cell struct {
	from, to string // pod keys, "namespace/name"
	ipv6     bool
}

func (c cell) String() string {
	fam := "IPv4"
	if c.ipv6 {
		fam = "IPv6"
	}
	return fmt.Sprintf("%s -> %s %s", c.from, c.to, fam)
}

// probe is one finished probe of a cell.
type probe struct {
	cell
	start, end time.Time
	ok         bool
}

// prober probes every cell in a loop until the test ends.
type prober struct {
	cells []cell
	mu    sync.Mutex
	done  []probe
	err   error // the first probe that could not be made
}

// startProber probes every ordered pair of distinct pods over both families, each pair in a loop
// of its own, until the test ends.
func startProber(t *testing.T, pods []*netns.Pod) *prober {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	pr := &prober{}
	for _, from := range pods {
		for _, to := range pods {
			if from == to {
				continue // loopback is never compared
			}
			for _, ipv6 := range []bool{false, true} {
				spec := netns.ProbeSpec{From: from, To: to, Proto: netns.TCP, Port: probePort, IPv6: ipv6}
				c := cell{from.Key(), to.Key(), ipv6}
				pr.cells = append(pr.cells, c)
				wg.Add(1)
				go func() {
					defer wg.Done()
					pr.loop(ctx, c, spec)
				}()
			}
		}
	}
	return pr
}

func (pr *prober) loop(ctx context.Context, c cell, spec netns.ProbeSpec) {
	// spread the cells over the interval, so that they do not probe in bursts
	wait := rand.N(probeInterval)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		start := time.Now()
		ok, err := spec.Run(ctx, probeTimeout)
		end := time.Now()
		if ctx.Err() != nil {
			return
		}
		pr.mu.Lock()
		if err != nil && pr.err == nil {
			pr.err = fmt.Errorf("%s: %w", c, err)
		}
		if err == nil {
			pr.done = append(pr.done, probe{c, start, end, ok})
		}
		pr.mu.Unlock()
		if err != nil {
			return
		}
		wait = probeInterval
	}
}

// since returns the probes that started at or after t, and the first probe error.
func (pr *prober) since(t time.Time) ([]probe, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []probe
	for _, p := range pr.done {
		if !p.start.Before(t) {
			out = append(out, p)
		}
	}
	return out, pr.err
}

// waitEach waits until every cell has a probe that started at or after t and passes ok, and
// returns the latest start of those probes (the first of each cell); it fails after timeout.
func (pr *prober) waitEach(ctx context.Context, t time.Time, timeout time.Duration, ok func(probe) bool) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		ps, err := pr.since(t)
		if err != nil {
			return time.Time{}, err
		}
		slices.SortFunc(ps, func(a, b probe) int { return a.start.Compare(b.start) })
		seen := map[cell]bool{}
		last := t
		for _, p := range ps {
			if ok(p) && !seen[p.cell] {
				seen[p.cell] = true
				last = maxTime(last, p.start)
			}
		}
		if len(seen) == len(pr.cells) {
			return last, nil
		}
		if time.Now().After(deadline) {
			var missing []string
			for _, c := range pr.cells {
				if !seen[c] {
					missing = append(missing, c.String())
				}
			}
			return time.Time{}, fmt.Errorf("after %v, %d of %d cells still lack such a probe: %s", timeout,
				len(missing), len(pr.cells), strings.Join(missing, "; "))
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// phase: from at on, every cell expects want; the probes of the cells settling that overlap
// [at, settled] are not judged (nil settling: none).
type phase struct {
	at, settled time.Time
	want        *netns.TruthTable
	settling    func(cell) bool
}

// timeline is the expectation over time: phases in order of at.
type timeline []phase

// expect is what c expects for a probe that started at t (the phase in force then), and
// whether the probe, from start to end, falls in a settle window of c.
func (tl timeline) expect(p probe) (want, settling bool) {
	var cur *phase
	for i := range tl {
		ph := &tl[i]
		if !ph.at.After(p.start) {
			cur = ph
		}
		if ph.settling != nil && ph.settling(p.cell) && !p.start.After(ph.settled) && !p.end.Before(ph.at) {
			settling = true
		}
	}
	if cur == nil {
		return false, true // before the first phase: nothing is expected yet
	}
	v, set := cur.want.Get(p.from, p.to)
	return v, settling || !set
}

// verdicts counts a step's probes.
type verdicts struct {
	probes, settling, leaks, drops int
	cells                          map[cell]int // judged probes per cell
	wrong                          []string     // the wrong probes, in order of start
}

// judge judges the probes that started at or after from.
func (tl timeline) judge(ps []probe, from time.Time) verdicts {
	v := verdicts{cells: map[cell]int{}}
	slices.SortFunc(ps, func(a, b probe) int { return a.start.Compare(b.start) })
	for _, p := range ps {
		v.probes++
		want, settling := tl.expect(p)
		if settling {
			v.settling++
			continue
		}
		v.cells[p.cell]++
		if p.ok == want {
			continue
		}
		kind := "drop"
		if p.ok {
			kind, v.leaks = "leak", v.leaks+1
		} else {
			v.drops++
		}
		v.wrong = append(v.wrong, fmt.Sprintf("  %s at +%.2fs..+%.2fs: %s (expected %s)", p.cell,
			p.start.Sub(from).Seconds(), p.end.Sub(from).Seconds(), kind, verdict(want)))
	}
	return v
}

func verdict(ok bool) string {
	if ok {
		return "connected"
	}
	return "blocked"
}

// String is the step's line of figures.
func (v verdicts) String() string {
	return fmt.Sprintf("%d probes (%d judged, %d in settle windows), %d leaks, %d drops",
		v.probes, v.probes-v.settling, v.settling, v.leaks, v.drops)
}
