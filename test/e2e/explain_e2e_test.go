package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftpolicy/nftpolicy/internal/explain"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// explainAgrees returns the check TestConformance runs on every matrix the traffic validated:
// nftpolicy explain, on the API server's state at that moment (the agents have committed it),
// gives every pair of model pods the verdict the probes saw — allowed exactly when the real
// connection went through — on the same protocol, port and address family.
func explainAgrees(t *testing.T, s *kube.Server) func(*testing.T, context.Context, string, familyView, corev1.Protocol, int32, map[[2]string]bool) {
	client := explainClient(t, s)
	return func(t *testing.T, ctx context.Context, what string, v familyView, proto corev1.Protocol, port int32, obs map[[2]string]bool) {
		t.Helper()
		c, err := explain.Live(ctx, client)
		if err != nil {
			t.Fatalf("%s: explain: %v", what, err)
		}
		wrong := 0
		for _, from := range modelPods() {
			for _, to := range modelPods() {
				if from == to {
					continue
				}
				r, err := c.Explain(explain.Query{From: from, To: to, Proto: explainProtocol(proto), Port: uint16(port), IPv6: v.is6})
				if err != nil {
					t.Fatalf("%s: explain %s → %s %s/%d: %v", what, from, to, proto, port, err)
				}
				if seen := obs[[2]string{from, to}]; r.Allowed != seen {
					var text strings.Builder
					_ = r.WriteText(&text)
					t.Errorf("%s: %s → %s %s/%d: the traffic was allowed=%v, explain says:\n%s", what, from, to, proto, port, seen, text.String())
					if wrong++; wrong == 3 {
						t.FailNow()
					}
				}
			}
		}
	}
}

// explainPokes returns the check TestCNPConformance runs once every poke of a subtest gave its
// expectation: nftpolicy explain, on the API server's state at that moment, allows each poke's
// flow exactly when it is to connect, on the same protocol, port and address family. A poke
// to a hostNetwork pod (hosts, by key) is explained to its address, its node's (explain's
// "--to IP"); one from a hostNetwork pod is not explained: explain judges pods of the pod
// network only, and the node's own traffic is no pod's egress.
func explainPokes(t *testing.T, s *kube.Server, hosts map[string]bool) func(*testing.T, context.Context, familyView, []poke) {
	client := explainClient(t, s)
	return func(t *testing.T, ctx context.Context, v familyView, pokes []poke) {
		t.Helper()
		c, err := explain.Live(ctx, client)
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		for _, p := range pokes {
			from, to := conformanceKey(p.From), conformanceKey(p.To)
			if hosts[from] {
				continue
			}
			q := explain.Query{From: from, To: to, Proto: explainProtocol(p.Proto), Port: uint16(p.Port), IPv6: v.is6}
			if hosts[to] {
				q.To = v.IP(to).String()
			}
			r, err := c.Explain(q)
			if err != nil {
				t.Errorf("explain %s → %s %s/%d: %v", from, to, p.Proto, p.Port, err)
				continue
			}
			if r.Allowed != p.Connect {
				var text strings.Builder
				_ = r.WriteText(&text)
				t.Errorf("%s → %s %s/%d: the traffic connected=%v, explain says:\n%s", from, to, p.Proto, p.Port, p.Connect, text.String())
			}
		}
	}
}

// explainClient is a client of the API server for explain.Live.
func explainClient(t *testing.T, s *kube.Server) sync.Client {
	client, err := sync.NewClient(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// explainProtocol is the model's protocol of a probed one.
func explainProtocol(p corev1.Protocol) model.Protocol {
	return map[corev1.Protocol]model.Protocol{protocolTCP: model.ProtocolTCP, protocolUDP: model.ProtocolUDP, protocolSCTP: model.ProtocolSCTP}[p]
}
