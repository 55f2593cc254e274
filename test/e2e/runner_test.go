package e2e

// The runner: every case of cases() through a real kube-apiserver (internal/testenv/kube) onto
// a fabric, the network under test. Two fabrics exist: the netns cluster with the agent on
// every node (runner_e2e_test.go, TestConformance) and the reference evaluator reading the API
// server's state (runner_oracle_test.go, TestRunnerOnOracle), which proves the runner and the
// policies' validity without root or agent.
//
// Fixtures are shared by the whole run: a world (for the upstream cases namespaces x, y, z and
// the 9 model pods), created once. Each case starts by deleting every policy, restoring every
// namespace's and pod's labels, and waiting until everything reaches everything again. Pods
// alternate between the nodes (x/a on a, x/b on b, x/c on a, ...) so both same-node and
// cross-node paths occur in every table.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/typed/apis/v1beta1"

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
	// caseTimeout bounds one case.
	caseTimeout = 3 * time.Minute
)

// nodeNames are the harness's nodes.
func nodeNames() []string { return []string{"a", "b"} }

// podLayout is how the netns cluster attaches pods to their nodes: NFTPOLICY_CNI=ptp (the
// default: a veth and host route per pod) or bridge (a node's pods on one bridge, as flannel
// and the bridge plugin lay them out). The run's log names it.
func podLayout(t *testing.T) netns.Layout {
	t.Helper()
	l, err := netns.LayoutFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod layout: %s (%s)", l, netns.LayoutEnv)
	return l
}

// fabric is the network under the runner.
type fabric interface {
	// addPod makes pod ns/name on node, serving serves (TCP and UDP), and returns its
	// addresses (at most one per family).
	addPod(ctx context.Context, node, ns, name string, serves []served) ([]netip.Addr, error)
	// probe returns the observed matrix over the pods added, keyed {from, to} "ns/name".
	probe(ctx context.Context, v familyView, proto corev1.Protocol, port int32) (map[[2]string]bool, error)
}

// served is a port a pod serves.
type served struct {
	proto corev1.Protocol
	port  int32
}

// world is what a harness builds and every case starts from: namespaces and pods with their
// labels, the pods' container ports as the API server stores them, and what each pod serves.
type world struct {
	namespaces []string
	nsLabels   func(ns string) map[string]string // the API server adds kubernetes.io/metadata.name
	pods       []string                          // "ns/name", placed on the nodes in turn
	podLabels  func(key string) map[string]string
	ports      []corev1.ContainerPort // every pod's (named ports resolve against them)
	serves     []served               // on every pod: TCP and UDP (SCTP is probed raw, served by none)
}

// netpolWorld is upstream's NetworkPolicy model: x, y, z and the 9 pods serving TCP and UDP on
// 80 and 81.
func netpolWorld() *world {
	w := &world{namespaces: modelNamespaces(), nsLabels: baseNamespaceLabels, pods: modelPods(),
		podLabels: func(key string) map[string]string { _, name := splitKey(key); return basePodLabels(name) },
		ports:     containerPorts()}
	for _, port := range modelPorts() {
		for _, proto := range []corev1.Protocol{protocolTCP, protocolUDP} {
			w.serves = append(w.serves, served{proto, port})
		}
	}
	return w
}

type harness struct {
	srv   *kube.Server
	fab   fabric
	w     *world
	addrs map[string][]netip.Addr
	// enf, when set, is waited for after every step's writes (caughtUp): the oracle fabric
	// reads the API server itself and needs no barrier.
	enf Enforcer
	// explained, when set, is given every matrix that validated (explain_e2e_test.go).
	explained func(t *testing.T, ctx context.Context, what string, v familyView, proto corev1.Protocol, port int32,
		obs map[[2]string]bool)
	// explainedPokes, when set, is given every subtest's pokes once they all gave their
	// expectation (explain_e2e_test.go).
	explainedPokes func(t *testing.T, ctx context.Context, v familyView, pokes []poke)
	// cnps, when set, are deleted by reset too (all but Barrier's sentinel).
	cnps policyclient.ClusterNetworkPolicyInterface
}

// caughtUp waits until the enforcer has committed every write made so far (kube.Server.Barrier).
func (h *harness) caughtUp(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if h.enf == nil {
		return
	}
	versions, err := h.srv.Barrier(ctx)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := h.enf.CaughtUp(ctx, versions); err != nil {
		t.Fatalf("%s: the agents did not commit the step: %v", what, err)
	}
}

