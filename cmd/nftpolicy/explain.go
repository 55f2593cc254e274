package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/explain"
	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// explainFlow explains one flow, offline from manifests (-f DIR) or from the live cluster
// (--kubeconfig, else in-cluster), through the agent's own graph and compiler (internal/explain).
func explainFlow(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy explain", flag.ContinueOnError)
	dir := fs.String("f", "", "directory of YAML manifests (Namespaces, Pods with status, NetworkPolicies, ClusterNetworkPolicies, Nodes; Calico's Tiers, GlobalNetworkPolicies, NetworkPolicies, GlobalNetworkSets, NetworkSets, HostEndpoints) instead of the live cluster")
	kubeconfig := fs.String("kubeconfig", e.getenv("KUBECONFIG"), "kubeconfig file (env KUBECONFIG); empty: in-cluster configuration")
	from := fs.String("from", "", "source: pod NAMESPACE/POD, node/NODE (the node itself, through its host endpoints) or an IP address")
	to := fs.String("to", "", "destination: pod NAMESPACE/POD, node/NODE[:PORT] or an IP address")
	port := fs.String("port", "", "PORT/PROTOCOL (80/tcp, 53/udp, 9000/sctp) or a protocol without port (icmp); with --to node/NODE:PORT, the protocol alone or nothing (tcp)")
	iface := fs.String("interface", "", "the interface of a node end the packet passes (default: that of the node's host endpoint, else any interface no host endpoint names); with --via, the one it enters the node by")
	via := fs.String("via", "", "node/NODE: the node that forwards the flow; adds its host endpoints' applyOnForward answer where the packet enters and leaves it")
	sport := fs.Uint("sport", 0, "source port of a TCP, UDP or SCTP flow (0: any port no rule names)")
	icmpType := fs.Uint("icmp-type", 8, "ICMP or ICMPv6 type of an icmp or icmpv6 flow (8: echo request; ICMPv6's is 128)")
	icmpCode := fs.Uint("icmp-code", 0, "ICMP or ICMPv6 code of an icmp or icmpv6 flow")
	ipv6 := fs.Bool("6", false, "use the pods' IPv6 addresses (with --to IP, its family decides)")
	failsafeIn := fs.String("failsafe-inbound-host-ports", nft.DefaultFailsafeIn, "the agent's --failsafe-inbound-host-ports: ports to a node that no host endpoint's policy blocks (none for no port)")
	failsafeOut := fs.String("failsafe-outbound-host-ports", nft.DefaultFailsafeOut, "the agent's --failsafe-outbound-host-ports: ports from a node that no host endpoint's policy blocks (none for no port)")
	output := fs.String("o", "text", "output: text or json")
	timeout := fs.Duration("timeout", 30*time.Second, "how long listing the live cluster may take")
	nodeSets := fs.String("node-sets", "", "this host is node NODE: read the addresses of its domainNames patterns, with the time each has left, from this kernel's table --table")
	table := fs.String("table", "nftpolicy", "with --node-sets: the inet nftables table of the node's agent")
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	dst, err := nodePort(*to, port)
	if err != nil {
		return err
	}
	if *from == "" || dst == "" || *port == "" {
		return usageErrorf("explain needs --from NAMESPACE/POD|node/NODE|IP, --to NAMESPACE/POD|node/NODE[:PORT]|IP and --port PORT/PROTOCOL")
	}
	if *output != "text" && *output != "json" {
		return usageErrorf("-o %q: want text or json", *output)
	}
	proto, portNum, err := parsePort(*port)
	if err != nil {
		return err
	}
	if *sport > 65535 || *icmpType > 255 || *icmpCode > 255 {
		return usageErrorf("--sport wants 0-65535, --icmp-type and --icmp-code 0-255")
	}
	fsIn, err := nft.ParseFailsafes(*failsafeIn)
	if err != nil {
		return usageErrorf("--failsafe-inbound-host-ports: %v", err)
	}
	fsOut, err := nft.ParseFailsafes(*failsafeOut)
	if err != nil {
		return usageErrorf("--failsafe-outbound-host-ports: %v", err)
	}
	var c *explain.Cluster
	if *dir != "" {
		var errs []error
		c, errs = explain.Load(*dir)
		for _, err := range errs {
			fmt.Fprintln(e.stderr, "nftpolicy: skipped:", err)
		}
	} else {
		rc, err := restConfig(*kubeconfig, true)
		if err != nil {
			return err
		}
		client, err := sync.NewClient(rc)
		if err != nil {
			return fmt.Errorf("creating the API client: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		if c, err = explain.Live(ctx, client); err != nil {
			return err
		}
	}
	c.SetFailsafes(fsIn, fsOut)
	if *nodeSets != "" {
		c.SetDomainSets(*nodeSets, kernelDomainSets(*table))
	}
	q := explain.Query{From: *from, To: dst, Interface: *iface, Via: *via, Proto: proto, Port: portNum, SrcPort: uint16(*sport), IPv6: *ipv6,
		ICMPType: uint8(*icmpType), ICMPCode: uint8(*icmpCode)}
	if proto == model.ProtocolICMPv6 && !explicit(fs, "icmp-type") {
		q.ICMPType = 128 // ICMPv6's echo request
	}
	r, err := c.Explain(q)
	if err != nil {
		return usageErrorf("%v", err)
	}
	for _, p := range c.Problems {
		fmt.Fprintln(e.stderr, "nftpolicy: problem:", p)
	}
	if *output == "json" {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteText(e.stdout)
}

// kernelDomainSets reads the domainNames sets of the inet table named table in this network
// namespace.
type kernelDomainSets string

func (t kernelDomainSets) Addresses(pattern string) ([]explain.CachedAddr, error) {
	els, err := fqdn.ReadElements(-1, string(t), pattern)
	if err != nil {
		return nil, err
	}
	out := make([]explain.CachedAddr, len(els))
	for i, el := range els {
		out[i] = explain.CachedAddr{Addr: el.Addr, Expires: el.Expires}
	}
	return out, nil
}

// nodePort reads --to node/NODE:PORT as node/NODE, and PORT into *port (with --port's protocol
// when it gives one alone; tcp when empty); any other --to is returned as it is.
func nodePort(to string, port *string) (string, error) {
	name, ok := strings.CutPrefix(to, "node/")
	node, num, found := strings.Cut(name, ":")
	switch {
	case !ok || !found:
		return to, nil
	case node == "" || num == "":
		return "", usageErrorf("--to %q: want node/NODE:PORT", to)
	case *port == "":
		*port = num + "/tcp"
	case !strings.ContainsAny(*port, "/0123456789"):
		*port = num + "/" + *port
	default:
		return "", usageErrorf("--to node/NODE:%s and --port %q: give the port once", num, *port)
	}
	return "node/" + node, nil
}

// parsePort reads PORT/PROTOCOL (the protocol defaults to TCP) or a protocol without ports.
// explicit reports whether flag name was given on the command line.
func explicit(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func parsePort(s string) (model.Protocol, uint16, error) {
	protos := map[string]model.Protocol{"tcp": model.ProtocolTCP, "udp": model.ProtocolUDP, "sctp": model.ProtocolSCTP,
		"icmp": model.ProtocolICMP, "icmpv6": model.ProtocolICMPv6, "ipv6-icmp": model.ProtocolICMPv6}
	num, name, found := strings.Cut(strings.ToLower(s), "/")
	if !found {
		if p, ok := protos[num]; ok && p != model.ProtocolTCP && p != model.ProtocolUDP && p != model.ProtocolSCTP {
			return p, 0, nil
		}
		name = "tcp"
	}
	p, ok := protos[name]
	if !ok {
		return 0, 0, usageErrorf("--port %q: unknown protocol %q", s, name)
	}
	n, err := strconv.ParseUint(num, 10, 16)
	if err != nil || n == 0 {
		return 0, 0, usageErrorf("--port %q: want PORT/PROTOCOL with a port of 1-65535", s)
	}
	return p, uint16(n), nil
}
