package e2e

// TestCNPConformance: the ClusterNetworkPolicy conformance tests (cnp_cases_test.go) through the
// runner (runner_test.go) on the netns cluster with the agent on every node, over IPv4 and IPv6.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	policyv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestCNPConformance runs every conformance test on IPv4 and on IPv6 in the suite's world
// (cnp_model_test.go), the experimental CRD installed (node peers need it) and the Node objects
// registered with their underlay addresses and kubernetes.io/os=linux, as a kubelet would.
// Each test starts from no policy and the base labels, and from a verified all-reachable
// matrix; its subtests run in order on the state the earlier ones left.
func TestCNPConformance(t *testing.T) {
	testenv.RequireRoot(t)
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := s.InstallClusterNetworkPolicyExperimentalCRD(ctx); err != nil {
		t.Fatal(err)
	}
	cnps, err := s.ClusterNetworkPolicyClient()
	if err != nil {
		t.Fatal(err)
	}
	w, hosts, err := conformanceWorld()
	if err != nil {
		t.Fatal(err)
	}
	cl := netns.NewForTest(t, netns.Config{Nodes: nodeNames(), Layout: podLayout(t)})
	fab := &netnsFabric{cl: cl, nsFD: map[string]int{}}
	t.Cleanup(fab.close)
	for _, n := range cl.Nodes() {
		_, err := s.CreateNode(ctx, n.Name, map[string]string{corev1.LabelOSStable: "linux"}, n.Underlay, n.PodCIDRs)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	enf := newEnforcer(t, s, cl)
	h := newHarness(t, s, fab, w)
	h.enf, h.cnps = enf, cnps
	hostKeys := map[string]bool{}
	for _, hp := range hosts {
		hostKeys[hp.key] = true
	}
	h.explainedPokes = explainPokes(t, s, hostKeys)
	t.Cleanup(func() { // the last test's policies, for the tests after this one
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := h.deletePolicies(ctx); err != nil {
			t.Error(err)
		}
	})
	for _, hp := range hosts {
		if err := h.addHostPod(ctx, hp); err != nil {
			t.Fatalf("hostNetwork pod %s: %v", hp.key, err)
		}
	}

	startEnforcers(t, enf)
	h.perFamily(t, func(t *testing.T, v familyView) {
		for _, c := range cnpTests() {
			t.Run(c.Name, func(t *testing.T) { h.runCNP(t, c, v, fab) })
		}
	})
}

// addHostPod makes a hostNetwork pod: its servers listen in its node's namespace on the node's
// addresses, which are its addresses in the API server too.
func (h *harness) addHostPod(ctx context.Context, hp hostPod) error {
	f := h.fab.(*netnsFabric)
	node := f.cl.Node(hp.node)
	for _, s := range centaurServes() {
		if err := f.cl.Serve(node.NetNS, netns.Protocol(s.proto), uint16(s.port), node.Underlay...); err != nil {
			return err
		}
	}
	fd, err := node.FD()
	if err != nil {
		return err
	}
	f.nsFD[hp.key] = fd
	ns, name := splitKey(hp.key)
	c := h.srv.Client
	zero := int64(0)
	if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing an earlier pod: %w", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: hp.labels},
		Spec: corev1.PodSpec{NodeName: hp.node, HostNetwork: true,
			Containers: []corev1.Container{{Name: "c", Image: kube.PauseImage, Ports: hp.ports}}}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := h.srv.SetPodStatus(ctx, ns, name, corev1.PodRunning, node.Underlay); err != nil {
		return err
	}
	h.addrs[hp.key] = node.Underlay
	return nil
}

// strictCreate makes the API server reject, not prune, a field its schema lacks: a node peer
// under the standard CRD fails the test instead of vanishing from the policy.
var strictCreate = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}

// runCNP runs one conformance test: reset, apply its manifest, then each subtest's steps, each
// its changes and then its pokes, and the subtest's cleanup changes when it ends.
func (h *harness) runCNP(t *testing.T, c cnpTest, v familyView, f *netnsFabric) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	h.reset(t, ctx, v)
	objs, err := manifestObjects(c.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *policyv1beta1.ClusterNetworkPolicy:
			_, err = h.cnps.Create(ctx, o, strictCreate)
		case *networkingv1.NetworkPolicy:
			_, err = h.srv.Client.NetworkingV1().NetworkPolicies(o.Namespace).Create(ctx, o, strictCreate)
		default:
			err = fmt.Errorf("unexpected object %T", o)
		}
		if err != nil {
			t.Fatalf("applying %s: %v", c.Manifest, err)
		}
	}
	h.caughtUp(t, ctx, "applying "+c.Manifest)
	for _, s := range c.Subtests {
		t.Run(s.Name, func(t *testing.T) {
			t.Cleanup(func() {
				for _, ch := range s.Cleanup {
					if err := h.change(ctx, ch, v); err != nil {
						t.Errorf("cleanup: %s: %v", ch.By, err)
					}
				}
			})
			for i, st := range s.Steps {
				for _, ch := range st.Change {
					if err := h.change(ctx, ch, v); err != nil {
						t.Fatalf("step %d: %s: %v", i+1, ch.By, err)
					}
				}
				h.caughtUp(t, ctx, fmt.Sprintf("step %d: the changes", i+1))
				h.checkPokes(t, ctx, v, f, fmt.Sprintf("step %d", i+1), st.Pokes)
			}
		})
	}
}