// newHarness makes w's namespaces and pods on fab and in the API server. Objects left by an
// earlier harness on the same API server are reused (namespaces: no controller runs to delete
// them) or replaced (pods). When the test ends, the pods it made (h.addrs: w's and any added
// since) are deleted from the API server: the next harness's pods get the same addresses, and
// a stale pod of another namespace at one of them would be a member of other selectors' sets.
func newHarness(t *testing.T, s *kube.Server, fab fabric, w *world) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	h := &harness{srv: s, fab: fab, w: w, addrs: map[string][]netip.Addr{}}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		zero := int64(0)
		for key := range h.addrs {
			ns, name := splitKey(key)
			err := s.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting pod %s: %v", key, err)
			}
		}
	})
	for _, ns := range w.namespaces {
		if err := s.CreateNamespace(ctx, ns, w.nsLabels(ns)); err != nil && !apierrors.IsAlreadyExists(err) /* it unwraps with errors.As */ {
			t.Fatal(err)
		}
	}
	zero := int64(0)
	for i, key := range w.pods {
		ns, name := splitKey(key)
		node := nodeNames()[i%len(nodeNames())]
		err := s.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("removing an earlier pod %s: %v", key, err)
		}
		addrs, err := fab.addPod(ctx, node, ns, name, w.serves)
		if err != nil {
			t.Fatalf("pod %s on node %s: %v", key, node, err)
		}
		if _, err := s.CreatePod(ctx, ns, name, node, w.podLabels(key), w.ports, addrs); err != nil {
			t.Fatal(err)
		}
		h.addrs[key] = addrs
	}
	return h
}

// runAll runs every case on IPv4 and on IPv6.
func (h *harness) runAll(t *testing.T) {
	h.perFamily(t, func(t *testing.T, v familyView) {
		for _, c := range cases() {
			t.Run(caseName(c), func(t *testing.T) { h.run(t, c, v) })
		}
	})
}

// perFamily calls run in a subtest IPv4 with that family's view, then in IPv6, and logs how
// long each took.
func (h *harness) perFamily(t *testing.T, run func(t *testing.T, v familyView)) {
	for _, is6 := range []bool{false, true} {
		fam := "IPv4"
		if is6 {
			fam = "IPv6"
		}
		t.Run(fam, func(t *testing.T) {
			start := time.Now()
			run(t, h.view(t, is6))
			t.Logf("%s: done in %s", fam, time.Since(start).Round(time.Second))
		})
	}
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
	for key, addrs := range h.addrs {
		for _, a := range addrs {
			if a.Unmap().Is6() == is6 {
				v.ips[key] = a
				break
			}
		}
		if _, ok := v.ips[key]; !ok {
			t.Fatalf("pod %s has no address of this family (IPv6=%v) among %v", key, is6, addrs)
		}
	}
	return v
}

// run executes one case: reset, then each step's mutations and validations.
func (h *harness) run(t *testing.T, c Case, v familyView) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	h.reset(t, ctx, v)
	for i, s := range c.Steps {
		if err := h.apply(ctx, s, v); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, s.By, err)
		}
		h.caughtUp(t, ctx, fmt.Sprintf("step %d (%s)", i+1, s.By))
		for _, p := range s.Probes {
			h.validate(t, ctx, fmt.Sprintf("step %d (%s)", i+1, s.By), v, p.Protocol, p.Port, expected(p, modelPods(), true))
		}
	}
}

// validate probes the 9×9 matrix until it matches exp (loopback ignored) or convergeTimeout
// passes, then fails with upstream's expected/observed/comparison tables.
func (h *harness) validate(t *testing.T, ctx context.Context, what string, v familyView,
	proto corev1.Protocol, port int32, exp *Reachability) {
	t.Helper()
	deadline := time.Now().Add(convergeTimeout)
	for attempt := 1; ; attempt++ {
		obs, err := h.fab.probe(ctx, v, proto, port)
		if err != nil {
			t.Fatalf("%s: probing %s/%d: %v", what, proto, port, err)
		}
		wrong, report := compare(exp, func(from, to string) bool { return obs[[2]string{from, to}] })
		if wrong == 0 {
			if h.explained != nil {
				h.explained(t, ctx, what, v, proto, port, obs)
			}
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
	if err := h.deletePolicies(ctx); err != nil {
		t.Fatal(err)
	}
	for _, ns := range h.w.namespaces {
		n, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := maps.Clone(h.w.nsLabels(ns))
		want[namespaceLabelKey] = ns
		if !maps.Equal(n.Labels, want) {
			n.Labels = want
			if _, err := c.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restoring the labels of namespace %s: %v", ns, err)
			}
		}
	}
	for _, key := range h.w.pods {
		ns, name := splitKey(key)
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := h.w.podLabels(key); !maps.Equal(p.Labels, want) {
			p.Labels = want
			if _, err := c.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatalf("restoring the labels of pod %s: %v", key, err)
			}
		}
	}
	h.caughtUp(t, ctx, "reset")
	h.validate(t, ctx, "reset (no policy)", v, protocolTCP, 80, NewReachability(h.w.pods, true))
}

// deletePolicies deletes the NetworkPolicies of the world's namespaces and, when the harness
// has their client, every ClusterNetworkPolicy but Barrier's sentinel.
func (h *harness) deletePolicies(ctx context.Context) error {
	for _, ns := range h.w.namespaces {
		if err := h.srv.Client.NetworkingV1().NetworkPolicies(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("delete the policies of %s: %w", ns, err)
		}
	}
	if h.cnps == nil {
		return nil
	}
	list, err := h.cnps.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list the ClusterNetworkPolicies: %w", err)
	}
	for _, p := range list.Items {
		if p.Name == kube.BarrierName {
			continue
		}
		if err := h.cnps.Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete ClusterNetworkPolicy %s: %w", p.Name, err)
		}
	}
	return nil
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
		if err := h.deletePolicies(ctx); err != nil {
			return err
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
