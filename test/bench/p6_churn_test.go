package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/scale"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// churnRate is P6's writer's target: pod changes per second.
const churnRate = 200

// churnWriters is how many changes the writer has in flight at most.
const churnWriters = 32

// churnLocal is the share of the churn's creates, deletes and relabels on the agent's node.
const churnLocal = 0.02

// BenchmarkChurn is P6: what a busy cluster costs the agent in steady state. P3's cluster
// (100,000 pods, 5,000 policies, 250 local) is loaded as BenchmarkColdStartAPI loads it, the
// agent (the product binary, default flags but an hour between read-backs) programs a node
// namespace, and then a writer makes churnRate pod changes per second through the API server
// (scale.Churn: creates, deletes, app relabels, 2 % of them on the node) for 60 s (10 s with
// BENCH_QUICK). Over that window: the agent's CPU, commits and resident memory from /proc and
// its metrics; the latency from a change's request to the kernel's event adding or deleting its
// element (watchElements) for every change whose effect on the node's table is known
// beforehand; the CPU of the API server, etcd and this process (the writer, the element watch)
// on the same cores. With NFTP_BENCH_CHURN_WATCHERS=N, N more watches of every pod (podWatchers)
// run through the window. With NFTP_BENCH_AGENT_CPUPROFILE the measured agent is the one built
// with nftpolicy_profile, and its profile (from its start to the window's end, the cold start
// included) is written there.
func BenchmarkChurn(b *testing.B) {
	testenv.RequireRoot(b)
	testenv.RequireCommand(b, "ip", "nft")
	window := 60 * time.Second
	if quick {
		window = 10 * time.Second
	}
	spec := coldSpec
	setStage("P6 churn: loading the cluster")
	ctx := b.Context()
	srv, _ := startLoaded(b, spec)
	prof := agentProfiles{cpu: os.Getenv("NFTP_BENCH_AGENT_CPUPROFILE")}
	var tags []string
	if prof.cpu != "" {
		tags = []string{"nftpolicy_profile"}
		os.Remove(prof.cpu) // collect waits for the file to appear
	}
	bin, err := agentproc.Build(b.TempDir(), tags...)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.CollectGarbage(ctx); err != nil {
		b.Fatal(err)
	}
	waitQuiet(b)

	setStage("P6 churn: the agent's cold start")
	node := newNetns(b, "bw")
	fwd, err := netns.Forward(node.name, netip.MustParseAddrPort(agentproc.APIAddr), strings.TrimPrefix(srv.URL, "https://"))
	if err != nil {
		b.Fatal(err)
	}
	defer fwd.Close()
	p, err := agentproc.Start(agentproc.Config{Bin: bin, Node: spec.Node, NetNS: node.name, Server: srv, Dir: b.TempDir(),
		Args: []string{"--resync-interval", "1h"}, Env: prof.env()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.Stop(); err != nil {
			b.Errorf("stopping the agent: %v\n%s", err, p.Tail(4096))
		}
	}()
	pid := p.Pid()
	metrics := func() (m agentMetrics) {
		_, page, err := p.Get(agentproc.MetricsURL)
		if err != nil {
			return m
		}
		for name, v := range map[string]*float64{"nftpolicy_transactions_total": &m.transactions, "nftpolicy_set_elements": &m.elements,
			"nftpolicy_model_updates_total": &m.updates, "nftpolicy_apply_duration_seconds_sum": &m.applySeconds,
			"nftpolicy_event_to_commit_seconds_sum": &m.eventToCommitSeconds} {
			*v, _ = testenv.MetricValue(page, name)
		}
		return m
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if metrics().transactions >= 1 {
			break
		}
		if exited, err := p.Exited(); exited {
			b.Fatalf("the agent exited: %v\n%s", err, p.Tail(4096))
		}
		if time.Now().After(deadline) {
			b.Fatalf("no commit within 3 minutes:\n%s", p.Tail(4096))
		}
	}
	vis := tableVisibility(b, node, spec)
	waitQuiet(b) // the agent's collection after its first commit, this process's
	mon := watchElements(b, node, nft.DefaultTable)

	setStage("P6 churn: writing")
	w := newChurnWriter(b, srv, mon, vis)
	var watchers *podWatchers
	nWatchers, _ := strconv.Atoi(os.Getenv("NFTP_BENCH_CHURN_WATCHERS"))
	if nWatchers > 0 {
		watchers = startPodWatchers(b, srv, nWatchers)
	}
	cpus := func() churnCPU {
		c := churnCPU{agent: procCPU(pid), writer: procCPU(os.Getpid()), machine: machineCPU(b)}
		if pids := srv.PIDs(); len(pids) == 2 { // etcd, kube-apiserver
			c.etcd, c.api = procCPU(pids[0]), procCPU(pids[1])
		}
		return c
	}
	next, stop := iter.Pull(scale.Churn{Cluster: spec, Local: churnLocal, Seed: 1}.Changes())
	defer stop()
	first, _ := next() // the generator's set-up (every pod of the cluster) before the window
	m0 := metrics()
	rss0 := procField(pid, "VmRSS")
	cpu0, t0 := cpus(), time.Now()
	w.run(ctx, first, next, window)
	cpu1, t1 := cpus(), time.Now()
	m1 := metrics()
	rss1, hwm := procField(pid, "VmRSS"), procField(pid, "VmHWM")
	prof.collect(b, pid)
	var watched int64
	if watchers != nil {
		watched = watchers.close()
	}
	samples, missed := w.wait()

	took := t1.Sub(t0)
	share := func(d time.Duration) float64 { return 100 * d.Seconds() / took.Seconds() }
	agentCPU := cpu1.agent - cpu0.agent
	tx := m1.transactions - m0.transactions
	commits := tx / took.Seconds()
	var lat []time.Duration
	byKind := map[scale.ChangeKind]int{}
	for _, s := range samples {
		lat = append(lat, s.took)
		byKind[s.kind]++
	}
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	if len(samples) == 0 {
		events, overflows := mon.seen()
		b.Fatalf("no change with a known effect reached the kernel (%d missed; %d changes made, %d failed; %.0f commits; %d element events seen, %d overflows)\nthe agent's log:\n%s",
			missed, w.done.Load(), w.failed.Load(), tx, events, overflows, p.Tail(4096))
	}
	if missed > len(samples)/20 {
		b.Errorf("%d of %d changes with a known effect did not reach the kernel within %v", missed, missed+len(samples), churnSampleTimeout)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(share(agentCPU), "agent-CPU-%")
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(p99)/1e6, "p99-ms")
	b.ReportMetric(commits, "commits/s")
	b.ReportMetric(w.achieved(took), "changes/s")

	what := fmt.Sprintf("churn over P3's cluster (%d pods, %d policies, %d local): %d pod changes/s for %.0f s (creates, deletes, app relabels 2 : 2 : 1; %.0f %% on the node)",
		spec.Pods, spec.Policies, spec.LocalPods, churnRate, window.Seconds(), 100*churnLocal)
	if prof.cpu != "" {
		what += ", the agent profiled"
	}
	report.add(row{"P6", what + ": the agent's CPU, its commits",
		fmt.Sprintf("%.1f %% of a core (%.2f s over %.1f s: %.2f ms per change made); %.1f commits/s (%.0f; apply mean %.2f ms, the agent's own event → commit mean %.1f ms) for %.0f model updates/s; the writer achieved %.1f changes/s (%d made, %d failed); elements %.0f → %.0f",
			share(agentCPU), agentCPU.Seconds(), took.Seconds(), 1e3*agentCPU.Seconds()/float64(max(w.done.Load(), 1)),
			commits, tx, 1e3*(m1.applySeconds-m0.applySeconds)/max(tx, 1), 1e3*(m1.eventToCommitSeconds-m0.eventToCommitSeconds)/max(tx, 1),
			(m1.updates-m0.updates)/took.Seconds(), w.achieved(took), w.done.Load(), w.failed.Load(), m0.elements, m1.elements),
		"≤ 5 % of a core", meets(share(agentCPU) <= 5)})
	events, overflows := mon.seen()
	report.add(row{"P6", "churn: change → kernel commit for the changes with a known local effect (request sent → the kernel's element event with its address)",
		fmt.Sprintf("p50 %.1f ms, p99 %.1f ms (%d samples: %d creates, %d deletes, %d relabels; %d missed; %d element events, %d overflows of the watch)",
			float64(p50)/1e6, float64(p99)/1e6, len(samples), byKind[scale.PodCreated], byKind[scale.PodDeleted], byKind[scale.PodRelabelled], missed, events, overflows),
		"p99 ≤ 50 ms", meets(p99 <= 50*time.Millisecond)})
	report.add(row{"P6", "churn: the agent's resident memory, window start → end; its peak (cold start included)",
		fmt.Sprintf("VmRSS %.0f → %.0f MiB (%+.1f MiB); VmHWM %.0f MiB", float64(rss0)/mib, float64(rss1)/mib, (float64(rss1)-float64(rss0))/mib, float64(hwm)/mib),
		"", ""})
	if watchers != nil {
		report.add(row{"P6", fmt.Sprintf("churn: %d more watches of every pod (NFTP_BENCH_CHURN_WATCHERS), each on its own connection, read and discarded", nWatchers),
			fmt.Sprintf("%.0f bytes per change per watch (protobuf, %.1f MB each over the window); the API server's CPU in the row below includes serving them", float64(watched)/float64(nWatchers)/float64(max(w.done.Load(), 1)), float64(watched)/float64(nWatchers)/1e6),
			"", ""})
	}
	whole, whys, relists := wholeWrites(p.LogPath)
	report.add(row{"P6", "churn: writes of the whole table after the cold start, from the agent's log (commits that fell back to one, failed applies, repairs); the watches that relisted",
		fmt.Sprintf("%d%s; %d relists", whole, whys, relists), "", ""})
	report.add(row{"P6", "churn: CPU of the others on the same cores over the window",
		fmt.Sprintf("kube-apiserver %.0f %%, etcd %.0f %% of a core; the writer and the element watch (this process) %.0f %%; the machine's %d CPUs %.0f %% busy",
			share(cpu1.api-cpu0.api), share(cpu1.etcd-cpu0.etcd), share(cpu1.writer-cpu0.writer),
			cpu1.machine.cpus, 100*cpu1.machine.busyShare(cpu0.machine)),
		"", ""})
}

// agentMetrics are the counters BenchmarkChurn reads from the agent's /metrics.
type agentMetrics struct {
	transactions, elements, updates    float64
	applySeconds, eventToCommitSeconds float64 // histogram sums: one observation per commit
}

// churnCPU is the CPU time used so far by each process of P6, and the machine's.
type churnCPU struct {
	agent, api, etcd, writer time.Duration
	machine                  machineTicks
}

// machineTicks are /proc/stat's aggregate CPU counters: busy (all but idle and iowait) and all.
type machineTicks struct {
	busy, total uint64
	cpus        int
}

func machineCPU(b *testing.B) machineTicks {
	text, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	var m machineTicks
	for i, line := range strings.Split(string(text), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if i > 0 {
			m.cpus++
			continue
		}
		for j, v := range f[1:] {
			var n uint64
			fmt.Sscan(v, &n)
			m.total += n
			if j != 3 && j != 4 { // idle, iowait
				m.busy += n
			}
		}
	}
	return m
}

// busyShare is the share of the machine's CPU time busy since before.
func (m machineTicks) busyShare(before machineTicks) float64 {
	if m.total <= before.total {
		return 0
	}
	return float64(m.busy-before.busy) / float64(m.total-before.total)
}

// visibility says, per pod shape (node, namespace, app and tier labels: all the generated
// policies' selectors look at), whether such a pod's address is in the node's table. It is read
// from the table the agent programmed for the generated cluster: a new pod of a shape some pod
// had is in the table exactly when those pods are.
type visibility map[string]bool

// shapeOf is a pod's key in visibility: the pods of other nodes are alike.
func shapeOf(e model.Endpoint, node string) string {
	where := "remote"
	if e.Node == node {
		where = "local"
	}
	l := e.Labels.Map()
	return where + "|" + e.Key.Namespace + "|" + l["app"] + "|" + l["tier"]
}

// tableVisibility lists the node's table and records, for the shape of each generated pod,
// whether its IPv4 address is in it.
func tableVisibility(b *testing.B, node *netnsHandle, spec scale.Spec) visibility {
	out, err := exec.Command("ip", "netns", "exec", node.name, "nft", "list", "table", "inet", nft.DefaultTable).Output()
	if err != nil {
		b.Fatalf("listing the node's table: %v", err)
	}
	present := map[netip.Addr]bool{}
	for _, tok := range strings.FieldsFunc(string(out), isElementSeparator) {
		if a, err := netip.ParseAddr(tok); err == nil && a.Is4() {
			present[a] = true
		}
	}
	vis := visibility{}
	for u := range scale.Updates(spec) {
		if e, ok := u.(model.EndpointSet); ok {
			k := shapeOf(e.Endpoint, spec.Node)
			vis[k] = vis[k] || present[e.Endpoint.Addrs[0]]
		}
	}
	return vis
}

// effect is the element change a pod change makes in the node's table, when known: "add" or
// "delete" of the pod's IPv4 address, or "" (none, or not known).
func (v visibility) effect(ch scale.PodChange, node string) string {
	known := func(e model.Endpoint) (in, ok bool) {
		in, ok = v[shapeOf(e, node)]
		return in, ok
	}
	in, ok := known(ch.Pod)
	if !ok {
		return ""
	}
	switch ch.Kind {
	case scale.PodCreated:
		if in {
			return "add"
		}
	case scale.PodDeleted:
		if in {
			return "delete"
		}
	case scale.PodRelabelled:
		was, ok := known(ch.Before)
		switch {
		case !ok || was == in:
		case in:
			return "add"
		default:
			return "delete"
		}
	}
	return ""
}

// churnWriter makes a churn's changes through the API server at churnRate, churnWriters at a
// time, with a client whose rate limit is far above it, and times each change with a known
// effect from its request to its element's line in the monitor.
type churnWriter struct {
	b      *testing.B
	client kubernetes.Interface
	mon    *monitor
	vis    visibility
	node   string

	done, failed atomic.Int64
	pending      sync.WaitGroup
	mu           sync.Mutex
	samples      []churnSample
	missed       int
}

// churnSampleTimeout is how long a change with a known effect waits for its line before it
// counts as missed.
const churnSampleTimeout = 10 * time.Second

type churnSample struct {
	kind scale.ChangeKind
	took time.Duration
}

func newChurnWriter(b *testing.B, srv *kube.Server, mon *monitor, vis visibility) *churnWriter {
	cfg := rest.CopyConfig(srv.Config)
	cfg.QPS, cfg.Burst = 20*churnRate, 20*churnRate // a create is two requests; never the limit
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return &churnWriter{b: b, client: client, mon: mon, vis: vis, node: coldSpec.Node}
}

// run makes first and the changes next yields at churnRate for d and returns when the last one
// made has its answer.
func (w *churnWriter) run(ctx context.Context, first scale.PodChange, next func() (scale.PodChange, bool), d time.Duration) {
	jobs := make(chan scale.PodChange, churnWriters)
	var wg sync.WaitGroup
	for range churnWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ch := range jobs {
				w.make(ctx, ch)
			}
		}()
	}
	start := time.Now()
	end := start.Add(d)
	for k, ch, ok := 0, first, true; ok; k++ {
		due := start.Add(time.Duration(k) * time.Second / churnRate)
		if !due.Before(end) {
			break
		}
		time.Sleep(time.Until(due))
		jobs <- ch
		ch, ok = next()
	}
	close(jobs)
	wg.Wait()
}

