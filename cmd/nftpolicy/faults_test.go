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

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// faultNode is one node running the agent binary, as the DaemonSet runs it: with the
// capabilities deploy/daemonset.yaml grants and nothing else. Its pods: "server" (TCP 80),
// which a policy opens to pods labelled friend=yes only, "client" (friend=no) and "stranger";
// so both are refused at first.
type faultNode struct {
	t                        *testing.T
	s                        *kube.Server
	c                        *netns.Cluster
	node                     *netns.Node
	name                     string // the node's name in the API (unique, so no other test's pods are local)
	ns                       string
	server, client, stranger *netns.Pod
	bin, dir                 string
}

func newFaultNode(t *testing.T, s *kube.Server) *faultNode {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft", "go", "setpriv")
	ctx := context.Background()
	bin, err := agentproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &faultNode{t: t, s: s, c: netns.NewForTest(t, netns.Config{Nodes: []string{"a"}}), name: testenv.UniqueName("node"),
		ns: testenv.UniqueName("faults"), bin: bin, dir: t.TempDir()}
	f.node = f.c.Node("a")
	if err := s.CreateNamespace(ctx, f.ns, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the API server is shared by the package's tests, and has no namespace controller
		ctx := context.Background()
		_ = s.Client.NetworkingV1().NetworkPolicies(f.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		_ = s.Client.CoreV1().Pods(f.ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	})
	for _, p := range []struct {
		name   string
		labels map[string]string
		to     **netns.Pod
	}{
		{"server", map[string]string{"app": "server"}, &f.server},
		{"client", map[string]string{"friend": "no"}, &f.client},
		{"stranger", nil, &f.stranger},
	} {
		np, err := f.c.AddPod("a", f.ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreatePod(ctx, f.ns, p.name, f.name, p.labels, nil, np.Addrs); err != nil {
			t.Fatal(err)
		}
		*p.to = np
	}
	if err := f.c.Serve(f.server.NetNS, netns.TCP, 80); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "friends-only"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"friend": "yes"}}}}}},
		}}
	if _, err := s.Client.NetworkingV1().NetworkPolicies(f.ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// daemonSetCapabilities returns setpriv's arguments that leave a process only the capabilities
// deploy/daemonset.yaml adds for the agent's container (it drops ALL), without privilege
// escalation, as the container runs.
func daemonSetCapabilities(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.Unmarshal(b, &ds); err != nil {
		t.Fatal(err)
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "nftpolicy" {
			continue
		}
		sc := c.SecurityContext
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Fatalf("deploy/daemonset.yaml: the agent's container does not drop ALL capabilities: %+v", sc)
		}
		caps := "-all"
		for _, c := range sc.Capabilities.Add {
			caps += ",+" + strings.ToLower(string(c))
		}
		return []string{"setpriv", "--bounding-set=" + caps, "--inh-caps=-all", "--no-new-privs", "--"}
	}
	t.Fatal("deploy/daemonset.yaml has no container named nftpolicy")
	return nil
}

