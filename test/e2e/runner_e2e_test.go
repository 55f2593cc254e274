//go:build e2e

package e2e

// The runner: every case of cases() against a real cluster — a real etcd and kube-apiserver
// (internal/testenv/kube), nodes and pods as network namespaces (internal/testenv/netns), and one
// enforcer (the agent) per node namespace. Built only with the e2e tag until the agent is wired
// into newEnforcer; `go test -tags e2e ./test/e2e/` runs it.
//
// Fixtures are shared by the whole run (one API server per package via kube.SharedMain, one
// netns cluster of 2 nodes and the 9 model pods): each case starts by deleting every policy,
// restoring every namespace's and pod's labels, and waiting until everything reaches everything
// again. Pods alternate between the nodes (x/a on a, x/b on b, x/c on a, ...) so both same-node
// and cross-node paths occur in every table.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

const (
	// probeTimeout is one connect attempt, as upstream's agnhost connect --timeout=1s.
	probeTimeout = time.Second
	// convergeTimeout bounds how long a table may take to match, as upstream's 10 s of retries.
	convergeTimeout = 10 * time.Second
	// pollInterval separates two probe rounds of one validation.
	pollInterval = 200 * time.Millisecond
	// setupTimeout bounds building the fixture.
	setupTimeout = 2 * time.Minute
)

var srv *kube.Server

func TestMain(m *testing.M) { os.Exit(kube.SharedMain(m, &srv)) }

// Enforcer enforces policy on one node of the harness: the agent, run inside the test process
// and programming the node's network namespace. newEnforcer provides it.
type Enforcer interface {
	// Start runs enforcement for node, whose network namespace is open as netnsFD, until stop
	// is called (stop waits for it to end).
	Start(ctx context.Context, node string, netnsFD int) (stop func(), err error)
}

// nodeNames are the harness's nodes.
func nodeNames() []string { return []string{"a", "b"} }

// TestConformance runs every case on IPv4 and on IPv6.
func TestConformance(t *testing.T) {
	testenv.RequireRoot(t)
	s := kube.Require(t, srv)
	enf := newEnforcer(s)
	if enf == nil {
		t.Fatal("no Enforcer: newEnforcer (enforcer_e2e_test.go) must start the agent on a node namespace; " +
			"without one nothing enforces policy and every isolating case would fail")
	}
	h := newHarness(t, s, enf)
	for _, is6 := range []bool{false, true} {
		fam := "IPv4"
		if is6 {
			fam = "IPv6"
		}
		t.Run(fam, func(t *testing.T) {
			v := h.view(t, is6)
			start := time.Now()
			for _, c := range cases() {
				t.Run(caseName(c), func(t *testing.T) { h.run(t, c, v) })
			}
			t.Logf("%s: %d cases in %s", fam, len(cases()), time.Since(start).Round(time.Second))
		})
	}
}

type harness struct {
	srv  *kube.Server
	cl   *netns.Cluster
	pods map[string]*netns.Pod // by "ns/name"
	list []*netns.Pod          // modelPods() order
	nsFD map[string]int        // open handles of the pods' namespaces, for the SCTP prober
}

func newHarness(t *testing.T, s *kube.Server, enf Enforcer) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	h := &harness{srv: s, pods: map[string]*netns.Pod{}, nsFD: map[string]int{}}
	h.cl = netns.NewForTest(t, netns.Config{Nodes: nodeNames(), External: true})

	for _, ns := range modelNamespaces() {
		if err := s.CreateNamespace(ctx, ns, baseNamespaceLabels(ns)); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range modelPods() {
		ns, name := splitKey(key)
		node := nodeNames()[i%len(nodeNames())]
		p, err := h.cl.AddPod(node, ns, name)
		if err != nil {
			t.Fatalf("pod %s on node %s: %v", key, node, err)
		}
		for _, port := range modelPorts() {
			for _, proto := range []corev1.Protocol{protocolTCP, protocolUDP} {
				if err := h.cl.Serve(p.NetNS, netns.Protocol(proto), int(port)); err != nil {
					t.Fatalf("serving %s/%d in %s: %v", proto, port, key, err)
				}
			}
		}
		if _, err := s.CreatePod(ctx, ns, name, node, basePodLabels(name), containerPorts(), p.Addrs); err != nil {
			t.Fatal(err)
		}
		h.pods[key] = p
		h.list = append(h.list, p)
		fd, err := unix.Open(netnsPath(p), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("opening the namespace of pod %s: %v", key, err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		h.nsFD[key] = fd
	}

	agentCtx, stopAll := context.WithCancel(context.Background())
	t.Cleanup(stopAll)
	for _, node := range nodeNames() {
		stop, err := enf.Start(agentCtx, node, h.cl.Node(node).FD())
		if err != nil {
			t.Fatalf("starting the enforcer on node %s: %v", node, err)
		}
		t.Cleanup(stop)
	}
	return h
}

// familyView is the View of one address family.
type familyView struct {
	is6 bool
	ips map[string]netip.Addr
}

func (v familyView) IP(pod string) netip.Addr {
	ip, ok := v.ips[pod]
	if !ok {
		panic("no address for pod " + pod)
	}
	return ip
}

// view returns the pods' addresses of one family; every pod must have one.
func (h *harness) view(t *testing.T, is6 bool) familyView {
	t.Helper()
	v := familyView{is6: is6, ips: map[string]netip.Addr{}}
	for key, p := range h.pods {
		for _, a := range p.Addrs {
			if a.Is6() && !a.Is4In6() == is6 {
				v.ips[key] = a
				break
			}
		}
		if _, ok := v.ips[key]; !ok {
			t.Fatalf("pod %s has no address of this family (IPv6=%v) among %v", key, is6, p.Addrs)
		}
	}
	return v
}

// run executes one case: reset, then each step's mutations and validations.
func (h *harness) run(t *testing.T, c Case, v familyView) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h.reset(t, ctx, v)
	for i, s := range c.Steps {
		if err := h.apply(ctx, s, v); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, s.By, err)
		}
		for _, p := range s.Probes {
			h.validate(t, ctx, fmt.Sprintf("step %d (%s)", i+1, s.By), v, p.Protocol, p.Port, expected(p, modelPods(), true))
		}
	}
}

