package agent

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/fqdn/fqdntest"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestDomainNamesEndToEnd runs the agent's loop with the real graph and dataplane and its DNS
// observer, as Run wires them, on node a of a harness cluster with an external host that serves
// DNS (www.example.test: the host's addresses, TTL 1 s) and TCP 8080. An admin
// ClusterNetworkPolicy lets every pod query DNS and reach *.example.test on TCP 8080, a baseline
// one denies all other egress. The pod cannot reach the host before it looks the name up, reaches
// it once the answer arrives (the hold sends the answer on after the address is committed), and
// cannot again once the element's timeout (TTL 1 s, floor 1 s, grace 1 s: 2 s) has passed; over
// IPv4 and IPv6.
func TestDomainNamesEndToEnd(t *testing.T) {
	n := startDomainNode(t, []uint16{8080},
		model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{DomainNames: []string{"*.example.test"}, Ports: []model.Port{{First: 8080, Last: 8080}}}})
	pod, ext, domains, reach := n.pod, n.ext, n.domains, n.reach
	for i, family := range []string{"v4", "v6"} {
		t.Run(family, func(t *testing.T) {
			dst := ext.Addrs[i]
			if reach(dst, 8080) {
				t.Fatalf("%s reached before any lookup", dst)
			}
			got := fqdntest.Lookup(t, pod.NetNS, dst, "www.example.test", i == 1)
			if len(got) != 1 || got[0] != dst {
				t.Fatalf("answer %v, want %s", got, dst)
			}
			answered := time.Now()
			if !reach(dst, 8080) {
				t.Fatalf("%s not reached at once after the answer (the hold sends it on after the commit); cached: %v",
					dst, domains.observer.Entries("*.example.test"))
			}
			waitFor(t, 6*time.Second, "denied again after the timeout", func() bool { return !reach(dst, 8080) })
			if e := time.Since(answered); e < 2*time.Second {
				t.Errorf("denied again %v after the answer, before its 2 s timeout", e)
			}
		})
	}
	n.checkErrs(t)
}

// domainNode is node a of a harness cluster running the agent's loop and DNS observer, with an
// external host serving DNS (www.example.test: the host's addresses, TTL 1 s) and TCP.
type domainNode struct {
	pod *netns.Pod
	ext *netns.Host
	// resolver is the DNS server's address of each family (v4, v6): the external host's, or
	// the node's.
	resolver []netip.Addr
	domains  *domainNames
	reach    func(addr netip.Addr, port uint16) bool
	errs     chan error
}

// startDomainNode starts a domainNode whose external host serves TCP on ports, under an admin
// ClusterNetworkPolicy that lets every pod query DNS and then has rules, and a baseline one
// that denies all other egress.
func startDomainNode(t *testing.T, ports []uint16, rules ...model.Rule) *domainNode {
	t.Helper()
	return startDomainNodeResolving(t, false, ports, rules...)
}

// startDomainNodeResolving is startDomainNode with the DNS server in the node's own namespace,
// on its underlay addresses (a resolver on the host network, whose answers leave by the output
// hook), when onNode; domainNode.resolver is where the pod asks.
func startDomainNodeResolving(t *testing.T, onNode bool, ports []uint16, rules ...model.Rule) *domainNode {
	t.Helper()
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a"}, External: true})
	pod, err := c.AddPod("a", "x", "client")
	if err != nil {
		t.Fatal(err)
	}
	ext := c.External()
	for _, port := range ports {
		if err := c.Serve(ext.NetNS, netns.TCP, port); err != nil {
			t.Fatal(err)
		}
	}
	zone := &fqdntest.Zone{TTL: 1, Addrs: map[string][]netip.Addr{"www.example.test": ext.Addrs}}
	resolverNS, resolver := ext.NetNS, ext.Addrs
	if onNode {
		resolverNS, resolver = c.Node("a").NetNS, c.Node("a").Underlay
	}
	fqdntest.Serve(t, resolverNS, zone, resolver...)
	dp, fd := openApplier(t, c.Node("a"))

	var logs logBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errs := make(chan error, 4)
	domains, err := startDomainNames(ctx, RunConfig{NetNSFD: fd, Table: nft.DefaultTable, DNSGroup: 9,
		DNSLimits: &fqdn.Limits{PerName: 64, PerClient: 256, Floor: time.Second, MaxTTL: time.Hour, Grace: time.Second}},
		log, prometheus.NewRegistry(), errs)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	updates := make(chan []model.Update, 16)
	testenv.Go(t, "loop", func(ctx context.Context) error {
		return Loop(ctx, Config{Logger: log, Metrics: m}, updates, graph.New(graph.Config{NodeName: "a"}), nftAdapter{dp, domains})
	})
	cnp := func(name, tier string, rules ...model.Rule) model.Update {
		return model.PolicySet{Policy: model.Policy{Key: model.PolicyKey{Kind: "ClusterNetworkPolicy", Name: name}, Tier: tier, Order: 1,
			Selector: "all()", NamespaceSelector: "all()", ApplyEgress: true, EgressRules: rules}}
	}
	dns := model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolUDP, Destination: model.Peer{Ports: []model.Port{{First: 53, Last: 53}}}}
	updates <- []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"kubernetes.io/metadata.name": "x"}}},
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "client"}, Node: "a", Addrs: pod.Addrs, Running: true}},
		cnp("example", model.TierAdmin, append([]model.Rule{dns}, rules...)...),
		cnp("deny", model.TierBaseline, model.Rule{Action: model.ActionDeny}),
		model.SyncStatusUpdate{Status: model.InSync},
	}
	waitFor(t, 10*time.Second, "the first commit", func() bool { return testutil.ToFloat64(m.Transactions) >= 1 })

	reach := func(addr netip.Addr, port uint16) bool {
		ok, err := netns.Probe(context.Background(), pod.NetNS, addr, netns.TCP, port, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	return &domainNode{pod: pod, ext: ext, resolver: resolver, domains: domains, reach: reach, errs: errs}
}

// checkErrs fails t with an error the observer reported.
func (n *domainNode) checkErrs(t *testing.T) {
	t.Helper()
	select {
	case err := <-n.errs:
		t.Errorf("observer: %v", err)
	default:
	}
}

// TestDomainNamesInOrder: a domain-name rule behind a Deny or a Pass follows the policy's order.
// The admin policy denies (or passes to the next tiers) TCP 9090 to any peer, then allows
// *.example.test on TCP 8080 and 9090; the baseline denies the rest. After the lookup the pod
// reaches the host on 8080, never on 9090 (the Deny decides first; the Pass skips the admin
// tier's later rules and the baseline denies), and neither before the lookup; over IPv4 and
// IPv6.
func TestDomainNamesInOrder(t *testing.T) {
	for _, action := range []model.Action{model.ActionDeny, model.ActionPass} {
		t.Run(action.String(), func(t *testing.T) {
			n := startDomainNode(t, []uint16{8080, 9090},
				model.Rule{Action: action, Protocol: model.ProtocolTCP, Destination: model.Peer{Ports: []model.Port{{First: 9090, Last: 9090}}}},
				model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
					Destination: model.Peer{DomainNames: []string{"*.example.test"}, Ports: []model.Port{{First: 8080, Last: 8080}, {First: 9090, Last: 9090}}}})
			for i, family := range []string{"v4", "v6"} {
				t.Run(family, func(t *testing.T) {
					dst := n.ext.Addrs[i]
					if n.reach(dst, 8080) {
						t.Fatalf("%s reached before any lookup", dst)
					}
					if got := fqdntest.Lookup(t, n.pod.NetNS, dst, "www.example.test", i == 1); len(got) != 1 || got[0] != dst {
						t.Fatalf("answer %v, want %s", got, dst)
					}
					if !n.reach(dst, 8080) {
						t.Fatalf("%s:8080 not reached after the answer; cached: %v", dst, n.domains.observer.Entries("*.example.test"))
					}
					if n.reach(dst, 9090) {
						t.Errorf("%s:9090 reached: the domain rule accepted what the %s before it decides", dst, action)
					}
				})
			}
			n.checkErrs(t)
		})
	}
}

