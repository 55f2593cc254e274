package nft_test

import (
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// FuzzApply: the fuzz input drives a random cluster (wideCluster) through a graph into a
// Dataplane, one flush and one apply a step, as TestIncrementalMatchesFresh does: pods of both
// families on two nodes, running or not, some sharing an address, named ports of every port
// protocol, routes to workload and other interfaces, namespace relabels, a tier of its own,
// NetworkPolicies and cluster policies of every action over selectors (invalid ones too), CIDRs
// of both families with excepts, port ranges, named ports, negated protocols and ports, ICMP and
// source-port matches. Every apply succeeds, no policy is rejected for its cost, and after every
// step the table equals a fresh Dataplane's for the resulting cluster (but for the workload
// prefixes checked, onlyPrefixChecks). An input whose first choice is 0 (one in ten), run as
// root, commits every step to a kernel, in a network namespace of its own, and the kernel then
// holds each table as committed (Resync finds no drift).
func FuzzApply(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := range 6 {
		b := make([]byte, 96<<(i%3))
		rng.Read(b)
		b[0] = byte(i) // 0: on the kernel
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c := testenv.NewChoices(in)
		kernel := c.Intn(10) == 0 && os.Geteuid() == 0
		cfg := nft.Config{WorkloadPrefixes: []string{"veth"}, Rejected: func(k model.PolicyKey, reason string) {
			t.Errorf("policy %s rejected: %s", k, reason)
		}}
		gen := wideCluster(c)
		dp := nft.NewOffline(cfg)
		if kernel {
			kcfg := cfg
			kcfg.NetNSFD = anonNetns(t)
			var err error
			if dp, err = nft.New(kcfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { dp.Close() })
		}
		runCluster(t, gen, 1+c.Intn(12), dp, kernel, cfg)
	})
}