// achieved is the rate of changes made over d.
func (w *churnWriter) achieved(d time.Duration) float64 { return float64(w.done.Load()) / d.Seconds() }

// make makes one change and, when its effect is known, starts timing it.
func (w *churnWriter) make(ctx context.Context, ch scale.PodChange) {
	pods := w.client.CoreV1().Pods(ch.Pod.Key.Namespace)
	name := ch.Pod.Key.Name
	op := w.vis.effect(ch, w.node)
	addr := ch.Pod.Addrs[0]
	var err error
	send := func(req func() error) {
		var seen <-chan time.Time
		if op != "" {
			seen = w.mon.expect(op, addr)
		}
		sent := time.Now()
		if err = req(); err != nil {
			if op != "" {
				w.mon.forget(op, addr)
			}
			return
		}
		if op != "" {
			w.await(ch.Kind, sent, seen)
		}
	}
	switch ch.Kind {
	case scale.PodCreated:
		obj := podObject(ch.Pod, func(ns, name string, labels map[string]string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
		})
		status := obj.Status
		obj.Status = corev1.PodStatus{}
		if _, err = pods.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			break
		}
		// the API server takes no status on create: the kubelet's report is what gives the
		// pod its addresses, and what the agent acts on
		patch, _ := json.Marshal(map[string]any{"status": status})
		send(func() error {
			_, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			return err
		})
	case scale.PodDeleted:
		send(func() error {
			return pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
		})
	case scale.PodRelabelled:
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{"app": ch.Pod.Labels.Map()["app"]}}})
		send(func() error {
			_, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		})
	}
	if err != nil {
		if w.failed.Add(1) <= 3 {
			w.b.Logf("churn: %v %s/%s: %v", ch.Kind, ch.Pod.Key.Namespace, name, err)
		}
		return
	}
	w.done.Add(1)
}

