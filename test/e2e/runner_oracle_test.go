package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// oracleFabric is a network whose connectivity is the reference evaluator's verdict on what the
// API server stores at probe time: namespace labels, pod labels, addresses (status.podIPs) and
// named ports (spec), and the policies as the API server defaulted them. It converges at once.
type oracleFabric struct{ srv *kube.Server }

func (oracleFabric) addPod(_ context.Context, _, ns, name string, _ []served) ([]netip.Addr, error) {
	key := ns + "/" + name
	return []netip.Addr{fakeView{}.IP(key), fakeView{is6: true}.IP(key)}, nil
}

func (f oracleFabric) probe(ctx context.Context, v familyView, proto corev1.Protocol, port int32) (map[[2]string]bool, error) {
	c := f.srv.Client
	o := &oracle{nsLabels: map[string]map[string]string{}, pods: map[string]*oraclePod{}, policies: map[string]*networkingv1.NetworkPolicy{}}
	for _, ns := range modelNamespaces() {
		n, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		o.nsLabels[ns] = n.Labels
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, p := range pods.Items {
			op := &oraclePod{key: ns + "/" + p.Name, ns: ns, name: p.Name, labels: p.Labels}
			for _, pip := range p.Status.PodIPs {
				if a, err := netip.ParseAddr(pip.IP); err == nil && a.Is6() == v.is6 {
					op.ip = a
				}
			}
			if !op.ip.IsValid() {
				return nil, fmt.Errorf("pod %s has no address of the family in its status %v", op.key, p.Status.PodIPs)
			}
			for _, ctr := range p.Spec.Containers {
				op.ports = append(op.ports, ctr.Ports...)
			}
			o.pods[op.key] = op
		}
		pols, err := c.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for i := range pols.Items {
			o.policies[ns+"/"+pols.Items[i].Name] = &pols.Items[i]
		}
	}
	out := map[[2]string]bool{}
	for _, from := range modelPods() {
		for _, to := range modelPods() {
			if from != to {
				out[[2]string{from, to}] = o.allowed(from, to, proto, port)
			}
		}
	}
	return out, nil
}

// TestRunnerOnOracle runs the whole suite through the real API server onto the evaluator: it
// proves the runner (create, update, delete, relabel, reset between cases) and that every policy
// of the table is valid for the API server and, as stored and defaulted, still gives upstream's
// tables. It needs the API server binaries (make deps) but neither root nor the agent.
func TestRunnerOnOracle(t *testing.T) {
	s := kube.Require(t, srv)
	newHarness(t, s, oracleFabric{s}, netpolWorld()).runAll(t)
}