// TestDomainNamesHostNetworkResolver: answers of a resolver on the node's own network (the test's
// DNS server in the node's namespace, as node-local-dns on the host network) cross the output
// hook, not forward; the hold's output chain holds them alike. The pod reaches the host at once
// after the answer and not before the lookup; over IPv4 and IPv6.
func TestDomainNamesHostNetworkResolver(t *testing.T) {
	n := startDomainNodeResolving(t, true, []uint16{8080},
		model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{DomainNames: []string{"*.example.test"}, Ports: []model.Port{{First: 8080, Last: 8080}}}})
	for i, family := range []string{"v4", "v6"} {
		t.Run(family, func(t *testing.T) {
			dst := n.ext.Addrs[i]
			if n.reach(dst, 8080) {
				t.Fatalf("%s reached before any lookup", dst)
			}
			if got := fqdntest.Lookup(t, n.pod.NetNS, n.resolver[i], "www.example.test", i == 1); len(got) != 1 || got[0] != dst {
				t.Fatalf("answer %v from the node's resolver %s, want %s", got, n.resolver[i], dst)
			}
			if !n.reach(dst, 8080) {
				t.Fatalf("%s not reached at once after the node's answer; cached: %v", dst, n.domains.observer.Entries("*.example.test"))
			}
		})
	}
	if s := n.domains.observer.Stats(); s.Answers != 2 || s.ReleaseErrors != 0 {
		t.Errorf("observer stats %+v, want 2 answers, each held and sent on once", s)
	}
	n.checkErrs(t)
}

// TestDomainNamesOverTCP: an answer over TCP (the test's DNS server answering on TCP port 53,
// the message whole in one segment) is seen and its addresses allowed. TCP answers are copied,
// not held: the pod may connect before the commit, so the test waits for the address; over
// IPv4 and IPv6.
func TestDomainNamesOverTCP(t *testing.T) {
	n := startDomainNode(t, []uint16{8080},
		model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{Ports: []model.Port{{First: 53, Last: 53}}}},
		model.Rule{Action: model.ActionAllow, Protocol: model.ProtocolTCP,
			Destination: model.Peer{DomainNames: []string{"*.example.test"}, Ports: []model.Port{{First: 8080, Last: 8080}}}})
	fqdntest.ServeTCP(t, n.ext.NetNS, &fqdntest.Zone{TTL: 30, Addrs: map[string][]netip.Addr{"www.example.test": n.ext.Addrs}}, n.ext.Addrs...)
	for i, family := range []string{"v4", "v6"} {
		t.Run(family, func(t *testing.T) {
			dst := n.ext.Addrs[i]
			if n.reach(dst, 8080) {
				t.Fatalf("%s reached before any lookup", dst)
			}
			if got := fqdntest.LookupTCP(t, n.pod.NetNS, dst, "www.example.test", i == 1); len(got) != 1 || got[0] != dst {
				t.Fatalf("TCP answer %v, want %s", got, dst)
			}
			waitFor(t, 2*time.Second, "reached after the TCP answer", func() bool { return n.reach(dst, 8080) })
		})
	}
	if s := n.domains.observer.Stats(); s.Answers != 2 || s.TCPPartial != 0 {
		t.Errorf("observer stats %+v, want the 2 TCP answers observed whole", s)
	}
	n.checkErrs(t)
}
