package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
)

// longValue is a label value of the longest length the API allows, 63 characters, ending in i.
func longValue(i int) string { return strings.Repeat("abcdefghij", 7)[:61] + fmt.Sprintf("%02d", i) }

// oddObjects: a burst of unusual but API-valid objects, none of which changes what a probed pod
// may reach, so every probe is judged throughout:
//
//   - pods without IPs: x/noip-pending (node a, no status), x/noip-running (node b, Running);
//   - pods holding another pod's address: x/web-a-twin (Running, newer, same labels and node as
//     x/web-a, so it owns the address and judges it alike; deleted after the burst, when x/web-a
//     must own it again with every element); x/cli-a-pending (not running yet, x/cli-a's
//     labels: a selector's set holds an address while any pod holding it matches, so other
//     labels would change what x/cli-a may reach, as docs/operating.md says); x/cli-b-done
//     (Succeeded, labelled app=web: a finished pod is no endpoint, its labels count nowhere);
//   - pods on node "ghost", which does not exist: x/ghost-0..2, app=client (members of the
//     selector x/web-ingress allows);
//   - a pod with 100 container ports: big/ports100 (node b);
//   - namespace y with 60 more labels, of 63-character values; x/cli-a and x/cli-b with a label
//     tag of a 63-character value;
//   - big/large: a NetworkPolicy of 200 ingress rules of 50 peers (pod selectors, namespace
//     selectors with and without pod selectors, ipBlocks of both families with two excepts
//     each) over the pods of namespace big, on one node and the other;
//   - x/named-nothing: the web pods accept anything of x on a named port no pod declares.
//
// Then a new policy, x/tagged-from-y, selects pods by the 63-character tag and admits the pods
// of namespaces carrying one of y's 60 new labels: x/cli-a and x/cli-b accept only y's pods,
// and of those only y/other-b may send to them (y/client-egress). Its cells settle until both
// agents have committed it, which they must within commitTimeout. Each agent must have logged
// one line per object it rejects, as many as nftpolicy_invalid_objects_total counts, and each
// rejects big/large, which exceeds the agents' compile budget (agentArgs).
func (su *suite) oddObjects(t *testing.T, ctx context.Context) (time.Time, string) {
	before := map[string]rejections{}
	for node, p := range su.agents {
		r, err := rejectionsOf(p)
		if err != nil {
			t.Fatal(err)
		}
		before[node] = r
	}
	start := time.Now()
	objects := su.burst(t, ctx)
	burstCommitted, err := su.waitCommitted(ctx, commitTimeout)
	if err != nil {
		t.Fatalf("the burst of %d objects is not committed: %v", objects, err)
	}
	if err := su.s.Client.CoreV1().Pods("x").Delete(ctx, "web-a-twin", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if _, err := su.waitCommitted(ctx, commitTimeout); err != nil {
		t.Fatalf("the delete of x/web-a-twin is not committed: %v", err)
	}

	at := time.Now()
	if _, err := su.s.Client.NetworkingV1().NetworkPolicies("x").Create(ctx, taggedFromY(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := su.change(at, at.Add(commitTimeout), afterBurstAllowed)
	committed, err := su.waitCommitted(ctx, commitTimeout)
	if err != nil {
		t.Fatalf("x/tagged-from-y, created after the burst, is not committed: %v", err)
	}
	su.tl[len(su.tl)-1].settled = committed

	var rejected []string
	for node, p := range su.agents {
		r, err := rejectionsOf(p)
		if err != nil {
			t.Fatal(err)
		}
		counted, logged := r.counted-before[node].counted, r.logged-before[node].logged
		if counted != float64(logged) {
			t.Errorf("the agent of node %s counted %v rejected objects in nftpolicy_invalid_objects_total and logged %d",
				node, counted, logged)
		}
		if counted < 1 { // big/large, over its budget: both nodes have pods of namespace big
			t.Errorf("the agent of node %s rejected no object: big/large exceeds its compile budget", node)
		}
		rejected = append(rejected, fmt.Sprintf("node %s %v", node, counted))
	}
	return committed, fmt.Sprintf("%d objects committed by both agents %.2f s after the burst began; x/tagged-from-y (%d cells changed) committed %.2f s after its create; rejected objects (counted = logged): %s",
		objects, burstCommitted.Sub(start).Seconds(), len(changed), committed.Sub(at).Seconds(), strings.Join(rejected, ", "))
}

// afterBurstAllowed: afterOutageAllowed with x/tagged-from-y.
func afterBurstAllowed(from, to string) bool {
	if to == "x/cli-a" || to == "x/cli-b" {
		return from == "y/other-b"
	}
	return afterOutageAllowed(from, to)
}

// burst writes the odd objects and returns how many.
func (su *suite) burst(t *testing.T, ctx context.Context) int {
	c := su.s.Client
	n := 0
	podIn := func(ns, name, node string, labels map[string]string, phase corev1.PodPhase, ips []netip.Addr) error {
		_, err := su.s.CreatePodInPhase(ctx, ns, name, node, labels, nil, phase, ips)
		return err
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	label := func(ns, pod string, labels map[string]string) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err == nil && pod == "" {
			_, err = c.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, patch, metav1.PatchOptions{})
		} else if err == nil {
			_, err = c.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		return err
	}
	many := map[string]string{}
	for i := range 60 {
		many[fmt.Sprintf("chaos.test/l%02d", i)] = longValue(i)
	}
	must(label("y", "", many))
	for _, pod := range []string{"cli-a", "cli-b"} {
		must(label("x", pod, map[string]string{"tag": longValue(99)}))
	}

	must(podIn("x", "noip-pending", "a", map[string]string{"app": "client"}, "", nil))
	must(podIn("x", "noip-running", "b", map[string]string{"app": "client"}, corev1.PodRunning, nil))

	must(podIn("x", "web-a-twin", "a", map[string]string{"app": "web"}, corev1.PodRunning, su.byKey["x/web-a"].Addrs))
	must(podIn("x", "cli-a-pending", "a", map[string]string{"app": "client", "tag": longValue(99)}, corev1.PodPending, su.byKey["x/cli-a"].Addrs))
	must(podIn("x", "cli-b-done", "b", map[string]string{"app": "web"}, corev1.PodSucceeded, su.byKey["x/cli-b"].Addrs))

	for i := range 3 {
		ips := []netip.Addr{netip.MustParseAddr(fmt.Sprintf("10.244.9.%d", i+2)), netip.MustParseAddr(fmt.Sprintf("fd00:10:244:9::%d", i+2))}
		must(podIn("x", fmt.Sprintf("ghost-%d", i), "ghost", map[string]string{"app": "client"}, corev1.PodRunning, ips))
	}

	ports := []corev1.ContainerPort{{Name: "http", ContainerPort: probePort}}
	for i := 1; i < 100; i++ {
		ports = append(ports, corev1.ContainerPort{Name: fmt.Sprintf("p-%03d", i), ContainerPort: int32(1000 + i)})
	}
	_, err := su.addPod(ctx, "b", "big", "ports100", map[string]string{"app": "app-1"}, ports)
	must(err)
	for _, node := range []string{"a", "b"} {
		_, err := su.addPod(ctx, node, "big", "big-"+node, map[string]string{"app": "app-2", "tier": "db"}, ports[:1])
		must(err)
	}
	must(label("big", "", map[string]string{"team": "team-1"}))

	_, err = c.NetworkingV1().NetworkPolicies("big").Create(ctx, largePolicy(), metav1.CreateOptions{})
	must(err)
	_, err = c.NetworkingV1().NetworkPolicies("x").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "named-nothing"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromString("nothing"))}}}}},
	}, metav1.CreateOptions{})
	must(err)
	return n
}