// await records, in the background, when the change sent at sent shows in the monitor.
func (w *churnWriter) await(kind scale.ChangeKind, sent time.Time, seen <-chan time.Time) {
	w.pending.Add(1)
	go func() {
		defer w.pending.Done()
		t := time.NewTimer(churnSampleTimeout)
		defer t.Stop()
		select {
		case at := <-seen:
			w.mu.Lock()
			w.samples = append(w.samples, churnSample{kind, at.Sub(sent)})
			w.mu.Unlock()
		case <-t.C:
			w.mu.Lock()
			w.missed++
			w.mu.Unlock()
		}
	}()
}

// wait waits for the changes still awaiting their line (churnSampleTimeout at most) and returns
// the samples and how many changes never showed.
func (w *churnWriter) wait() ([]churnSample, int) {
	w.pending.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]churnSample(nil), w.samples...), w.missed
}

// podWatchers are plain watches of every pod, each on a connection of its own as another node's
// agent would hold, that read their streams and count the bytes: what each node's watch costs
// the API server per change (NFTP_BENCH_CHURN_WATCHERS).
type podWatchers struct {
	bytes atomic.Int64
	wg    sync.WaitGroup
	stop  context.CancelFunc
}

// startPodWatchers opens n watches of every pod in protobuf, from the current resource version.
func startPodWatchers(b *testing.B, srv *kube.Server, n int) *podWatchers {
	ctx, cancel := context.WithCancel(b.Context())
	w := &podWatchers{stop: cancel}
	list, err := srv.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	for range n {
		cfg := rest.CopyConfig(srv.Config)
		cfg.Timeout = 0
		cfg.Proxy = func(*http.Request) (*url.URL, error) { return nil, nil } // a transport (connection) of its own
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		body, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/pods").
			Param("watch", "true").Param("resourceVersion", list.ResourceVersion).Param("allowWatchBookmarks", "true").
			SetHeader("Accept", "application/vnd.kubernetes.protobuf;stream=watch").Stream(ctx)
		if err != nil {
			b.Fatalf("watching pods: %v", err)
		}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			defer body.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := body.Read(buf)
				w.bytes.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
	}
	return w
}

