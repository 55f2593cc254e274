package chaos

// The fixture: two nodes (a, b) of the netns cluster with the agent binary on each, six probed
// pods, three policies, and the expected truth tables of every stage of the suite.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// agentArgs are the flags of every agent after agentproc's common ones: anti-spoofing on, over
// the harness's veths (nftp<n>); a compile budget that the burst's policy of 10,000 rules
// (big/large) exceeds and every other policy of the suite fits in many times over, so that the
// dataplane's rejection of a policy is part of the burst; everything else, the resync interval
// included, as shipped.
var agentArgs = []string{"--anti-spoofing", "--workload-iface-prefixes", "nftp", "--compile-budget", "5000"}

// The probed pods, all serving TCP 80 (container port "http"). Namespace x is labelled ns=x,
// y ns=y.
var probedPods = []struct{ ns, name, node, app string }{
	{"x", "web-a", "a", "web"},
	{"x", "cli-a", "a", "client"},
	{"y", "cli-a", "a", "client"},
	{"x", "web-b", "b", "web"},
	{"x", "cli-b", "b", "client"},
	{"y", "other-b", "b", "other"},
}

// suiteNamespaces are every namespace the suite writes into, with their base labels.
var suiteNamespaces = map[string]map[string]string{"x": {"ns": "x"}, "y": {"ns": "y"}, "big": {"ns": "big"}}

// The policies in force from the start.
func basePolicies() []*networkingv1.NetworkPolicy {
	tcp80 := []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(probePort))}}
	app := func(v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": v}}
	}
	return []*networkingv1.NetworkPolicy{
		{ // web pods accept clients of x and of y on TCP 80
			ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "web-ingress"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *app("web"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: app("client")},
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}, PodSelector: app("client")}},
				Ports: tcp80}}},
		},
		{ // y/other-b accepts nothing
			ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "isolate-other"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *app("other"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
		},
		{ // clients of y send to web pods of x only
			ObjectMeta: metav1.ObjectMeta{Namespace: "y", Name: "client-egress"},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *app("client"),
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{{
					To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "x"}}, PodSelector: app("web")}},
					Ports: tcp80}}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func isWeb(key string) bool { return key == "x/web-a" || key == "x/web-b" }

// The expected truth tables (allowed(from, to), keys "ns/name"), written from the policies by
// hand. baseAllowed: the base policies. Every other stage changes it as its step says.
func baseAllowed(from, to string) bool {
	switch {
	case from == "y/cli-a": // y/client-egress
		return isWeb(to)
	case isWeb(to): // x/web-ingress
		return from == "x/cli-a" || from == "x/cli-b"
	case to == "y/other-b": // y/isolate-other
		return false
	}
	return true
}

// suite is the running fixture: the cluster, the agents, the prober and the expectation over
// time, with each step's figures.
type suite struct {
	s      *kube.Server
	cl     *netns.Cluster
	bin    string
	dir    string
	agents map[string]*agentproc.Process // by node: the running one
	procs  []*agentproc.Process          // every agent started, in order
	pods   []*netns.Pod
	byKey  map[string]*netns.Pod
	pr     *prober
	tl     timeline
	// allowed is the expectation in force (the last phase's).
	allowed func(from, to string) bool
	figures []string
}

// newSuite builds the fixture and returns once every cell has been probed as baseAllowed says.
func newSuite(t *testing.T) *suite {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft", "go")
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	su := &suite{s: s, cl: netns.NewForTest(t, netns.Config{Nodes: []string{"a", "b"}}), dir: t.TempDir(),
		agents: map[string]*agentproc.Process{}, byKey: map[string]*netns.Pod{}}
	var err error
	if su.bin, err = agentproc.Build(su.dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { su.deleteObjects(t) })
	for name, labels := range suiteNamespaces {
		if err := su.ensureNamespace(ctx, name, labels); err != nil {
			t.Fatal(err)
		}
	}
	for _, pp := range probedPods {
		p, err := su.addPod(ctx, pp.node, pp.ns, pp.name, map[string]string{"app": pp.app},
			[]corev1.ContainerPort{{Name: "http", ContainerPort: probePort}})
		if err != nil {
			t.Fatal(err)
		}
		if err := su.cl.Serve(p.NetNS, netns.TCP, probePort); err != nil {
			t.Fatal(err)
		}
		su.pods = append(su.pods, p)
		su.byKey[p.Key()] = p
	}
	for _, np := range basePolicies() {
		if _, err := s.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for node, p := range su.agents {
			if err := p.Stop(); err != nil {
				t.Errorf("stopping the agent of node %s: %v", node, err)
			}
		}
		if t.Failed() {
			for i, p := range su.procs {
				t.Logf("agent %d, of node %s, logged (tail):\n%s", i+1, p.Node, p.Tail(3000))
			}
		}
	})
	for _, n := range su.cl.Nodes() {
		if err := agentproc.ForwardAPI(su.cl, n.NetNS, s); err != nil {
			t.Fatal(err)
		}
		if _, err := su.startAgent(ctx, n.Name); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	su.pr = startProber(t, su.pods)
	// until every cell has been seen right once, nothing is judged
	su.allowed = baseAllowed
	su.tl = timeline{{at: start, settled: time.Now().Add(time.Hour), want: su.table(baseAllowed), settling: func(cell) bool { return true }}}
	right := func(p probe) bool { return p.ok == baseAllowed(p.from, p.to) }
	settled, err := su.pr.waitEach(ctx, start, time.Minute, right)
	if err != nil {
		t.Fatalf("the base policies are not enforced: %v\nexpected:\n%s", err, su.table(baseAllowed))
	}
	su.tl[0].settled = settled
	t.Logf("fixture: %d pods probed, %d cells (pairs x families), base table right %v after the agents were ready",
		len(su.pods), len(su.pr.cells), settled.Sub(start).Round(10*time.Millisecond))
	return su
}

