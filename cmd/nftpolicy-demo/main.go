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
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

func main() {
	agentBin := flag.String("agent", "bin/nftpolicy", "the nftpolicy binary to run on each node")
	examples := flag.String("examples", "examples", "directory of sample NetworkPolicies, applied in name order")
	settle := flag.Duration("settle", 30*time.Second, "longest wait for the agents to commit each change")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := demo(ctx, *agentBin, *examples, *settle, os.Stdout)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type demoPod struct{ ns, name, node string }

var pods = []demoPod{{"x", "a", "a"}, {"x", "b", "b"}, {"y", "a", "a"}, {"y", "b", "b"}}

func demo(ctx context.Context, agentBin, examples string, settle time.Duration, out io.Writer) (err error) {
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

	step(out, "starting etcd and kube-apiserver on loopback")
	srv, err := kube.Start(ctx, kube.Config{Dir: filepath.Join(work, "kube")})
	if err != nil {
		return err
	}
	defer srv.Stop()

	step(out, "creating nodes a and b and pods x/a, x/b, y/a, y/b as network namespaces")
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

	step(out, "starting one nftpolicy agent inside each node's namespace")
	var agents []*agentproc.Process
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
		agents = append(agents, p)
		fmt.Fprintf(out, "   node %s: agent ready (pid %d)\n", n.Name, p.Pid())
	}

	if err := printMatrix(ctx, out, cluster, probed, "no policy"); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(examples, "*.yaml"))
	sort.Strings(files)
	for _, f := range files {
		np, desc, err := readPolicy(f)
		if err != nil {
			return err
		}
		step(out, fmt.Sprintf("applying %s: %s", filepath.Base(f), desc))
		created, err := srv.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating %s: %w", f, err)
		}
		// probe once both agents have committed the policy (their tables reflect its version)
		rv, err := strconv.ParseUint(created.ResourceVersion, 10, 64)
		if err != nil {
			return fmt.Errorf("resourceVersion of %s: %w", f, err)
		}
		for _, a := range agents {
			if err := a.WaitCaughtUp(ctx, map[string]uint64{"networkpolicies": rv}, settle); err != nil {
				return err
			}
		}
		if err := printMatrix(ctx, out, cluster, probed, "after "+filepath.Base(f)); err != nil {
			return err
		}
	}
	step(out, "the ruleset of node a (nft list ruleset)")
	rules, err := netns.Exec(ctx, cluster.Node("a").NetNS, "nft", "list", "ruleset")
	if err != nil {
		return err
	}
	out.Write(rules)
	step(out, "done: removing agents, namespaces, the API server and etcd")
	return nil
}

func step(out io.Writer, s string) { fmt.Fprintf(out, "\n== %s\n", s) }

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

// printMatrix probes TCP 80 between all pods (IPv4) once and prints the truth table.
func printMatrix(ctx context.Context, out io.Writer, c *netns.Cluster, pods []*netns.Pod, title string) error {
	got, err := c.ProbeMatrix(ctx, pods, "TCP", 80, false, 300*time.Millisecond)
	if err != nil {
		return err
	}
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = p.Namespace + "/" + p.Name
	}
	fmt.Fprintf(out, "\n   %s — TCP 80, IPv4 ('.' connects, 'X' blocked; rows: from, columns: to)\n", title)
	fmt.Fprintf(out, "   %-6s", "")
	for _, k := range keys {
		fmt.Fprintf(out, " %-5s", k)
	}
	fmt.Fprintln(out)
	for _, from := range keys {
		fmt.Fprintf(out, "   %-6s", from)
		for _, to := range keys {
			mark := "X"
			if got[[2]string{from, to}] {
				mark = "."
			}
			fmt.Fprintf(out, " %-5s", mark)
		}
		fmt.Fprintln(out)
	}
	return nil
}
