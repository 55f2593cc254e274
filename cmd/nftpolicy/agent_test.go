package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

var srv *kube.Server

func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }

// The cluster of the agent tests: x/a and y/a on node a, x/b and y/b on node b, all serving TCP 80
// under the name serve-80-tcp.
var agentPods = []struct{ ns, name, node string }{{"x", "a", "a"}, {"x", "b", "b"}, {"y", "a", "a"}, {"y", "b", "b"}}

// truth is an expected truth table on TCP 80: allowed(from, to) with keys "ns/name".
type truth func(from, to string) bool

// The examples/ policies applied in order, and what each leaves allowed (self-probes ignored).
var exampleSteps = []struct {
	file    string
	allowed truth
}{
	{"01-default-deny-ingress-x.yaml", func(from, to string) bool { return !strings.HasPrefix(to, "x/") }},
	{"02-allow-y-to-x-a.yaml", func(from, to string) bool {
		return !strings.HasPrefix(to, "x/") || to == "x/a" && strings.HasPrefix(from, "y/")
	}},
	{"03-allow-within-x.yaml", func(from, to string) bool {
		return !strings.HasPrefix(to, "x/") || to == "x/a" && strings.HasPrefix(from, "y/") || strings.HasPrefix(from, "x/")
	}},
	{"04-deny-egress-y-b.yaml", func(from, to string) bool {
		if from == "y/b" {
			return strings.HasPrefix(to, "y/")
		}
		return !strings.HasPrefix(to, "x/") || to == "x/a" && strings.HasPrefix(from, "y/") || strings.HasPrefix(from, "x/")
	}},
}

type agentCluster struct {
	t      *testing.T
	s      *kube.Server
	c      *netns.Cluster
	pods   []*netns.Pod
	bin    string
	dir    string
	agents map[string]*agentproc.Process
}

