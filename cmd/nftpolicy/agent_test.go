package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	t       *testing.T
	c       *netns.Cluster
	pods    []*netns.Pod
	bin     string
	dir     string
	procs   map[string]*exec.Cmd
	logs    map[string]string
	clients map[string]*http.Client
}

func buildAgent(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nftpolicy")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	return bin
}

func newAgentCluster(t *testing.T, s *kube.Server) *agentCluster {
	ctx := context.Background()
	ac := &agentCluster{t: t, c: netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}}), bin: buildAgent(t),
		dir: t.TempDir(), procs: map[string]*exec.Cmd{}, logs: map[string]string{}, clients: map[string]*http.Client{}}
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
		ac.pods = append(ac.pods, np)
	}
	return ac
}

// startAgent runs `nftpolicy run` inside the node's namespace against kubeconfig's API address.
func (ac *agentCluster) startAgent(node, apiAddr string) {
	t := ac.t
	n := ac.c.Node(node)
	kubeconfig := filepath.Join(ac.dir, "kubeconfig-"+node)
	if err := srv.Kubeconfig(kubeconfig, "https://"+apiAddr); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(ac.dir, "agent-"+node+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", n.NetNS, ac.bin, "run", "--node-name", node, "--kubeconfig", kubeconfig,
		"--metrics-addr", "127.0.0.1:9464", "--health-addr", "127.0.0.1:9465", "--resync-interval", "2s",
		"--log-format", "json", "--log-level", "debug",
		"--anti-spoofing", "--workload-iface-prefixes", "nftp") // the harness's node-side veths
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ac.procs[node], ac.logs[node] = cmd, logPath
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("agent %s log (tail):\n%s", node, tail(string(b), 4000))
		}
	})
	ns := n.NetNS
	ac.clients[node] = netns.HTTPClient(ns, 2*time.Second)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// get fetches a path of the agent's health (9465) or metrics (9464) server in its namespace.
func (ac *agentCluster) get(node, url string) (int, string) {
	resp, err := ac.clients[node].Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (ac *agentCluster) waitReady(node string) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := ac.get(node, "http://127.0.0.1:9465/readyz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			ac.t.Fatalf("agent %s not ready: %d %s", node, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
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
	api := netip.MustParseAddrPort("127.0.0.1:6443")

	// agents start before their API address is reachable: not ready
	for _, n := range []string{"a", "b"} {
		ac.startAgent(n, api.String())
	}
	time.Sleep(time.Second)
	for _, n := range []string{"a", "b"} {
		if code, body := ac.get(n, "http://127.0.0.1:9465/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("agent %s: /readyz = %d %q before it could reach the API server, want 503", n, code, body)
		}
		if err := ac.c.Forward(ac.c.Node(n).NetNS, api, strings.TrimPrefix(s.URL, "https://")); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b"} {
		ac.waitReady(n)
	}
	ac.expect("no policy", func(string, string) bool { return true })
	// --anti-spoofing: each node lists its own pods' interface . address, and only those
	for _, p := range ac.pods {
		for _, n := range []string{"a", "b"} {
			out, err := exec.Command("ip", "netns", "exec", ac.c.Node(n).NetNS, "nft", "list", "set", "inet", "nftpolicy", "sources_v4").CombinedOutput()
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
		_, m := ac.get(n, "http://127.0.0.1:9464/metrics")
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
		cmd := ac.procs[n]
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
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
		ac.startAgent(n, api.String())
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
