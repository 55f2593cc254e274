// Package netns is the local cluster harness of network namespaces: nodes and pods as namespaces
// routed like a ptp CNI, in-process TCP/UDP servers and probes, and upstream-style truth tables.
// The nft traffic tests, the e2e tests, the benchmarks and `make demo` use it (docs/design.md §10
// names the tests); in the data flow it stands where the kernel of a real node stands: internal/nft
// programs a node namespace (Node.FD) and the prober checks real packets. Tests that need one
// namespace, or lay out their own topology, take a bare one (NewBare: nothing but its loopback)
// and run nft inside a namespace with Nft.
//
// # Topology
//
//	underlay netns "nftp-ul…": bridge br0 (no STP, no multicast snooping), ports p0 p1 … (veth)
//	        │ p0                     │ p1                       │ pN (only with Config.External)
//	        │                        │                          │
//	  eth0 172.31.0.1/24       eth0 172.31.0.2/24         eth0 172.31.0.200/24
//	       fd00:172:31::1/64        fd00:172:31::2/64          fd00:172:31::200/64
//	  node "a" netns "nftp-n…" node "b" netns "nftp-n…"   external host netns "nftp-ext…"
//	  ip_forward=1, v6 fwd=1   (same, mirrored)           routes every pod CIDR via its node
//	  10.244.1.0/24 via 172.31.0.2
//	  fd00:10:244:1::/64 via fd00:172:31::2
//	  10.244.0.2/32 dev nftp1, fd00:10:244::2/128 dev nftp1   (one pair of routes per pod)
//	        │ nftp1: 169.254.1.1/32, fe80::1/64 nodad   (node side of the veth, "nftp<hex>")
//	        │
//	        │ eth0: 10.244.0.2/32, fd00:10:244::2/128 nodad
//	  pod netns "nftp-p…": default via 169.254.1.1 dev eth0 onlink, default via fe80::1 dev eth0
//
// Config.Layout Bridge (NFTPOLICY_CNI=bridge through LayoutFromEnv) lays a node's pods out as
// flannel and the bridge plugin do: the node holds a bridge cni0 with 10.244.<i>.1/24 and
// fd00:10:244:<i>::1/64, each pod's node-side veth is a port of it (no address, no host route),
// the pod's eth0 holds its /24 and /64 with default routes via the bridge's addresses, and the
// node's net.bridge.bridge-nf-call-iptables and -ip6tables are 1. Traffic between two pods of one
// node is bridged, never routed; cross-node traffic is routed over the underlay as above.
//
// # Addressing
//
// Node i (0-based, Config order) owns the pod CIDRs 10.244.<i>.0/24 and fd00:10:244:<i>::/64
// and the underlay addresses 172.31.0.<i+1>/24 and fd00:172:31::<i+1>/64 on its eth0. Pods get
// host numbers 2…254 of their node's CIDRs, the same digits in both families (10.244.0.15 and
// fd00:10:244::15: IPv6 groups spell the IPv4 decimal numbers, as fd00:172:31::200 does); numbers of deleted pods are reused only after the others ran out. The
// external host is 172.31.0.200 and fd00:172:31::200. Every node routes the other nodes' pod
// CIDRs via their underlay addresses, so cross-node pod traffic is forwarded by both nodes (and
// traffic between two pods of one node by that node); there are no default routes outside pods.
// Underlay addresses live in private namespaces, so parallel clusters reuse them freely.
//
// # Invariants
//
//   - Nothing touches the root network namespace: links are created inside the namespaces (veth
//     peers are created directly in their target namespace), sysctls are written from a thread
//     switched into the namespace (Do). The root namespace is only used to dial Forward targets.
//   - Every namespace is named by testenv.UniqueName (prefix "nftp-"), so several clusters run in
//     one process and in parallel processes, and `make clean-netns` finds leftovers.
//   - Close removes every namespace (pods' included) after stopping servers and forwarders, and
//     is idempotent. NewForTest registers Close before creating anything, so a failing or
//     panicking test leaves nothing behind.
//   - In every namespace of a cluster, before its links exist: net.ipv6.conf.{default,all}.accept_dad=0 and
//     rp_filter=0 (IPv4 settings of a new namespace are inherited from the root's); lo is up.
//     Nodes forward both families. IPv6 addresses are added nodad, so nothing is tentative.
//   - AddPod and New return only once every veth they made is running (a new veth passes no
//     traffic until the kernel has brought it up asynchronously).
//   - Sockets of servers and probes are created inside their namespace (Do) and used from any
//     goroutine afterwards; Do never returns a thread to the scheduler in a foreign namespace.
//
// # Design
//
// Links, addresses and routes are made with one `ip -n NS -batch -` per namespace and step (an
// exec costs ~3 ms, far below the kernel's link bring-up), sysctls and waits in-process. Probes
// report blocked traffic as false (timeout, refusal, unreachable, local drop) and return an error
// only when the probe cannot be made; SCTP yields ErrNoSCTP because this kernel has no SCTP.
// TCP servers send a short reply on accept and the probe reads it, so both directions are
// proven; UDP servers echo and the probe resends every 100 ms until its timeout. A wildcard UDP
// server answers from the address the kernel picks, right for pods (one address per family);
// in a node, pass Serve the addresses. ProbeMatrix runs at most 32 probes at once, each holding
// a thread locked in its source namespace for up to its timeout.
//
// Forward lets an agent inside a node namespace reach an API server on the root namespace's
// loopback: the listener is made in the node namespace, the outbound connection in the root
// one (ordinary goroutines run there), bytes are copied both ways.
//
// Measured here (TestLifecycle log, `go test -count=1 -v -run TestLifecycle
// ./internal/testenv/netns/`): 10 pods in 65–100 ms; the whole package's tests take ~2 s.
package netns
