package chaos

// The IP reuse step: a pod deleted and at once a pod of another namespace and other labels
// created with its address on the same interface, reuseSwaps times, while the reused address
// probes the web pods that the old pod's labels were allowed to reach and the new pod's are not.

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

const (
	// reuseSwaps is how many times the step swaps the pod behind the reused address.
	reuseSwaps = 20
	// reuseBound: after the old pod's delete event, the reused address is denied within it (the
	// p99 of the swaps' leak windows): an event's way from the API to the kernel is a few ms.
	reuseBound = 20 * time.Millisecond
	// reuseProbeEvery separates the fast probes from the reused address to each web pod during a
	// swap, and reuseProbeTimeout bounds one (a blocked SYN is dropped: it times out).
	reuseProbeEvery   = 4 * time.Millisecond
	reuseProbeTimeout = 150 * time.Millisecond
	// reuseProbeFor is how long after the old pod's delete a swap is probed.
	reuseProbeFor = 600 * time.Millisecond
)

// reuse is one swap's timeline.
type reuse struct {
	deleted time.Time // the old pod's delete call returned
	created time.Time // the new pod and its status written
	// event: a watch of this process saw the swap's first event (the delete, or the new pod's
	// status with the address): when the agents may see it
	event time.Time
	// lastLeak is the start of the last probe that connected after the swap began (zero: none).
	lastLeak  time.Time
	leaks     int
	committed time.Time // both agents committed the swap (barrier)
}