// taggedFromY: the pods tagged with longValue(99) accept TCP 80 from the pods of namespaces
// labelled chaos.test/l59 = longValue(59) (y, since the burst).
func taggedFromY() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "tagged-from-y"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tag": longValue(99)}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"chaos.test/l59": longValue(59)}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(probePort))}}}},
		},
	}
}

// largePolicy: every pod of namespace big accepts, by rule i, TCP 8000+i and the named port
// http from 50 peers, which cycle through a pod selector (app), a namespace selector (team)
// with a pod selector every other time, and an ipBlock — a /24 of 10.244.0.0/16 or a /112 of
// fd00:10:244:N::/64 — with two excepts.
func largePolicy() *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "big", Name: "large"}}
	for i := range 200 {
		rule := networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(int32(8000 + i)))},
			{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromString("http"))}}}
		for j := range 50 {
			k := i*50 + j
			app := &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", k%20)}}
			var peer networkingv1.NetworkPolicyPeer
			switch {
			case k%3 == 0:
				peer.PodSelector = app
			case k%3 == 1:
				peer.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("team-%d", k%10)}}
				if k%2 == 0 {
					peer.PodSelector = app
				}
			case k%2 == 0:
				peer.IPBlock = &networkingv1.IPBlock{CIDR: fmt.Sprintf("10.244.%d.0/24", k%8),
					Except: []string{fmt.Sprintf("10.244.%d.0/26", k%8), fmt.Sprintf("10.244.%d.128/26", k%8)}}
			default:
				peer.IPBlock = &networkingv1.IPBlock{CIDR: fmt.Sprintf("fd00:10:244:%d::/112", k%8),
					Except: []string{fmt.Sprintf("fd00:10:244:%d::/120", k%8), fmt.Sprintf("fd00:10:244:%d::100/120", k%8)}}
			}
			rule.From = append(rule.From, peer)
		}
		np.Spec.Ingress = append(np.Spec.Ingress, rule)
	}
	return np
}

// rejections is what an agent says of the objects it rejects: the sum of
// nftpolicy_invalid_objects_total over its kinds, and the lines of its log that name one
// ("skipping invalid object" from the API watcher, "policy rejected: …" from the dataplane).
type rejections struct {
	counted float64
	logged  int
}

func rejectionsOf(p *agentproc.Process) (rejections, error) {
	var r rejections
	_, page, err := p.Get(agentproc.MetricsURL)
	if err != nil {
		return r, fmt.Errorf("metrics of the agent of node %s: %w", p.Node, err)
	}
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, "nftpolicy_invalid_objects_total{"); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest[strings.LastIndexByte(rest, ' ')+1:]), 64)
			if err != nil {
				return r, fmt.Errorf("metrics of the agent of node %s: %q: %w", p.Node, line, err)
			}
			r.counted += v
		}
	}
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		return r, err
	}
	for line := range strings.Lines(string(log)) {
		if strings.Contains(line, `"msg":"skipping invalid object"`) || strings.Contains(line, `"msg":"policy rejected`) {
			r.logged++
		}
	}
	return r, nil
}