// start runs the agent with caps (setpriv's arguments) and extra flags, reaching the API server
// through a forwarder of its own, and waits until it is ready.
func (f *faultNode) start(caps []string, args ...string) (*agentproc.Process, *netns.Forwarder) {
	t := f.t
	fwd, err := netns.Forward(f.node.NetNS, netip.MustParseAddrPort(agentproc.APIAddr), strings.TrimPrefix(f.s.URL, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Close() })
	p, err := agentproc.Start(agentproc.Config{Bin: f.bin, Node: f.name, NetNS: f.node.NetNS, Server: f.s, Dir: f.dir,
		Wrap: caps, Args: append([]string{"--workload-iface-prefixes", "nftp"}, args...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Stop()
		if t.Failed() {
			t.Logf("agent log (tail):\n%s", p.Tail(8000))
		}
	})
	if err := p.WaitReady(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return p, fwd
}

// reaches probes TCP 80 of the server from a pod once.
func (f *faultNode) reaches(from *netns.Pod, timeout time.Duration) bool {
	ok, err := netns.Probe(context.Background(), from.NetNS, f.server.IP(false), netns.TCP, 80, timeout)
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

// waitReach polls until from reaches the server as want says; it fails the test after limit.
func (f *faultNode) waitReach(from *netns.Pod, want bool, limit time.Duration) {
	f.t.Helper()
	start := time.Now()
	for f.reaches(from, 300*time.Millisecond) != want {
		if time.Since(start) > limit {
			f.t.Fatalf("%s → server: reachable = %v after %v, want %v", from.Key(), !want, limit, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// status fetches a URL of the agent and returns its status code and body.
func status(t *testing.T, p *agentproc.Process, url string) (int, string) {
	t.Helper()
	code, body, err := p.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return code, strings.TrimSpace(body)
}

// TestAgentAPIServerOutage runs the agent binary through two 20 s outages of the API server:
// meanwhile the table stays in force (the refused client stays refused), /healthz stays ok and
// /readyz fails once the watches have been closed longer than --watch-stale-after; when the API
// server is back, a change is enforced within 5 s (a generous bound on a figure the test logs)
// and /readyz is ok again.
func TestAgentAPIServerOutage(t *testing.T) {
	s := kube.Require(t, srv)
	ctx := context.Background()
	f := newFaultNode(t, s)
	const staleAfter = 5 * time.Second
	p, _ := f.start(daemonSetCapabilities(t), "--watch-stale-after", staleAfter.String())
	f.waitReach(f.client, false, 10*time.Second)
	f.waitReach(f.stranger, false, 10*time.Second)

	steps := []struct {
		name   string
		change func() error
		from   *netns.Pod // reaches the server once the change is enforced
	}{
		{"a pod relabelled", func() error {
			_, err := s.Client.CoreV1().Pods(f.ns).Patch(ctx, "client", types.MergePatchType,
				[]byte(`{"metadata":{"labels":{"friend":"yes"}}}`), metav1.PatchOptions{})
			return err
		}, f.client},
		{"a policy deleted", func() error {
			return s.Client.NetworkingV1().NetworkPolicies(f.ns).Delete(ctx, "friends-only", metav1.DeleteOptions{})
		}, f.stranger},
	}
	for _, st := range steps {
		back := s.BeginOutage(ctx, outage)
		time.Sleep(outage / 2)
		if code, body := status(t, p, agentproc.ReadyURL); code != http.StatusServiceUnavailable || !strings.Contains(body, "no watch of") {
			t.Errorf("%s: /readyz %v into the outage = %d %q, want 503 naming a closed watch", st.name, outage/2, code, body)
		}
		if code, body := status(t, p, "http://127.0.0.1:9465/healthz"); code != http.StatusOK {
			t.Errorf("%s: /healthz during the outage = %d %q, want 200 (an API outage is no reason to restart the agent)", st.name, code, body)
		}
		if f.reaches(st.from, time.Second) {
			t.Errorf("%s: %s reaches the server during the outage: the table did not stay in force", st.name, st.from.Key())
		}
		if err := <-back; err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		if err := st.change(); err != nil {
			t.Fatal(err)
		}
		f.waitReach(st.from, true, 60*time.Second)
		took := time.Since(returned)
		t.Logf("%s: enforced %.2f s after the API server's return (outage %v)", st.name, took.Seconds(), outage)
		if took > 5*time.Second {
			t.Errorf("%s: enforced %.2f s after the API server's return, want ≤ 5 s", st.name, took.Seconds())
		}
		deadline := time.Now().Add(10 * time.Second)
		for code, body := status(t, p, agentproc.ReadyURL); code != http.StatusOK; code, body = status(t, p, agentproc.ReadyURL) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz = %d %q 10 s after the change was enforced, want 200", st.name, code, body)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// outage is how long the API server stays away in TestAgentAPIServerOutage.
const outage = 20 * time.Second

// TestAgentStopsOnSIGTERM sends SIGTERM to the agent binary and checks that it exits with status 0
// within 1 s (a generous bound on a figure the test logs: a DaemonSet rollout waits for it on every
// node) and leaves its table in force: the refused client is still refused after the exit. Cases:
// an agent in sync; one whose API server is unreachable (its watches retrying); one working on a
// policy of 200 rules of 50 peers, which may take the compiler long — the last case, as every later
// start would compile it too.
func TestAgentStopsOnSIGTERM(t *testing.T) {
	s := kube.Require(t, srv)
	f := newFaultNode(t, s)
	caps := daemonSetCapabilities(t)
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, p *agentproc.Process, fwd *netns.Forwarder)
	}{
		{"in sync", func(*testing.T, *agentproc.Process, *netns.Forwarder) {}},
		{"API server unreachable", func(_ *testing.T, _ *agentproc.Process, fwd *netns.Forwarder) {
			_ = fwd.Close()
			time.Sleep(3 * time.Second) // a few failed attempts
		}},
		{"while an apply runs", func(t *testing.T, p *agentproc.Process, _ *netns.Forwarder) {
			if _, err := s.Client.NetworkingV1().NetworkPolicies(f.ns).Create(context.Background(), hugePolicy(f.ns),
				metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			// until /readyz says the loop has worked on it for a second (--watch-stale-after 1s),
			// or 5 s: a compiler that takes less leaves nothing to wait for
			var body string
			for deadline := time.Now().Add(5 * time.Second); !strings.Contains(body, "running") && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
				_, body = status(t, p, agentproc.ReadyURL)
			}
			t.Logf("/readyz before SIGTERM: %s", body)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			p, fwd := f.start(caps, "--watch-stale-after", "1s")
			f.waitReach(f.client, false, 10*time.Second)
			tc.before(t, p, fwd)
			start := time.Now()
			err := p.Stop()
			took := time.Since(start)
			t.Logf("exited %.3f s after SIGTERM (%v)", took.Seconds(), err)
			if err != nil {
				t.Errorf("exit after SIGTERM: %v, want status 0", err)
			}
			if took > time.Second {
				t.Errorf("exited %.3f s after SIGTERM, want < 1 s", took.Seconds())
			}
			out, err := netns.Exec(context.Background(), f.node.NetNS, "nft", "list", "table", "inet", "nftpolicy")
			if err != nil || !strings.Contains(string(out), "friends-only") {
				t.Errorf("after the exit the node has no table naming the policy: %v\n%s", err, out)
			}
			if f.reaches(f.client, time.Second) {
				t.Errorf("after the exit the refused client reaches the server: the table is not in force")
			}
		})
	}
}

// hugePolicy selects the server and allows, on one port per rule, 200 rules of 50 peers each
// (pod selectors, namespace selectors and ipBlocks with an except) that are none of the test's
// pods: the client stays refused whether it is in force or not.
func hugePolicy(ns string) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}
	for r := range 200 {
		rule := networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt(1000 + r))}}}
		for p := range 50 {
			var peer networkingv1.NetworkPolicyPeer
			switch p % 3 {
			case 0:
				peer.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{fmt.Sprintf("k%d", p): fmt.Sprintf("v%d", r)}}
			case 1:
				peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d-%d", r, p)}}
			case 2:
				peer.IPBlock = &networkingv1.IPBlock{CIDR: fmt.Sprintf("10.%d.%d.0/24", r, p), Except: []string{fmt.Sprintf("10.%d.%d.128/25", r, p)}}
			}
			rule.From = append(rule.From, peer)
		}
		np.Spec.Ingress = append(np.Spec.Ingress, rule)
	}
	return np
}