// ipReuse: node a gets a pod netns whose pod object is x/reuse-<i> (app=client: x/web-ingress
// lets it reach the web pods). Each swap deletes that object and at once creates y/reuse-<i>
// (app=other, which no policy lets reach them) with the same addresses — every other swap the
// other way round, so that the new pod is known before the old one's delete — then, once both
// agents have committed, puts an x/reuse-<i+1> object back. The reused address probes x/web-a
// (same node) and x/web-b (the other node) over both families every reuseProbeEvery from just
// before the swap for reuseProbeFor. A leak is a probe that connected though it started after
// the swap's first write returned; its window is how long after the swap's first event (as a
// watch of this process saw it) the last one started. No probe started after both agents
// committed may connect, and the p99 of the windows must be within reuseBound. The six probed
// pods are untouched: their cells are judged as in every step.
func (su *suite) ipReuse(t *testing.T, ctx context.Context) (time.Time, string) {
	p, err := su.cl.AddPod("a", "x", "reuse")
	if err != nil {
		t.Fatal(err)
	}
	defer su.cl.DeletePod(p)
	zero := int64(0)
	del := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	c := su.s.Client.CoreV1()
	old := "reuse-0"
	created, err := su.s.CreatePod(ctx, "x", old, "a", map[string]string{"app": "client"}, nil, p.Addrs)
	if err != nil {
		t.Fatal(err)
	}
	var targets []netipTarget
	for _, w := range []string{"x/web-a", "x/web-b"} {
		for _, is6 := range []bool{false, true} {
			targets = append(targets, netipTarget{w, is6, su.byKey[w].IP(is6)})
		}
	}
	commitsBefore := su.eventToCommit(t)
	var swaps []reuse
	for i := range reuseSwaps {
		if _, err := su.waitCommitted(ctx, commitTimeout); err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
		if err := waitAllowed(ctx, p, targets); err != nil {
			for _, n := range []string{"a", "b"} {
				out, _ := netns.Exec(ctx, su.cl.Node(n).NetNS, "nft", "list", "table", "inet", "nftpolicy")
				t.Logf("node %s's table:\n%s", n, out)
			}
			t.Fatalf("swap %d: the old pod x/%s never reached the web pods: %v", i, old, err)
		}
		newName := fmt.Sprintf("reuse-%d", i)
		// the first event that puts the address's owner in doubt: the old pod's delete, or the
		// new pod's status with the address
		w, err := c.Pods("").Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		events := make(chan time.Time, 1)
		seen := make(chan []string, 1)
		go func() {
			defer w.Stop()
			var types []string
			defer func() { seen <- types }()
			for ev := range w.ResultChan() {
				pod, _ := ev.Object.(*corev1.Pod)
				if pod == nil {
					continue
				}
				types = append(types, string(ev.Type)+" "+pod.Namespace+"/"+pod.Name)
				if (ev.Type == watch.Deleted && pod.Namespace == "x" && pod.Name == old) ||
					(ev.Type != watch.Deleted && pod.Namespace == "y" && pod.Name == newName && pod.Status.PodIP != "") {
					events <- time.Now()
					return
				}
			}
		}()
		probes := startFastProbes(ctx, p, targets, reuseProbeFor)
		time.Sleep(20 * time.Millisecond) // probes before the swap: they must connect
		var r reuse
		remove := func() {
			if err := c.Pods("x").Delete(ctx, old, del); err != nil {
				t.Fatal(err)
			}
			r.deleted = time.Now()
		}
		add := func() {
			if _, err := su.s.CreatePod(ctx, "y", newName, "a", map[string]string{"app": "other"}, nil, p.Addrs); err != nil {
				t.Fatal(err)
			}
			r.created = time.Now()
		}
		if i%2 == 0 {
			remove()
			add()
		} else {
			add() // the new pod known before the old one's delete
			remove()
		}
		doubt := r.deleted
		if r.created.Before(doubt) {
			doubt = r.created
		}
		select {
		case r.event = <-events:
		case <-time.After(10 * time.Second):
			w.Stop()
			t.Fatalf("swap %d: no event of the swap was seen by a watch (events: %v)", i, <-seen)
		}
		if r.committed, err = su.waitCommitted(ctx, commitTimeout); err != nil {
			t.Fatalf("swap %d: %v", i, err)
		}
		before := 0
		for _, pb := range probes.wait() {
			switch {
			case !pb.ok:
			case pb.start.Before(doubt):
				before++
			default:
				r.leaks++
				r.lastLeak = maxTime(r.lastLeak, pb.start)
				if !pb.start.Before(r.committed) {
					t.Errorf("swap %d: the reused address connected to %s %v after both agents committed the swap",
						i, pb.cell, pb.start.Sub(r.committed))
				}
			}
		}
		if before == 0 {
			t.Errorf("swap %d: no probe before the delete connected: the swap measured nothing", i)
		}
		swaps = append(swaps, r)
		// put a pod of the allowed labels back for the next swap
		if err := c.Pods("y").Delete(ctx, newName, del); err != nil {
			t.Fatal(err)
		}
		old = fmt.Sprintf("reuse-%d", i+1)
		if created, err = su.s.CreatePod(ctx, "x", old, "a", map[string]string{"app": "client"}, nil, p.Addrs); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Pods("x").Delete(ctx, old, del); err != nil {
		t.Fatal(err)
	}
	committed, err := su.waitCommitted(ctx, commitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	commitsAfter := su.eventToCommit(t)
	var agentSide []string
	for _, node := range []string{"a", "b"} {
		b, a := commitsBefore[node], commitsAfter[node]
		if n := a[1] - b[1]; n > 0 {
			agentSide = append(agentSide, fmt.Sprintf("node %s %.1f ms over %.0f commits", node, (a[0]-b[0])/n*1000, n))
		}
	}
	var windows []time.Duration
	leaky := 0
	for _, r := range swaps {
		wdw := time.Duration(0)
		if r.leaks > 0 {
			leaky++
			wdw = max(0, r.lastLeak.Sub(r.event))
		}
		windows = append(windows, wdw)
	}
	p50, p99, mx := quantiles(windows)
	if p99 > reuseBound {
		t.Errorf("leak window p99 %v after the delete event, bound %v (p50 %v, max %v)", p99, reuseBound, p50, mx)
	}
	return committed, fmt.Sprintf("%d swaps of the pod behind a node-a address (x app=client → y app=other), probed every %v to both web pods, the old pod deleted first every other time, else the new pod created first: %d swaps with a connection after the swap began; leak window after the swap's first event p50 %v, p99 %v, max %v; agents' mean event → commit (nftpolicy_event_to_commit_seconds) %s",
		reuseSwaps, reuseProbeEvery, leaky, p50, p99, mx, strings.Join(agentSide, ", "))
}

// eventToCommit is, per node, the sum and count of its agent's nftpolicy_event_to_commit_seconds.
func (su *suite) eventToCommit(t *testing.T) map[string][2]float64 {
	out := map[string][2]float64{}
	for node, p := range su.agents {
		_, page, err := p.Get(agentproc.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := testenv.MetricValue(page, "nftpolicy_event_to_commit_seconds_sum")
		n, _ := testenv.MetricValue(page, "nftpolicy_event_to_commit_seconds_count")
		out[node] = [2]float64{sum, n}
	}
	return out
}

// netipTarget is a web pod's address of one family.
type netipTarget struct {
	to   string
	ipv6 bool
	addr netip.Addr
}

// quantiles are the p50, p99 (nearest rank) and max of ds.
func quantiles(ds []time.Duration) (p50, p99, mx time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return at(0.5), at(0.99), s[len(s)-1]
}

// waitAllowed waits until the pod connects to every target.
func waitAllowed(ctx context.Context, p *netns.Pod, targets []netipTarget) error {
	deadline := time.Now().Add(commitTimeout)
	for _, tg := range targets {
		for {
			ok, err := netns.Probe(ctx, p.NetNS, tg.addr, netns.TCP, probePort, probeTimeout)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s never connected", tg.to)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// fastProbes are the probes of one swap.
type fastProbes struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	done []probe
}

// startFastProbes probes every target from p every reuseProbeEvery for d, each probe in a
// goroutine of its own (a blocked one lasts reuseProbeTimeout).
func startFastProbes(ctx context.Context, p *netns.Pod, targets []netipTarget, d time.Duration) *fastProbes {
	fp := &fastProbes{}
	end := time.Now().Add(d)
	fp.wg.Add(1)
	go func() {
		defer fp.wg.Done()
		tick := time.NewTicker(reuseProbeEvery)
		defer tick.Stop()
		for now := range tick.C {
			if now.After(end) || ctx.Err() != nil {
				return
			}
			for _, tg := range targets {
				fp.wg.Add(1)
				go func() {
					defer fp.wg.Done()
					start := time.Now()
					ok, err := netns.Probe(ctx, p.NetNS, tg.addr, netns.TCP, probePort, reuseProbeTimeout)
					if err != nil {
						return
					}
					fp.mu.Lock()
					fp.done = append(fp.done, probe{cell{p.Key(), tg.to, tg.ipv6}, start, time.Now(), ok})
					fp.mu.Unlock()
				}()
			}
		}
	}()
	return fp
}

// wait waits for every probe to end and returns them.
func (fp *fastProbes) wait() []probe {
	fp.wg.Wait()
	return fp.done
}