// close ends the watches and returns the bytes they read.
func (w *podWatchers) close() int64 {
	w.stop()
	w.wg.Wait()
	return w.bytes.Load()
}

// wholeWrites counts the agent's records of a write of the whole table in its log at path — a
// commit that fell back to one, an apply that failed (its retry is one), a repair of drift or
// of another process's change — and names their distinct reasons; relists counts its watches
// that could not resume and listed their resource again.
func wholeWrites(path string) (n int, reasons string, relists int) {
	text, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Sprintf(" (the log: %v)", err), 0
	}
	whys := map[string]int{}
	for _, line := range strings.Split(string(text), "\n") {
		var rec struct{ Msg, Why, Err string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch {
		case strings.Contains(rec.Msg, "relisted"):
			relists++
			continue
		case rec.Msg == "a commit wrote the table whole":
			whys[rec.Why]++
		case strings.Contains(rec.Msg, "apply failed"), strings.Contains(rec.Msg, "drifted"), strings.Contains(rec.Msg, "another process changed"):
			whys[rec.Msg+": "+rec.Err]++
		default:
			continue
		}
		n++
	}
	if n == 0 {
		return 0, "", relists
	}
	var parts []string
	for _, why := range slices.Sorted(maps.Keys(whys)) {
		parts = append(parts, fmt.Sprintf("%d× %s", whys[why], why))
	}
	return n, ": " + strings.Join(parts, "; "), relists
}