func ptr[T any](v T) *T { return &v }

// TestAgentNeedsOnlyNetAdmin runs the agent with the DaemonSet's capabilities, which enforce the
// policy (above), and with none at all, which must not: so the capabilities the tests run with
// are what limits the agent, and NET_ADMIN is all it needs.
func TestAgentNeedsOnlyNetAdmin(t *testing.T) {
	s := kube.Require(t, srv)
	f := newFaultNode(t, s)
	caps := daemonSetCapabilities(t)
	if got := strings.Join(caps, " "); !strings.Contains(got, "--bounding-set=-all,+net_admin ") {
		t.Errorf("deploy/daemonset.yaml grants %q, want NET_ADMIN only", got)
	}
	p, _ := f.start(caps)
	f.waitReach(f.client, false, 10*time.Second)
	_ = p.Stop()

	// without NET_ADMIN, nothing is committed and the agent never turns ready (the first agent's
	// forwarder still serves the API server)
	none, err := agentproc.Start(agentproc.Config{Bin: f.bin, Node: f.name, NetNS: f.node.NetNS, Server: s, Dir: f.dir,
		Wrap: []string{"setpriv", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"}})
	if err != nil {
		t.Fatal(err)
	}
	defer none.Stop()
	if err := none.WaitReady(context.Background(), 5*time.Second); err == nil {
		t.Errorf("the agent without capabilities turned ready: the capability restriction has no effect")
	}
	if log := none.Tail(4000); !strings.Contains(log, "operation not permitted") {
		t.Errorf("the agent without capabilities did not log a permission error:\n%s", log)
	}
}
