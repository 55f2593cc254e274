// Command nftpolicy-demo is `make demo`: a local cluster in network namespaces (a real etcd and
// kube-apiserver, two nodes, pods in namespaces x and y), one nftpolicy agent process per node
// running inside its node's namespace, and the sample policies of examples/ applied one by one,
// with the probe truth table printed before and after each, and one node's ruleset at the end.
// Everything is removed on exit or Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

func main() {
	agentBin := flag.String("agent", "bin/nftpolicy", "the nftpolicy binary to run on each node")
	examples := flag.String("examples", "examples", "directory of sample NetworkPolicies, applied in name order")
	settle := flag.Duration("settle", 2*time.Second, "longest wait for the agents to converge after each change")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := demo(ctx, *agentBin, *examples, *settle)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demoPod struct{ ns, name, node string }

var pods = []demoPod{{"x", "a", "a"}, {"x", "b", "b"}, {"y", "a", "a"}, {"y", "b", "b"}}

func demo(ctx context.Context, agentBin, examples string, settle time.Duration) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("the demo needs root (network namespaces and nftables)")
	}
	agentBin, err = filepath.Abs(agentBin)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "nftpolicy-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	step("starting etcd and kube-apiserver on loopback")
	srv, err := kube.Start(ctx, kube.Config{Dir: filepath.Join(work, "kube")})
	if err != nil {
		return err
	}
	defer srv.Stop()

	step("creating nodes a and b and pods x/a, x/b, y/a, y/b as network namespaces")
	cluster, err := netns.New(ctx, netns.Config{Nodes: []string{"a", "b"}})
	if err != nil {
		return err
	}
	defer cluster.Close()
	for _, ns := range []string{"x", "y"} {
		if err := srv.CreateNamespace(ctx, ns, map[string]string{"ns": ns}); err != nil {
			return err
		}
	}
	var probed []*netns.Pod
	for _, p := range pods {
		np, err := cluster.AddPod(p.node, p.ns, p.name)
		if err != nil {
			return err
		}
		if err := cluster.Serve(np.NetNS, "TCP", 80); err != nil {
			return err
		}
		ports := []corev1.ContainerPort{{Name: "serve-80-tcp", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		if _, err := srv.CreatePod(ctx, p.ns, p.name, p.node, map[string]string{"pod": p.name}, ports, np.Addrs); err != nil {
			return err
		}
		probed = append(probed, np)
	}

	step("starting one nftpolicy agent inside each node's namespace")
	for _, n := range cluster.Nodes() {
		if err := agentproc.ForwardAPI(cluster, n.NetNS, srv); err != nil {
			return err
		}
		p, err := agentproc.Start(agentproc.Config{Bin: agentBin, Node: n.Name, NetNS: n.NetNS, Server: srv, Dir: work,
			Args: []string{"--cleanup-on-exit",
				"--anti-spoofing", "--workload-iface-prefixes", "nftp"}}) // each pod has its own veth nftp<n> and host route
		if err != nil {
			return err
		}
		defer p.Stop()
		if err := p.WaitReady(ctx, 30*time.Second); err != nil {
			return err
		}
		fmt.Printf("   node %s: agent ready (pid %d)\n", n.Name, p.Pid())
	}

	prev, err := printMatrix(ctx, cluster, probed, "no policy", nil, 0)
	if err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(examples, "*.yaml"))
	sort.Strings(files)
	for _, f := range files {
		np, desc, err := readPolicy(f)
		if err != nil {
			return err
		}
		step(fmt.Sprintf("applying %s: %s", filepath.Base(f), desc))
		if _, err := srv.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s: %w", f, err)
		}
		if prev, err = printMatrix(ctx, cluster, probed, "after "+filepath.Base(f), prev, settle); err != nil {
			return err
		}
	}
	step("the ruleset of node a (nft list ruleset)")
	out, err := netns.Exec(ctx, cluster.Node("a").NetNS, "nft", "list", "ruleset")
	if err != nil {
		return err
	}
	os.Stdout.Write(out)
	step("done: removing agents, namespaces, the API server and etcd")
	return nil
}

func step(s string) { fmt.Printf("\n== %s\n", s) }

// readPolicy reads one example NetworkPolicy and its leading comment.
func readPolicy(path string) (*networkingv1.NetworkPolicy, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var desc []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		desc = append(desc, strings.TrimSpace(strings.TrimPrefix(l, "#")))
	}
	np := &networkingv1.NetworkPolicy{}
	if err := yaml.UnmarshalStrict(b, np); err != nil {
		return nil, "", fmt.Errorf("reading %s: %w", path, err)
	}
	return np, strings.Join(desc, " "), nil
}

// printMatrix probes TCP 80 between all pods (IPv4) and prints the truth table; after a change it
// re-probes until the table changes or settle passes (the agents converge in milliseconds, the
// probe of a denied connection takes its timeout).
func printMatrix(ctx context.Context, c *netns.Cluster, pods []*netns.Pod, title string, prev map[[2]string]bool, settle time.Duration) (map[[2]string]bool, error) {
	deadline := time.Now().Add(settle)
	var got map[[2]string]bool
	for {
		var err error
		got, err = c.ProbeMatrix(ctx, pods, "TCP", 80, false, 300*time.Millisecond)
		if err != nil {
			return nil, err
		}
		if prev == nil || !sameMatrix(prev, got) || time.Now().After(deadline) {
			break
		}
	}
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = p.Namespace + "/" + p.Name
	}
	fmt.Printf("\n   %s — TCP 80, IPv4 ('.' connects, 'X' blocked; rows: from, columns: to)\n", title)
	fmt.Printf("   %-6s", "")
	for _, k := range keys {
		fmt.Printf(" %-5s", k)
	}
	fmt.Println()
	for _, from := range keys {
		fmt.Printf("   %-6s", from)
		for _, to := range keys {
			mark := "X"
			if got[[2]string{from, to}] {
				mark = "."
			}
			fmt.Printf(" %-5s", mark)
		}
		fmt.Println()
	}
	return got, nil
}

func sameMatrix(a, b map[[2]string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