// change makes one of upstream's edits through the API server.
func (h *harness) change(ctx context.Context, ch change, v View) error {
	c := h.srv.Client
	switch {
	case ch.DeleteNetworkPolicy != "":
		ns, name := splitKey(conformanceKey(ch.DeleteNetworkPolicy))
		return c.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{})
	case ch.Pod != "":
		var value any // nil: JSON null, which removes the label
		if ch.PodLabelValue != nil {
			value = *ch.PodLabelValue
		}
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{ch.PodLabel: value}}})
		if err != nil {
			return err
		}
		ns, name := splitKey(conformanceKey(ch.Pod))
		_, err = c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	case ch.Namespace != "":
		n, err := c.CoreV1().Namespaces().Get(ctx, conformanceKey(ch.Namespace), metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels = maps.Clone(ch.NamespaceLabels)
		_, err = c.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		return err
	}
	p, err := h.cnps.Get(ctx, ch.CNP, metav1.GetOptions{})
	if err != nil {
		return err
	}
	ch.Edit(p, v)
	_, err = h.cnps.Update(ctx, p, metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict})
	return err
}

// checkPokes pokes until every poke gives its expectation or convergeTimeout passes (upstream
// PokeServer's 10 s of retries), then fails with the pokes that did not.
func (h *harness) checkPokes(t *testing.T, ctx context.Context, v familyView, f *netnsFabric, what string, pokes []poke) {
	t.Helper()
	deadline := time.Now().Add(convergeTimeout)
	for attempt := 1; ; attempt++ {
		got, err := f.poke(ctx, v, pokes)
		if err != nil {
			t.Fatalf("poking: %v", err)
		}
		var wrong []string
		for i, p := range pokes {
			if got[i] != p.Connect {
				wrong = append(wrong, fmt.Sprintf("  %s -> %s %s/%d: want %s, got %s",
					p.From, p.To, p.Proto, p.Port, connects(p.Connect), connects(got[i])))
			}
		}
		if len(wrong) == 0 {
			if h.explainedPokes != nil {
				h.explainedPokes(t, ctx, v, pokes)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d of %d pokes still wrong after %d rounds over %s:\n%s", what, len(wrong), len(pokes), attempt, convergeTimeout, strings.Join(wrong, "\n"))
			return
		}
		time.Sleep(pollInterval)
	}
}

func connects(ok bool) string {
	if ok {
		return "connected"
	}
	return "blocked"
}

// poke runs the pokes at once, the SCTP ones one after another (the raw-socket prober tells
// its INITs apart by tags unique within one call only), and returns whether each connected.
func (f *netnsFabric) poke(ctx context.Context, v familyView, pokes []poke) ([]bool, error) {
	got := make([]bool, len(pokes))
	errs := make([]error, len(pokes))
	var wg sync.WaitGroup
	var sctp []int
	for i, p := range pokes {
		if p.Proto == protocolSCTP {
			sctp = append(sctp, i)
			continue
		}
		wg.Go(func() {
			from, to := conformanceKey(p.From), conformanceKey(p.To)
			got[i], errs[i] = netns.Probe(ctx, f.netnsOf(from), v.IP(to), netns.Protocol(p.Proto), uint16(p.Port), probeTimeout)
		})
	}
	wg.Go(func() {
		for _, i := range sctp {
			from, to := conformanceKey(pokes[i].From), conformanceKey(pokes[i].To)
			ends := []sctpEnd{{Key: from, NetNS: f.nsFD[from], IP: v.IP(from)}, {Key: to, NetNS: f.nsFD[to], IP: v.IP(to)}}
			var m map[[2]string]bool
			m, errs[i] = probeSCTPMatrix(ctx, ends, uint16(pokes[i].Port), probeTimeout)
			got[i] = m[[2]string{from, to}]
		}
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return got, nil
}

// netnsOf returns the network namespace of pod key.
func (f *netnsFabric) netnsOf(key string) string {
	for _, p := range f.list {
		if p.Key() == key {
			return p.NetNS
		}
	}
	panic("no pod " + key)
}
