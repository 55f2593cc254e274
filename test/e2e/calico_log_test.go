package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// calicoLogManifests: a tier whose one policy logs every packet from the client to the server
// (rule 0), then allows TCP 80 (rule 1); the tier's default denies the rest.
const calicoLogManifests = `
apiVersion: projectcalico.org/v3
kind: Tier
metadata:
  name: audit
spec:
  order: 100
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata:
  name: log-client
spec:
  tier: audit
  order: 10
  selector: app == 'server'
  types: [Ingress]
  ingress:
  - action: Log
    source:
      selector: app == 'client'
  - action: Allow
    protocol: TCP
    destination:
      ports: [80]
`

// TestCalicoLogRule runs the agent (the product binary) with --log-denied at 5 lines a minute
// per rule after a burst of 5, with a Calico Log rule before an Allow rule: the client's
// connection to TCP 80 is allowed and to TCP 81 denied by the tier's default, as without the
// Log rule, and each is logged as "packet logged" naming both pods, the policy, its tier,
// direction and the Log rule's index; a flood of 100,000 UDP packets that the Log rule meets
// (and the tier's default drops) gives no more "packet logged" lines than the rate lets
// through.
func TestCalicoLogRule(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft", "go")
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := installCalicoCRDs(ctx, s); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	const node, serverNS, clientNS = "cl", "x-calicolog", "y-calicolog"
	cl := netns.NewForTest(t, netns.Config{Nodes: []string{node}})
	pods := map[string]*netns.Pod{}
	for _, p := range []struct{ ns, name string }{{serverNS, "server"}, {clientNS, "client"}} {
		if err := s.CreateNamespace(ctx, p.ns, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Client.CoreV1().Namespaces().Delete(context.Background(), p.ns, metav1.DeleteOptions{}) })
		pod, err := cl.AddPod(node, p.ns, p.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreatePod(ctx, p.ns, p.name, node, map[string]string{"app": p.name}, nil, pod.Addrs); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = s.Client.CoreV1().Pods(p.ns).Delete(context.Background(), p.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		pods[p.name] = pod
	}
	server, client := pods["server"], pods["client"]
	for _, port := range []uint16{80, 81} {
		if err := cl.Serve(server.NetNS, netns.TCP, port); err != nil {
			t.Fatal(err)
		}
	}
	runner := &calicoRunner{dyn: dyn}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := runner.deleteCalico(ctx); err != nil {
			t.Error(err)
		}
	})
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(calicoLogManifests), 4096)
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		if _, _, err := runner.create(ctx, &o); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}

	bin, err := agentproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nodeNS := cl.Node(node).NetNS
	if err := agentproc.ForwardAPI(cl, nodeNS, s); err != nil {
		t.Fatal(err)
	}
	const rate, burst = 5, 5
	start := time.Now() // the log chains' buckets cannot be older
	agent, err := agentproc.Start(agentproc.Config{Bin: bin, Node: node, NetNS: nodeNS, Server: s, Dir: t.TempDir(),
		Args: []string{"--log-denied", "--log-denied-rate", "5/minute", "--log-denied-burst", "5"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Stop()
		if t.Failed() {
			t.Logf("agent log (tail):\n%s", agent.Tail(6000))
		}
	})
	if err := agent.WaitReady(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	// logged waits until the count of "packet logged" lines stops growing, and returns them
	logged := func() []map[string]any {
		var got []map[string]any
		for prev := -1; len(got) != prev; {
			prev = len(got)
			time.Sleep(500 * time.Millisecond)
			if got, err = agent.LogLines("packet logged"); err != nil {
				t.Fatal(err)
			}
		}
		return got
	}

	// the verdicts, as without the Log rule: TCP 80 allowed, TCP 81 denied (the tier's default)
	for _, c := range []struct {
		port uint16
		want bool
	}{{80, true}, {81, false}} {
		for _, is6 := range []bool{false, true} {
			ok, err := netns.Probe(ctx, client.NetNS, server.IP(is6), netns.TCP, c.port, 500*time.Millisecond)
			if err != nil || ok != c.want {
				t.Errorf("client → server %v TCP %d: connected %v (%v), want %v", server.IP(is6), c.port, ok, err, c.want)
			}
		}
	}
	got := logged()
	want := map[string]any{"src_namespace": clientNS, "src_pod": "client", "dst_namespace": serverNS, "dst_pod": "server",
		"protocol": "tcp", "tier": "audit", "policy": "GlobalNetworkPolicy/log-client", "direction": "ingress", "rule": 0.0}
	ports := map[float64]int{}
	for _, line := range got {
		for k, v := range want {
			if line[k] != v {
				t.Errorf("log line %v: %s = %v, want %v", line, k, line[k], v)
			}
		}
		if chain, _ := line["chain"].(string); !strings.HasPrefix(chain, "log_") {
			t.Errorf("log line %v: chain %q, want a log_ chain", line, chain)
		}
		port, _ := line["port"].(float64)
		ports[port]++
	}
	if ports[80] != 2 || ports[81] < 2 { // one connection per family to 80; 81's SYNs are retried
		t.Errorf("packet logged lines by port %v, want 2 for 80 (one a family) and at least 2 for 81", ports)
	}
	if b, err := json.Marshal(got); err == nil {
		t.Logf("packet logged lines: %s", b)
	}

	// the flood: each datagram meets the Log rule and is dropped by the tier's default
	const flood = 100000
	if err := netns.Do(client.NetNS, func() error { return netns.SendUDP(netip.AddrPortFrom(server.IP(false), 9), flood) }); err != nil {
		t.Fatal(err)
	}
	got = logged()
	// each log chain (the Log rule before one verdict, for one family) has its own bucket
	most := burst + int(rate*time.Since(start).Minutes()) + 1
	byChain, udp := map[string]int{}, 0
	for _, line := range got {
		for k, v := range want {
			if k != "protocol" && line[k] != v {
				t.Errorf("log line %v: %s = %v, want %v", line, k, line[k], v)
			}
		}
		chain, _ := line["chain"].(string)
		byChain[chain]++
		if line["protocol"] == "udp" {
			udp++
		}
	}
	t.Logf("%d packet logged lines after %d UDP packets in %.1f s, %d of UDP, by chain %v (at most %d each)",
		len(got), flood, time.Since(start).Seconds(), udp, byChain, most)
	for chain, n := range byChain {
		if n > most {
			t.Errorf("%d packet logged lines of chain %s; the rate lets at most %d through", n, chain, most)
		}
	}
	if udp == 0 {
		t.Error("no packet logged line for the UDP flood")
	}
}