// wideCluster is a generator of small clusters whose every part is drawn from c: three
// namespaces; pods on nodes a (local) and b with addresses of one or both families, now and
// then another pod's; policies and changes as FuzzApply lists them.
func wideCluster(c testenv.Chooser) *clusterGen {
	pick := func(ss ...string) string { return ss[c.Intn(len(ss))] }
	nss := []string{"x", "y", "z"}
	gen := &clusterGen{rng: c, cluster: newCluster()}
	nsLabels := func(ns string) model.Namespace {
		return model.Namespace{Name: ns, Labels: map[string]string{"ns": ns, "team": pick("red", "blue")}}
	}
	for _, ns := range nss {
		gen.namespaces[ns] = nsLabels(ns)
	}
	labels := func() model.Labels {
		m := map[string]string{"pod": pick("a", "b", "c")}
		if c.Intn(2) == 0 {
			m["role"] = pick("x", "y")
		}
		return model.LabelsOf(m)
	}
	podN := 0
	gen.newPod = func() model.Endpoint {
		podN++
		e := model.Endpoint{Key: model.EndpointKey{Namespace: pick(nss...), Name: fmt.Sprint("p", podN)},
			Node: pick("a", "b"), Labels: labels(), Running: c.Intn(4) > 0, Created: time.Unix(int64(c.Intn(3)), 0)}
		v4, v6 := netip.AddrFrom4([4]byte{10, 0, 0, byte(podN)}), netip.AddrFrom16([16]byte{0xfd, 15: byte(podN)})
		switch c.Intn(4) {
		case 0:
			e.Addrs = []netip.Addr{v4}
		case 1:
			e.Addrs = []netip.Addr{v6}
		default:
			e.Addrs = []netip.Addr{v4, v6}
		}
		if len(gen.pods) > 0 && c.Intn(8) == 0 { // another pod's address
			keys := gen.podKeys()
			o := gen.pods[keys[c.Intn(len(keys))]]
			e.Addrs = o.Addrs[:1+c.Intn(len(o.Addrs))]
		}
		for k := c.Intn(3); k > 0; k-- {
			e.NamedPorts = append(e.NamedPorts, model.NamedPort{Name: pick("web", "dns", "metrics"),
				Protocol: []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP}[c.Intn(3)],
				Port:     []uint16{80, 81, 53, 8080}[c.Intn(4)]})
		}
		return e
	}
	gen.relabel = func(e model.Endpoint) model.Endpoint {
		e.Labels = labels()
		switch c.Intn(4) { // and starts or stops, or moves, now and then
		case 0:
			e.Running = !e.Running
		case 1:
			e.Node = pick("a", "b")
		}
		return e
	}
	gen.newPolicy = func(i int) model.Policy { return widePolicy(c, nss, i) }
	gen.more = []func() (string, []model.Update){
		func() (string, []model.Update) { // a route to a pod address: its interface, for anti-spoofing
			if len(gen.pods) == 0 {
				return "no pod to route to", nil
			}
			keys := gen.podKeys()
			e := gen.pods[keys[c.Intn(len(keys))]]
			a := e.Addrs[c.Intn(len(e.Addrs))]
			dst := netip.PrefixFrom(a, a.BitLen())
			if c.Intn(3) == 0 {
				delete(gen.routes, dst)
				return "no route to " + a.String(), []model.Update{model.RouteDeleted{Dst: dst}}
			}
			gen.routes[dst] = pick("veth0", "veth1", "veth2", "eth0")
			return "route " + a.String() + " via " + gen.routes[dst], []model.Update{model.RouteSet{Dst: dst, Interface: gen.routes[dst]}}
		},
		func() (string, []model.Update) {
			ns := nsLabels(pick(nss...))
			gen.namespaces[ns.Name] = ns
			return "relabel namespace " + ns.Name, []model.Update{model.NamespaceSet{Namespace: ns}}
		},
		func() (string, []model.Update) { // a tier of its own, which cluster policies may name
			if c.Intn(3) == 0 {
				delete(gen.tiers, "own")
				return "delete tier own", []model.Update{model.TierDeleted{Name: "own"}}
			}
			tier := model.Tier{Name: "own", Order: []float64{50, 500, 5000}[c.Intn(3)],
				DefaultAction: []model.Action{model.ActionPass, model.ActionDeny, model.ActionAllow}[c.Intn(3)]}
			gen.tiers[tier.Name] = tier
			return fmt.Sprintf("tier own %+v", tier), []model.Update{model.TierSet{Tier: tier}}
		},
	}
	for k := c.Intn(6); k > 0; k-- {
		e := gen.newPod()
		gen.pods[e.Key] = e
	}
	for k := c.Intn(4); k > 0; k-- {
		p := gen.newPolicy(c.Intn(6))
		gen.policies[p.Key] = p
	}
	return gen
}