// probe returns one observed matrix: TCP and UDP through the harness's prober, SCTP through
// the raw-socket prober (sctp_test.go; the kernel has no SCTP sockets).
func (h *harness) probe(ctx context.Context, v familyView, proto corev1.Protocol, port int32) (map[[2]string]bool, error) {
	if proto != protocolSCTP {
		return h.cl.ProbeMatrix(ctx, h.list, netns.Protocol(proto), int(port), v.is6, probeTimeout)
	}
	var ends []sctpEnd
	for _, key := range modelPods() {
		ends = append(ends, sctpEnd{Key: key, NetNS: h.nsFD[key], IP: v.IP(key)})
	}
	return probeSCTPMatrix(ctx, ends, uint16(port), probeTimeout)
}

// netnsPath is where the harness's pod namespace is mounted.
func netnsPath(p *netns.Pod) string { return "/run/netns/" + p.NetNS }

// validate probes the 9×9 matrix until it matches exp (loopback ignored) or convergeTimeout
// passes, then fails with upstream's expected/observed/comparison tables.
func (h *harness) validate(t *testing.T, ctx context.Context, what string, v familyView,
	proto corev1.Protocol, port int32, exp *Reachability) {
	t.Helper()
	deadline := time.Now().Add(convergeTimeout)
	for attempt := 1; ; attempt++ {
		obs, err := h.probe(ctx, v, proto, port)
		if err != nil {
			t.Fatalf("%s: probing %s/%d: %v", what, proto, port, err)
		}
		wrong, report := compare(exp, func(from, to string) bool { return obs[[2]string{from, to}] })
		if wrong == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s/%d still wrong after %d probe rounds over %s:\n%s", what, proto, port, attempt, convergeTimeout, report)
		}
		time.Sleep(pollInterval)
	}
}

// reset deletes every policy, restores the base labels and waits until every pod reaches every
// other on TCP/80 again.
func (h *harness) reset(t *testing.T, ctx context.Context, v familyView) {
	t.Helper()
	c := h.srv.Client
	for _, ns := range modelNamespaces() {
		if err := c.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatalf("deleting the policies of %s: %v", ns, err)
		}
		n, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := baseNamespaceLabels(ns)
		want[namespaceLabelKey] = ns
		if !maps.Equal(n.Labels, want) {
			n.Labels = want
			if _, err := c.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restoring the labels of namespace %s: %v", ns, err)
			}
		}
	}
	for _, key := range modelPods() {
		ns, name := splitKey(key)
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := basePodLabels(name); !maps.Equal(p.Labels, want) {
			p.Labels = want
			if _, err := c.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restoring the labels of pod %s: %v", key, err)
			}
		}
	}
	h.validate(t, ctx, "reset (no policy)", v, protocolTCP, 80, NewReachability(modelPods(), true))
}

// apply performs a step's mutations through the API server, in Step's documented order.
func (h *harness) apply(ctx context.Context, s Step, v View) error {
	c := h.srv.Client
	if s.Create != nil {
		for _, p := range s.Create(v) {
			if _, err := c.NetworkingV1().NetworkPolicies(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("create policy %s/%s: %w", p.Namespace, p.Name, err)
			}
		}
	}
	if s.Update != nil {
		for _, p := range s.Update(v) {
			if err := updatePolicy(ctx, h.srv, p); err != nil {
				return err
			}
		}
	}
	if s.DeleteAllPolicies {
		for _, ns := range modelNamespaces() {
			if err := c.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				return fmt.Errorf("delete the policies of %s: %w", ns, err)
			}
		}
	}
	for ns, l := range s.NamespaceLabels {
		patch, err := labelPatch(l)
		if err != nil {
			return err
		}
		if _, err := c.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label namespace %s: %w", ns, err)
		}
	}
	for key, l := range s.PodLabels {
		ns, name := splitKey(key)
		patch, err := labelPatch(l)
		if err != nil {
			return err
		}
		if _, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label pod %s: %w", key, err)
		}
	}
	return nil
}

// updatePolicy replaces the spec of the stored policy of the same name (upstream UpdatePolicy).
func updatePolicy(ctx context.Context, s *kube.Server, p *networkingv1.NetworkPolicy) error {
	api := s.Client.NetworkingV1().NetworkPolicies(p.Namespace)
	cur, err := api.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("update policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	cur.Spec = p.Spec
	if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update policy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func labelPatch(l map[string]string) ([]byte, error) {
	b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": l}})
	if err != nil {
		return nil, fmt.Errorf("label patch: %w", err)
	}
	return b, nil
}
