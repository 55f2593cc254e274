package main

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// agentNode is one node namespace, named node in the API server too, with pods the API server
// knows (each labelled app=<its name>), and the agent binary built for it.
type agentNode struct {
	t    *testing.T
	s    *kube.Server
	c    *netns.Cluster
	node *netns.Node
	name string
	bin  string
	pods map[string]*netns.Pod // by pod name
}

// podSpec is a pod of an agentNode: its namespace and name, and whether it serves TCP 80.
type podSpec struct {
	ns, name string
	serve    bool
}

// newAgentNode builds the agent, makes the node namespace and its pods, and creates their
// namespaces (once each) and pods in the API server.
func newAgentNode(t *testing.T, s *kube.Server, node string, pods ...podSpec) *agentNode {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft", "go")
	ctx := context.Background()
	bin, err := agentproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := netns.NewForTest(t, netns.Config{Nodes: []string{node}})
	an := &agentNode{t: t, s: s, c: c, node: c.Node(node), name: node, bin: bin, pods: map[string]*netns.Pod{}}
	made := map[string]bool{}
	for _, ps := range pods {
		if !made[ps.ns] {
			if err := s.CreateNamespace(ctx, ps.ns, nil); err != nil {
				t.Fatal(err)
			}
			made[ps.ns] = true
		}
		p, err := c.AddPod(node, ps.ns, ps.name)
		if err != nil {
			t.Fatal(err)
		}
		if ps.serve {
			if err := c.Serve(p.NetNS, netns.TCP, 80); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.CreatePod(ctx, ps.ns, ps.name, node, map[string]string{"app": ps.name}, nil, p.Addrs); err != nil {
			t.Fatal(err)
		}
		deletePodAtEnd(t, s, ps.ns, ps.name)
		an.pods[ps.name] = p
	}
	return an
}

// start runs the agent in the node with extra flags, reaching the API server through the
// node's forwarder, and waits until it is ready; it is stopped when the test ends, and its log's
// tail printed if the test failed.
func (an *agentNode) start(args ...string) *agentproc.Process {
	t := an.t
	t.Helper()
	agent, err := agentproc.Start(agentproc.Config{Bin: an.bin, Node: an.name, NetNS: an.node.NetNS, Server: an.s, Dir: t.TempDir(),
		Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = agent.Stop()
		if t.Failed() {
			t.Logf("agent log (tail):\n%s", agent.Tail(6000))
		}
	})
	if err := agentproc.ForwardAPI(an.c, an.node.NetNS, an.s); err != nil {
		t.Fatal(err)
	}
	if err := agent.WaitReady(context.Background(), 60*time.Second); err != nil {
		t.Fatal(err)
	}
	return agent
}

// deletePodAtEnd deletes a pod the test created from the API server when the test ends. The
// package's tests share one API server and the harness's pod addresses: a pod left behind would
// hold the address of a later test's pod, and the graph keeps an address that two pods hold out
// of the sets that allow, unless both match.
func deletePodAtEnd(t *testing.T, s *kube.Server, ns, name string) {
	t.Cleanup(func() {
		_ = s.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	})
}