// widePolicy is policy i of six: a NetworkPolicy (a namespace's, in the NetworkPolicy tier,
// rules that allow) or a cluster policy (in the admin, baseline or own tier, any action), over
// rules drawn from c; now and then more rules than a listed group may have.
func widePolicy(c testenv.Chooser, nss []string, i int) model.Policy {
	pick := func(ss ...string) string { return ss[c.Intn(len(ss))] }
	selector := func() string {
		return pick("all()", "pod == 'a'", "pod in {'a', 'b'}", "has(role)", "!has(role)", "pod != 'c'",
			"pod == 'a' && role == 'x'", "pod == 'none'", "((")
	}
	p := model.Policy{Key: model.PolicyKey{Kind: "NetworkPolicy", Namespace: pick(nss...), Name: fmt.Sprint("p", i)},
		Tier: model.TierNetworkPolicy, Selector: selector()}
	p.Namespace = p.Key.Namespace
	cluster := c.Intn(3) == 0
	if cluster {
		p.Key = model.PolicyKey{Kind: "ClusterPolicy", Name: fmt.Sprint("c", i)}
		p.Namespace, p.Tier, p.Order = "", pick(model.TierAdmin, model.TierBaseline, "own"), float64(c.Intn(3))
	}
	switch c.Intn(3) {
	case 0:
		p.ApplyIngress = true
	case 1:
		p.ApplyEgress = true
	default:
		p.ApplyIngress, p.ApplyEgress = true, true
	}
	prefix := func() netip.Prefix {
		if c.Intn(3) == 0 { // around the pods' addresses, at any length
			a := netip.AddrFrom4([4]byte{10, 0, 0, byte(c.Intn(16))})
			if c.Intn(2) == 0 {
				a = netip.AddrFrom16([16]byte{0xfd, 15: byte(c.Intn(16))})
			}
			p, _ := a.Prefix(c.Intn(a.BitLen() + 1))
			return p
		}
		return netip.MustParsePrefix(pick("10.0.0.0/28", "10.0.0.4/30", "10.0.0.0/8", "0.0.0.0/0", "10.0.0.5/32",
			"fd00::/120", "fd00::4/126", "::/0", "fd00::5/128"))
	}
	prefixes := func(n int) []netip.Prefix {
		var out []netip.Prefix
		for ; n > 0; n-- {
			out = append(out, prefix())
		}
		return out
	}
	ports := func() []model.Port {
		var out []model.Port
		for k := c.Intn(3); k > 0; k-- {
			if c.Intn(3) == 0 {
				out = append(out, model.Port{Name: pick("web", "dns", "metrics", "none")})
				continue
			}
			out = append(out, []model.Port{{First: 80, Last: 80}, {First: 53, Last: 53}, {First: 8080, Last: 8080},
				{First: 1000, Last: 2000}, {First: 0, Last: 65535}, {First: 65535, Last: 65535}}[c.Intn(6)])
		}
		return out
	}
	protos := []model.Protocol{0, model.ProtocolTCP, model.ProtocolUDP, model.ProtocolSCTP, model.ProtocolICMP, model.ProtocolICMPv6, 47}
	rule := func(dir model.Direction) model.Rule {
		r := model.Rule{Action: model.ActionAllow, Protocol: protos[c.Intn(len(protos))]}
		var peer model.Peer
		switch c.Intn(5) {
		case 1:
			peer.Selector = selector()
		case 2:
			peer.NamespaceSelector = pick("all()", "ns == 'x'", "team == 'red'", "has(team)")
			if c.Intn(2) == 0 {
				peer.Selector = selector()
			}
		case 3:
			peer.Nets, peer.NotNets = prefixes(1+c.Intn(2)), prefixes(c.Intn(3))
		case 4:
			peer.Selector, peer.Nets = selector(), prefixes(1)
		}
		// the packet's destination port, and source port; ingress: the peer is the source
		dst, src := model.Peer{Ports: ports()}, model.Peer{}
		if cluster {
			r.Action = []model.Action{model.ActionAllow, model.ActionDeny, model.ActionPass, model.ActionLog}[c.Intn(4)]
			if c.Intn(4) == 0 {
				r.NotProtocol = protos[c.Intn(len(protos))]
			}
			r.IPVersion = []uint8{0, 0, 4, 6}[c.Intn(4)]
			if c.Intn(4) == 0 {
				dst.NotPorts = ports()
			}
			if c.Intn(8) == 0 {
				r.ICMP = &model.ICMPMatch{Type: 8}
			}
			if c.Intn(8) == 0 {
				src.Ports = ports()
			}
		}
		if dir == model.Ingress {
			peer.Ports = src.Ports
			r.Source, r.Destination = peer, dst
		} else {
			peer.Ports, peer.NotPorts = dst.Ports, dst.NotPorts
			r.Source, r.Destination = src, peer
		}
		return r
	}
	rules := func(dir model.Direction) []model.Rule {
		n := c.Intn(4)
		if c.Intn(4) == 0 {
			n += 8
		}
		var out []model.Rule
		for ; n > 0; n-- {
			out = append(out, rule(dir))
		}
		return out
	}
	if p.ApplyIngress {
		p.IngressRules = rules(model.Ingress)
	}
	if p.ApplyEgress {
		p.EgressRules = rules(model.Egress)
	}
	return p
}

// anonNetns makes a network namespace that nothing names and returns a handle of it: the
// namespace lives while a handle is open, so it ends with the test, or with the process if
// that dies first — a fuzzing worker stopped or crashed in the middle of an input leaves
// nothing behind. The root namespace is not touched.
func anonNetns(t *testing.T) int {
	t.Helper()
	type result struct {
		fd  int
		err error
	}
	c := make(chan result)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, moved to the new namespace, ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			c <- result{-1, fmt.Errorf("unshare: %w", err)}
			return
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		c <- result{fd, err}
	}()
	r := <-c
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	return r.fd
}