func newAgentCluster(t *testing.T, s *kube.Server) *agentCluster {
	ctx := context.Background()
	bin, err := agentproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ac := &agentCluster{t: t, s: s, c: netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}}), bin: bin,
		dir: t.TempDir(), agents: map[string]*agentproc.Process{}}
	for _, ns := range []string{"x", "y"} {
		if err := s.CreateNamespace(ctx, ns, map[string]string{"ns": ns}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range agentPods {
		np, err := ac.c.AddPod(p.node, p.ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		if err := ac.c.Serve(np.NetNS, "TCP", 80); err != nil {
			t.Fatal(err)
		}
		ports := []corev1.ContainerPort{{Name: "serve-80-tcp", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		if _, err := s.CreatePod(ctx, p.ns, p.name, p.node, map[string]string{"pod": p.name}, ports, np.Addrs); err != nil {
			t.Fatal(err)
		}
		deletePodAtEnd(t, s, p.ns, p.name)
		ac.pods = append(ac.pods, np)
	}
	return ac
}

// startAgent runs `nftpolicy run` inside the node's namespace, with extra flags after the
// common ones; it reaches the cluster's API server at agentproc.APIAddr once forwarded.
func (ac *agentCluster) startAgent(node string, extra ...string) {
	t := ac.t
	p, err := agentproc.Start(agentproc.Config{Bin: ac.bin, Node: node, NetNS: ac.c.Node(node).NetNS, Server: ac.s, Dir: ac.dir,
		Args: append([]string{"--resync-interval", "2s", "--log-level", "debug",
			"--anti-spoofing", "--workload-iface-prefixes", "nftp"}, extra...)}) // the harness's node-side veths
	if err != nil {
		t.Fatal(err)
	}
	ac.agents[node] = p
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("agent %s log (tail):\n%s", node, p.Tail(4000))
		}
	})
}

// get fetches a URL of the node's agent (agentproc.ReadyURL, agentproc.MetricsURL).
func (ac *agentCluster) get(node, url string) (int, string) {
	code, body, err := ac.agents[node].Get(url)
	if err != nil {
		return code, err.Error()
	}
	return code, body
}

// expect polls the TCP 80 truth table (IPv4 and IPv6) until it equals want, as upstream retries
// probes, and fails with the expected/observed tables.
func (ac *agentCluster) expect(step string, want truth) {
	t := ac.t
	t.Helper()
	keys := make([]string, len(ac.pods))
	for i, p := range ac.pods {
		keys[i] = p.Namespace + "/" + p.Name
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var report []string
		for _, is6 := range []bool{false, true} {
			got, err := ac.c.ProbeMatrix(context.Background(), ac.pods, "TCP", 80, is6, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			r := netns.NewReachability(keys, true)
			for _, from := range keys {
				for _, to := range keys {
					if from == to {
						continue // self-probes are ignored, as upstream does
					}
					r.Expect(from, to, want(from, to))
					r.Observe(from, to, got[[2]string{from, to}])
				}
			}
			if wrong, table := r.Summary(); wrong > 0 {
				report = append(report, fmt.Sprintf("IPv6=%v: %d wrong\n%s", is6, wrong, table))
			}
		}
		if len(report) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: truth table wrong after 15 s:\n%s", step, strings.Join(report, "\n"))
		}
		time.Sleep(time.Second)
	}
}

func readExample(t *testing.T, file string) *networkingv1.NetworkPolicy {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := yaml.UnmarshalStrict(b, np); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return np
}

// TestAgentProcesses runs one agent process per node namespace against the real API server and
// checks the truth table after each policy change, relabel and delete; /readyz turns ready only
// once the agent can reach the API server and has applied; /metrics shows the figures. Then the
// same manifests rendered offline and loaded with `nft -f` enforce the same truth table.
func TestAgentProcesses(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft", "go")
	s := kube.Require(t, srv)
	ctx := context.Background()
	ac := newAgentCluster(t, s)
	// agents start before their API address is reachable: not ready
	for _, n := range []string{"a", "b"} {
		ac.startAgent(n)
	}
	time.Sleep(time.Second)
	for _, n := range []string{"a", "b"} {
		if code, body := ac.get(n, agentproc.ReadyURL); code != http.StatusServiceUnavailable {
			t.Fatalf("agent %s: /readyz = %d %q before it could reach the API server, want 503", n, code, body)
		}
		if err := agentproc.ForwardAPI(ac.c, ac.c.Node(n).NetNS, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b"} {
		if err := ac.agents[n].WaitReady(ctx, 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	ac.expect("no policy", func(string, string) bool { return true })
	// --anti-spoofing: each node lists its own pods' interface . address, and only those
	for _, p := range ac.pods {
		for _, n := range []string{"a", "b"} {
			out, err := netns.Exec(ctx, ac.c.Node(n).NetNS, "nft", "list", "set", "inet", "nftpolicy", "sources_v4")
			if err != nil {
				t.Fatalf("listing sources_v4 on %s: %v\n%s", n, err, out)
			}
			elem := fmt.Sprintf("%q . %s", p.HostIface, p.IP(false))
			if has := strings.Contains(string(out), elem); has != (p.Node == n) {
				t.Errorf("node %s: sources_v4 has %s = %v, want %v\n%s", n, elem, has, p.Node == n, out)
			}
		}
	}

	ac.checkAntiSpoofing(ctx, s)

	nps := s.Client.NetworkingV1()
	for _, st := range exampleSteps {
		np := readExample(t, st.file)
		if _, err := nps.NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		ac.expect("after "+st.file, st.allowed)
	}
	last := exampleSteps[len(exampleSteps)-1].allowed

	// change: 02 now names TCP 81, which nobody serves → y no longer reaches x/a on 80
	np02 := readExample(t, "02-allow-y-to-x-a.yaml")
	got, err := nps.NetworkPolicies("x").Get(ctx, np02.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Ingress[0].Ports[0].Port.Type, got.Spec.Ingress[0].Ports[0].Port.IntVal = 0, 81
	if _, err := nps.NetworkPolicies("x").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	afterChange := func(from, to string) bool {
		if to == "x/a" && strings.HasPrefix(from, "y/") {
			return false
		}
		return last(from, to)
	}
	ac.expect("after changing 02 to port 81", afterChange)

	// relabel y/a to pod=b: 04's egress restriction now covers it too
	patch := []byte(`{"metadata":{"labels":{"pod":"b"}}}`)
	if _, err := s.Client.CoreV1().Pods("y").Patch(ctx, "a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ac.expect("after relabelling y/a to pod=b", func(from, to string) bool {
		if from == "y/a" {
			return strings.HasPrefix(to, "y/")
		}
		return afterChange(from, to)
	})

	// metrics show the applies and in-sync
	for _, n := range []string{"a", "b"} {
		_, m := ac.get(n, agentproc.MetricsURL)
		for _, want := range []string{"nftpolicy_in_sync 1", "nftpolicy_apply_duration_seconds_count", "nftpolicy_transactions_total",
			"nftpolicy_denied_packets_total"} {
			if !strings.Contains(m, want) {
				t.Errorf("agent %s /metrics lacks %q", n, want)
			}
		}
	}

	// render: the same manifests, offline, loaded with nft -f, enforce the same truth table
	manifests := ac.dumpManifests(ctx, s)
	for _, n := range []string{"a", "b"} {
		_ = ac.agents[n].Stop()
	}
	for _, n := range []string{"a", "b"} {
		var out, errb strings.Builder
		if code := run(ctx, []string{"render", "-f", manifests, "--node", n}, os.Getenv, &out, &errb); code != 0 {
			t.Fatalf("render for node %s: exit %d: %s", n, code, errb.String())
		}
		file := filepath.Join(ac.dir, "render-"+n+".nft")
		if err := os.WriteFile(file, []byte("add table inet nftpolicy\ndelete table inet nftpolicy\n"+out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := netns.Exec(ctx, ac.c.Node(n).NetNS, "nft", "-f", file); err != nil {
			t.Fatalf("loading the rendered table into node %s: %v\n%s", n, err, b)
		}
	}
	ac.expect("rendered tables loaded with nft -f", func(from, to string) bool {
		if from == "y/a" {
			return strings.HasPrefix(to, "y/")
		}
		return afterChange(from, to)
	})

	// delete every policy: a fresh agent run converges to all allowed
	for _, n := range []string{"a", "b"} {
		ac.startAgent(n)
	}
	for _, ns := range []string{"x", "y"} {
		if err := nps.NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ac.expect("after deleting all policies", func(string, string) bool { return true })
}

// dumpManifests writes the cluster's namespaces, pods and policies as YAML for `nftpolicy render`.
func (ac *agentCluster) dumpManifests(ctx context.Context, s *kube.Server) string {
	t := ac.t
	dir := filepath.Join(ac.dir, "manifests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var docs []string
	add := func(apiVersion, kind string, obj any) {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, fmt.Sprintf("apiVersion: %s\nkind: %s\n%s", apiVersion, kind, b))
	}
	for _, ns := range []string{"x", "y"} {
		n, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		add("v1", "Namespace", struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}{n.ObjectMeta})
		pods, err := s.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			add("v1", "Pod", struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
				Spec     corev1.PodSpec    `json:"spec"`
				Status   corev1.PodStatus  `json:"status"`
			}{p.ObjectMeta, p.Spec, p.Status})
		}
		nps, err := s.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, np := range nps.Items {
			add("networking.k8s.io/v1", "NetworkPolicy", struct {
				Metadata metav1.ObjectMeta              `json:"metadata"`
				Spec     networkingv1.NetworkPolicySpec `json:"spec"`
			}{np.ObjectMeta, np.Spec})
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster.yaml"), []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkAntiSpoofing shows --anti-spoofing with real datagrams from node a to a pod on node b: a
// pod's own source passes, a spoofed one does not; a new pod whose interface exists but whose
// API object does not yet passes nothing, and passes once the agent has learnt it from the API.
func (ac *agentCluster) checkAntiSpoofing(ctx context.Context, s *kube.Server) {
	t := ac.t
	var src, dst *netns.Pod
	for _, p := range ac.pods {
		switch p.Key() {
		case "x/a":
			src = p
		case "y/b":
			dst = p
		}
	}
	spoofed := netip.MustParseAddr("10.244.0.99")
	if out, err := netns.Exec(ctx, src.NetNS, "ip", "addr", "add", spoofed.String()+"/32", "dev", "eth0"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sink, err := netns.ListenSink(dst.NetNS, dst.IP(false))
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	receives := func(from string, a netip.Addr) bool {
		ok, err := sink.Receives(from, a, dst.IP(false))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !receives(src.NetNS, src.IP(false)) {
		t.Errorf("anti-spoofing: x/a's datagram with its own source did not arrive")
	}
	if receives(src.NetNS, spoofed) {
		t.Errorf("anti-spoofing: x/a's datagram with the spoofed source %s arrived", spoofed)
	}

	late, err := ac.c.AddPod("a", "x", "late")
	if err != nil {
		t.Fatal(err)
	}
	if receives(late.NetNS, late.IP(false)) {
		t.Errorf("fail closed: a workload interface whose pod the API does not know yet passed traffic")
	}
	if _, err := s.CreatePod(ctx, "x", "late", "a", map[string]string{"pod": "late"}, nil, late.Addrs); err != nil {
		t.Fatal(err)
	}
	deletePodAtEnd(t, s, "x", "late")
	deadline := time.Now().Add(10 * time.Second)
	for !receives(late.NetNS, late.IP(false)) {
		if time.Now().After(deadline) {
			t.Fatalf("fail closed: x/late still passes nothing 10 s after its pod was created")
		}
	}
	if err := s.Client.CoreV1().Pods("x").Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
