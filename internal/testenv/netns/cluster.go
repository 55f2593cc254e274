package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// Config describes the cluster New builds.
type Config struct {
	// Nodes are the node names, e.g. {"a", "b"}. Node i (0-based) gets the pod CIDRs
	// 10.244.<i>.0/24 and fd00:10:244:<i>::/64 and the underlay addresses 172.31.0.<i+1>/24 and
	// fd00:172:31::<i+1>/64.
	Nodes []string
	// External adds one host namespace on the underlay (172.31.0.200, fd00:172:31::200) that is
	// not a node and routes every pod CIDR via its node: a peer for ipBlock tests.
	External bool
	// Layout is how pods attach to their node: PTP (the zero value: one veth and host route per
	// pod) or Bridge (every pod of a node on one Linux bridge, as flannel and the bridge plugin
	// lay them out).
	Layout Layout
}

// Layout is how a node's pods attach to it.
type Layout uint8

const (
	// PTP gives each pod a veth whose node side carries the gateway 169.254.1.1/fe80::1 and a
	// host route per pod address (ptp, kindnet, Calico).
	PTP Layout = iota
	// Bridge puts every pod's node-side veth on the node's bridge cni0, which holds the gateway
	// 10.244.<i>.1/24 and fd00:10:244:<i>::1/64; pods get /24 and /64 addresses and no host
	// route exists (flannel, the bridge plugin). The node's bridge-nf-call-iptables and
	// -ip6tables are 1, as kube-proxy requires of such nodes.
	Bridge
)

// String is the layout's name as LayoutFromEnv reads it.
func (l Layout) String() string {
	if l == Bridge {
		return "bridge"
	}
	return "ptp"
}

// LayoutEnv names the environment variable LayoutFromEnv reads.
const LayoutEnv = "NFTPOLICY_CNI"

// LayoutFromEnv returns the layout NFTPOLICY_CNI names: "bridge" or "ptp" (also when unset).
func LayoutFromEnv() (Layout, error) {
	switch v := os.Getenv(LayoutEnv); v {
	case "", "ptp":
		return PTP, nil
	case "bridge":
		return Bridge, nil
	default:
		return PTP, fmt.Errorf("%s=%q: want ptp or bridge", LayoutEnv, v)
	}
}

// Node is a node: a network namespace that routes for its pods.
type Node struct {
	Name     string
	NetNS    string
	Index    int
	PodCIDRs []netip.Prefix // v4 then v6
	Underlay []netip.Addr   // v4 then v6, on the node's eth0
}

// FD opens the node's network namespace; the caller closes the descriptor.
func (n *Node) FD() (int, error) {
	fd, err := unix.Open(nsPath(n.NetNS), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("opening network namespace of node %s: %w", n.Name, err)
	}
	return fd, nil
}

// Pod is a pod: a network namespace attached to its node by a veth pair.
type Pod struct {
	Namespace string
	Name      string
	Node      string
	NetNS     string
	HostIface string       // the node-side veth
	Addrs     []netip.Addr // v4 first, then v6
}

// Key is "namespace/name", the key of probe matrices and truth tables.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// IP returns the pod's address of the family (invalid when it has none).
func (p *Pod) IP(is6 bool) netip.Addr {
	for _, a := range p.Addrs {
		if a.Is6() == is6 {
			return a
		}
	}
	return netip.Addr{}
}

// Host is a plain host namespace on the underlay (the external peer).
type Host struct {
	NetNS string
	Addrs []netip.Addr // v4 then v6
}

// Cluster is a set of node namespaces joined by an underlay bridge, with their pods, servers and
// forwarders. All methods are safe for concurrent use.
type Cluster struct {
	cfg      Config
	underlay string
	nodes    []*Node
	byName   map[string]*Node
	external *Host

	mu         sync.Mutex
	namespaces []string          // every namespace created or being created, in creation order
	pods       map[*Pod]bool     // live pods
	hostSeq    int               // host-side interface names
	nextHost   map[string]int    // next pod host number per node
	usedHost   map[string][]bool // pod host numbers in use per node
	services   map[serviceKey]*service
	forwards   []*service
	closed     bool
	closeErr   error
	closeOnce  sync.Once
}