// table is allowed as a truth table over the probed pods.
func (su *suite) table(allowed func(from, to string) bool) *netns.TruthTable {
	var keys []string
	for _, p := range su.pods {
		keys = append(keys, p.Key())
	}
	t := netns.NewTruthTable(keys, nil)
	for _, from := range keys {
		for _, to := range keys {
			t.Set(from, to, allowed(from, to))
		}
	}
	return t
}

// addPod makes a pod of the netns cluster and its pod object, Running with the pod's addresses.
func (su *suite) addPod(ctx context.Context, node, ns, name string, labels map[string]string, ports []corev1.ContainerPort) (*netns.Pod, error) {
	p, err := su.cl.AddPod(node, ns, name)
	if err != nil {
		return nil, err
	}
	_, err = su.s.CreatePod(ctx, ns, name, node, labels, ports, p.Addrs)
	return p, err
}

// ensureNamespace creates the namespace, or gives an existing one (of an earlier run on this API
// server: nothing deletes namespaces here) exactly these labels.
func (su *suite) ensureNamespace(ctx context.Context, name string, labels map[string]string) error {
	err := su.s.CreateNamespace(ctx, name, labels)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	ns, err := su.s.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ns.Labels = labels
	_, err = su.s.Client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	return err
}

// deleteObjects deletes the suite's pods and policies, so that a later run on the same API
// server starts from none (the netns cluster hands out the same addresses again).
func (su *suite) deleteObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero := int64(0)
	for ns := range suiteNamespaces {
		c := su.s.Client
		if err := c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the pods of %s: %v", ns, err)
		}
		if err := c.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Errorf("deleting the policies of %s: %v", ns, err)
		}
	}
}

// startAgent starts the agent of a node (launch) and returns how long it took to be ready.
func (su *suite) startAgent(ctx context.Context, node string) (time.Duration, error) {
	p, err := su.launch(node, false)
	if err != nil {
		return 0, err
	}
	su.agents[node] = p
	start := time.Now()
	err = p.WaitReady(ctx, time.Minute)
	return time.Since(start), err
}

// launch starts an agent on a node, its log in a directory of its own (so that a restart keeps
// the log of the process before); the agents of a node share one lock file, as the pods of a
// DaemonSet share the node's /run/nftpolicy. beside: another agent of the node runs, and this
// one serves on other ports of the namespace's loopback, so that the test asks each.
func (su *suite) launch(node string, beside bool) (*agentproc.Process, error) {
	dir := filepath.Join(su.dir, fmt.Sprintf("agent-%d", len(su.procs)+1))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := agentproc.Config{Bin: su.bin, Node: node, NetNS: su.cl.Node(node).NetNS, Server: su.s,
		Dir: dir, Args: agentArgs, LockFile: filepath.Join(su.dir, "lock-"+node, "agent.lock")}
	if beside {
		cfg.MetricsAddr, cfg.HealthAddr = "127.0.0.1:19464", "127.0.0.1:19465"
	}
	p, err := agentproc.Start(cfg)
	if err != nil {
		return nil, err
	}
	su.procs = append(su.procs, p)
	return p, nil
}

// restartAgent kills the agent of a node and starts it again: how a step that left a node's
// table wrong brings the fixture back for the steps after it.
func (su *suite) restartAgent(t *testing.T, node string) {
	t.Helper()
	_ = su.agents[node].Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := su.startAgent(ctx, node); err != nil {
		t.Fatalf("restarting the agent of node %s: %v", node, err)
	}
}

// waitCommitted waits until every agent's table reflects every write made so far
// (kube.Server.Barrier) and returns when that was; the error says each agent that has not.
func (su *suite) waitCommitted(ctx context.Context, timeout time.Duration) (time.Time, error) {
	versions, err := su.s.Barrier(ctx)
	if err != nil {
		return time.Time{}, err
	}
	errs := make(chan error, len(su.agents))
	for _, p := range su.agents {
		go func() { errs <- p.WaitCaughtUp(ctx, versions, timeout) }()
	}
	var all []error
	for range su.agents {
		all = append(all, <-errs)
	}
	return time.Now(), errors.Join(all...)
}

// tableState is the node's table as `nft list table` prints it, normalized
// (testenv.NormalizeListing). It fails when there is no table.
func (su *suite) tableState(ctx context.Context, node string) (string, error) {
	out, err := netns.Exec(ctx, su.cl.Node(node).NetNS, "nft", "list", "table", "inet", "nftpolicy")
	if err != nil {
		return "", err
	}
	return testenv.NormalizeListing(string(out)), nil
}