const (
	uplink         = "eth0"
	bridge         = "br0"
	podBridge      = "cni0" // the node's pod bridge in the Bridge layout
	gateway4       = "169.254.1.1"
	gateway6       = "fe80::1"
	externalHostID = 200
	setupTimeout   = 30 * time.Second
)

// New builds the cluster: the underlay namespace with its bridge, one namespace per node joined to
// it, the external host when asked for, and the routes between nodes' pod CIDRs. ctx bounds the
// setup only; the cluster lives until Close. On error everything made so far is removed.
func New(ctx context.Context, cfg Config) (*Cluster, error) {
	c, err := newCluster(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.setup(ctx); err != nil {
		if cerr := c.Close(); cerr != nil {
			err = fmt.Errorf("%w (and cleaning up: %v)", err, cerr)
		}
		return nil, err
	}
	return c, nil
}

// NewForTest is New for tests: it fails the test without root or `ip`, and registers Close with
// tb.Cleanup before creating anything, so a failing or panicking test leaves nothing behind.
func NewForTest(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	testenv.RequireRoot(tb)
	testenv.RequireCommand(tb, "ip")
	c, err := newCluster(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("closing the netns cluster: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := c.setup(ctx); err != nil {
		tb.Fatalf("building the netns cluster: %v", err)
	}
	return c
}

func newCluster(cfg Config) (*Cluster, error) {
	if len(cfg.Nodes) == 0 || len(cfg.Nodes) > 199 {
		return nil, fmt.Errorf("netns cluster: need 1 to 199 nodes, got %d", len(cfg.Nodes))
	}
	c := &Cluster{
		cfg:      cfg,
		underlay: testenv.UniqueName("ul"),
		byName:   map[string]*Node{},
		pods:     map[*Pod]bool{},
		nextHost: map[string]int{},
		usedHost: map[string][]bool{},
		services: map[serviceKey]*service{},
	}
	for i, name := range cfg.Nodes {
		if name == "" || strings.ContainsAny(name, "/ \t\n") {
			return nil, fmt.Errorf("netns cluster: bad node name %q", name)
		}
		if c.byName[name] != nil {
			return nil, fmt.Errorf("netns cluster: node %q twice", name)
		}
		n := &Node{
			Name:  name,
			NetNS: testenv.UniqueName("n"),
			Index: i,
			PodCIDRs: []netip.Prefix{
				netip.MustParsePrefix(fmt.Sprintf("10.244.%d.0/24", i)),
				netip.MustParsePrefix(fmt.Sprintf("fd00:10:244:%d::/64", i)),
			},
			Underlay: underlayAddrs(i + 1),
		}
		c.nodes = append(c.nodes, n)
		c.byName[name] = n
		c.usedHost[name] = make([]bool, 256)
		c.nextHost[name] = 2
	}
	if cfg.External {
		c.external = &Host{NetNS: testenv.UniqueName("ext"), Addrs: underlayAddrs(externalHostID)}
	}
	return c, nil
}

func underlayAddrs(id int) []netip.Addr {
	return []netip.Addr{
		netip.MustParseAddr(fmt.Sprintf("172.31.0.%d", id)),
		netip.MustParseAddr(fmt.Sprintf("fd00:172:31::%d", id)),
	}
}

// hosts are the namespaces on the underlay besides it: the nodes, then the external host.
func (c *Cluster) hosts() (names []string) {
	for _, n := range c.nodes {
		names = append(names, n.NetNS)
	}
	if c.external != nil {
		names = append(names, c.external.NetNS)
	}
	return names
}

func (c *Cluster) setup(ctx context.Context) error {
	all := append([]string{c.underlay}, c.hosts()...)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("netns cluster: closed")
	}
	c.namespaces = append(c.namespaces, all...)
	c.mu.Unlock()

	adds := make([]string, len(all))
	for i, n := range all {
		adds[i] = "netns add " + n
	}
	if err := ipBatch(ctx, "", false, adds...); err != nil {
		return fmt.Errorf("creating namespaces: %w", err)
	}
	for _, n := range all {
		if err := sysctls(n, baseSysctls...); err != nil {
			return err
		}
	}
	for _, n := range c.nodes {
		if err := sysctls(n.NetNS, routerSysctls...); err != nil {
			return err
		}
	}
	if c.cfg.Layout == Bridge {
		for _, n := range c.nodes {
			if err := c.setupPodBridge(ctx, n); err != nil {
				return err
			}
		}
	}

	// The underlay: a bridge with one port per host namespace, whose other end is that host's eth0.
	ul := []string{
		"link set lo up",
		"link add " + bridge + " type bridge mcast_snooping 0",
		"link set " + bridge + " up",
	}
	ports := []string{}
	for i, h := range c.hosts() {
		port := fmt.Sprintf("p%d", i)
		ports = append(ports, port)
		ul = append(ul,
			fmt.Sprintf("link add %s type veth peer name %s netns %s", port, uplink, h),
			fmt.Sprintf("link set %s master %s", port, bridge),
			fmt.Sprintf("link set %s up", port),
		)
	}
	if err := ipBatch(ctx, c.underlay, false, ul...); err != nil {
		return fmt.Errorf("building the underlay: %w", err)
	}

	// Each host: its underlay addresses, then routes to the other nodes' pod CIDRs.
	for _, n := range c.nodes {
		lines := hostLines(n.Underlay)
		for _, m := range c.nodes {
			if m != n {
				lines = append(lines, podCIDRRoutes(m)...)
			}
		}
		if err := ipBatch(ctx, n.NetNS, false, lines...); err != nil {
			return fmt.Errorf("configuring node %s: %w", n.Name, err)
		}
	}
	if c.external != nil {
		lines := hostLines(c.external.Addrs)
		for _, m := range c.nodes {
			lines = append(lines, podCIDRRoutes(m)...)
		}
		if err := ipBatch(ctx, c.external.NetNS, false, lines...); err != nil {
			return fmt.Errorf("configuring the external host: %w", err)
		}
	}
	if err := waitRunning(ctx, c.underlay, append([]string{bridge}, ports...)...); err != nil {
		return err
	}
	for _, h := range c.hosts() {
		if err := waitRunning(ctx, h, uplink); err != nil {
			return err
		}
	}
	return nil
}

// setupPodBridge makes the node's pod bridge with the gateway addresses and turns on the bridge's
// netfilter calls (writing the values a new namespace already has on Linux ≥ 5.3, so the harness
// does not depend on that default).
func (c *Cluster) setupPodBridge(ctx context.Context, n *Node) error {
	err := ipBatch(ctx, n.NetNS, false,
		"link add "+podBridge+" type bridge",
		fmt.Sprintf("addr add %s/24 dev %s", n.Gateway(false), podBridge),
		fmt.Sprintf("addr add %s/64 dev %s nodad", n.Gateway(true), podBridge),
		"link set "+podBridge+" up",
	)
	if err != nil {
		return fmt.Errorf("making the pod bridge of node %s: %w", n.Name, err)
	}
	return sysctls(n.NetNS, bridgeSysctls...)
}

// Gateway is the pods' gateway address of the family in the Bridge layout: host number 1 of the
// node's pod CIDR, on its bridge.
func (n *Node) Gateway(is6 bool) netip.Addr {
	if is6 {
		return n.PodCIDRs[1].Addr().Next()
	}
	return n.PodCIDRs[0].Addr().Next()
}

// PodBridge is the name of each node's pod bridge in the Bridge layout.
const PodBridge = podBridge

// Layout is the cluster's pod layout.
func (c *Cluster) Layout() Layout { return c.cfg.Layout }

func hostLines(addrs []netip.Addr) []string {
	return []string{
		"link set lo up",
		"link set " + uplink + " up",
		fmt.Sprintf("addr add %s/24 dev %s", addrs[0], uplink),
		fmt.Sprintf("addr add %s/64 dev %s nodad", addrs[1], uplink),
	}
}

func podCIDRRoutes(via *Node) []string {
	return []string{
		fmt.Sprintf("route add %s via %s dev %s", via.PodCIDRs[0], via.Underlay[0], uplink),
		fmt.Sprintf("route add %s via %s dev %s", via.PodCIDRs[1], via.Underlay[1], uplink),
	}
}

// Node returns the named node, or nil.
func (c *Cluster) Node(name string) *Node { return c.byName[name] }

// Nodes returns the nodes in Config order.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// External returns the external host, nil unless Config.External.
func (c *Cluster) External() *Host { return c.external }

// AddPod creates a pod namespace attached to the node as the cluster's Layout says. PTP: eth0
// holds the pod's /32 and /128 (nodad), its default routes go via 169.254.1.1 (on-link) and
// fe80::1, which the node-side veth carries; the node routes the pod's two addresses to that
// veth. Bridge: the node-side veth is a port of the node's bridge, eth0 holds the pod's /24 and
// /64 (nodad) and its default routes go via the bridge's addresses. It returns once both ends of
// the veth are running.
func (c *Cluster) AddPod(node, namespace, name string) (*Pod, error) {
	n := c.Node(node)
	if n == nil {
		return nil, fmt.Errorf("adding pod %s/%s: no node %q", namespace, name, node)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, fmt.Errorf("adding pod %s/%s: cluster closed", namespace, name)
	}
	host, ok := c.allocHost(node)
	if !ok {
		c.mu.Unlock()
		return nil, fmt.Errorf("adding pod %s/%s: node %s has no free pod address", namespace, name, node)
	}
	c.hostSeq++
	p := &Pod{
		Namespace: namespace,
		Name:      name,
		Node:      node,
		NetNS:     testenv.UniqueName("p"),
		HostIface: fmt.Sprintf("nftp%x", c.hostSeq),
		Addrs: []netip.Addr{
			netip.MustParseAddr(fmt.Sprintf("10.244.%d.%d", n.Index, host)),
			netip.MustParseAddr(fmt.Sprintf("fd00:10:244:%d::%d", n.Index, host)),
		},
	}
	c.namespaces = append(c.namespaces, p.NetNS)
	c.pods[p] = true
	c.mu.Unlock()

	if err := c.plumb(ctx, n, p); err != nil {
		if derr := c.DeletePod(p); derr != nil {
			err = fmt.Errorf("%w (and removing it: %v)", err, derr)
		}
		return nil, fmt.Errorf("adding pod %s/%s on node %s: %w", namespace, name, node, err)
	}
	return p, nil
}

// allocHost picks the next free host number of the node (2..254); c.mu is held.
func (c *Cluster) allocHost(node string) (int, bool) {
	used := c.usedHost[node]
	for i := 0; i < 253; i++ {
		h := 2 + (c.nextHost[node]-2+i)%253
		if !used[h] {
			used[h] = true
			c.nextHost[node] = h + 1
			return h, true
		}
	}
	return 0, false
}

func (c *Cluster) plumb(ctx context.Context, n *Node, p *Pod) error {
	if err := ipBatch(ctx, "", false, "netns add "+p.NetNS); err != nil {
		return err
	}
	if err := sysctls(p.NetNS, baseSysctls...); err != nil {
		return err
	}
	if c.cfg.Layout == Bridge {
		return c.plumbBridged(ctx, n, p)
	}
	err := ipBatch(ctx, n.NetNS, false,
		fmt.Sprintf("link add %s type veth peer name eth0 netns %s", p.HostIface, p.NetNS),
		fmt.Sprintf("addr add %s/32 dev %s", gateway4, p.HostIface),
		fmt.Sprintf("addr add %s/64 dev %s nodad", gateway6, p.HostIface),
		fmt.Sprintf("link set %s up", p.HostIface),
		fmt.Sprintf("route add %s/32 dev %s scope link", p.Addrs[0], p.HostIface),
		fmt.Sprintf("route add %s/128 dev %s", p.Addrs[1], p.HostIface),
	)
	if err != nil {
		return err
	}
	err = ipBatch(ctx, p.NetNS, false,
		"link set lo up",
		"link set eth0 up",
		fmt.Sprintf("addr add %s/32 dev eth0", p.Addrs[0]),
		fmt.Sprintf("addr add %s/128 dev eth0 nodad", p.Addrs[1]),
		fmt.Sprintf("route add 0.0.0.0/0 via %s dev eth0 onlink", gateway4),
		fmt.Sprintf("route add ::/0 via %s dev eth0", gateway6),
	)
	if err != nil {
		return err
	}
	return waitPodLinks(ctx, n, p)
}

func (c *Cluster) plumbBridged(ctx context.Context, n *Node, p *Pod) error {
	err := ipBatch(ctx, n.NetNS, false,
		fmt.Sprintf("link add %s type veth peer name eth0 netns %s", p.HostIface, p.NetNS),
		fmt.Sprintf("link set %s master %s", p.HostIface, podBridge),
		fmt.Sprintf("link set %s up", p.HostIface),
	)
	if err != nil {
		return err
	}
	err = ipBatch(ctx, p.NetNS, false,
		"link set lo up",
		"link set eth0 up",
		fmt.Sprintf("addr add %s/24 dev eth0", p.Addrs[0]),
		fmt.Sprintf("addr add %s/64 dev eth0 nodad", p.Addrs[1]),
		fmt.Sprintf("route add 0.0.0.0/0 via %s dev eth0", n.Gateway(false)),
		fmt.Sprintf("route add ::/0 via %s dev eth0", n.Gateway(true)),
	)
	if err != nil {
		return err
	}
	return waitPodLinks(ctx, n, p)
}

// waitPodLinks returns once both ends of the pod's veth are running.
func waitPodLinks(ctx context.Context, n *Node, p *Pod) error {
	if err := waitRunning(ctx, n.NetNS, p.HostIface); err != nil {
		return err
	}
	return waitRunning(ctx, p.NetNS, "eth0")
}

// DeletePod stops the pod's servers and removes its veth and namespace (with them its node routes).
func (c *Cluster) DeletePod(p *Pod) error {
	c.mu.Lock()
	if !c.pods[p] {
		c.mu.Unlock()
		return nil
	}
	delete(c.pods, p)
	n := c.byName[p.Node]
	var stop []*service
	for k, s := range c.services {
		if k.netns == p.NetNS {
			stop = append(stop, s)
			delete(c.services, k)
		}
	}
	c.mu.Unlock()
	for _, s := range stop {
		s.stop()
	}

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	// Deleting the veth first takes the node's routes away synchronously; the namespace itself is
	// torn down by the kernel asynchronously.
	_ = ipBatch(ctx, n.NetNS, true, "link del "+p.HostIface)
	err := deleteNamespaces(ctx, []string{p.NetNS})

	c.mu.Lock()
	for i, name := range c.namespaces {
		if name == p.NetNS {
			c.namespaces = append(c.namespaces[:i], c.namespaces[i+1:]...)
			break
		}
	}
	if a := p.IP(false); a.IsValid() {
		c.usedHost[p.Node][a.As4()[3]] = false
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("deleting pod %s: %w", p.Key(), err)
	}
	return nil
}

// Close stops every server and forwarder and removes every namespace of the cluster, pods'
// included. It is idempotent; later calls return the first call's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		var stop []*service
		for _, s := range c.services {
			stop = append(stop, s)
		}
		stop = append(stop, c.forwards...)
		c.services, c.forwards = nil, nil
		names := append([]string(nil), c.namespaces...)
		c.mu.Unlock()
		for _, s := range stop {
			s.stop()
		}
		// Pods first (newest first), then hosts, then the underlay.
		for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
			names[i], names[j] = names[j], names[i]
		}
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		c.closeErr = deleteNamespaces(ctx, names)
	})
	return c.closeErr
}
