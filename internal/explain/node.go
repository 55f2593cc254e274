package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// This file is the node as an end of a flow: its own traffic, judged by its host endpoints'
// doNotTrack and preDNAT stages and then in the input_host and output_host chains, after the
// exceptions the dataplane makes (loopback, the node's pods, ICMPv6, the failsafe ports).

// nodePrefix introduces a node in a query's From and To.
const nodePrefix = "node/"

// The interfaces a walk of a node's own traffic names: loopback, and a workload interface
// (one of hostConfig's prefixes) for the traffic between the node and its pods.
const (
	loopback       = "lo"
	workloadPrefix = "workload"
	workloadIfname = workloadPrefix + "0"
)

// defaultHostConfig is the host part of the tables explain computes unless SetFailsafes
// changes it: the agent's default failsafe ports, and a workload prefix of its own. The agent's
// API server addresses are unknown here: their exception is left out.
func defaultHostConfig() nft.HostConfig {
	in, errIn := nft.ParseFailsafes(nft.DefaultFailsafeIn)
	out, errOut := nft.ParseFailsafes(nft.DefaultFailsafeOut)
	if errIn != nil || errOut != nil {
		panic(fmt.Sprint("explain: the default failsafe ports do not parse: ", errIn, errOut))
	}
	return nft.HostConfig{FailsafeIn: in, FailsafeOut: out, WorkloadPrefixes: []string{workloadPrefix}}
}

// SetFailsafes makes the nodes' tables carry failsafe ports in and out, as the agent's
// --failsafe-inbound-host-ports and --failsafe-outbound-host-ports do, instead of the agent's
// defaults; the tables computed so far are dropped.
func (c *Cluster) SetFailsafes(in, out []nft.Failsafe) {
	c.host.FailsafeIn, c.host.FailsafeOut = in, out
	clear(c.tables)
}

// end is one end of a flow: a pod (pod set), a node's own traffic (host set: through iface,
// whose host endpoint is hep, nil when none covers it) or an address of neither.
type end struct {
	pod   *model.Endpoint
	host  bool
	hep   *model.Endpoint
	iface string
	node  string
	addr  netip.Addr
}

func (e end) public() End {
	out := End{Addr: e.addr, Node: e.node, Host: e.host, Interface: e.iface}
	if e.pod != nil {
		out.Pod = e.pod.Key.String()
	}
	return out
}

// end finds the end a query names: a pod "ns/name" or a node "node/NAME" (a pod of namespace
// "node" first), with its address of the family.
func (c *Cluster) end(key string, is6 bool, iface string) (end, error) {
	if name, ok := strings.CutPrefix(key, nodePrefix); ok && name != "" {
		if _, isPod := c.endpoints[model.EndpointKey{Namespace: "node", Name: name}]; !isPod {
			return c.nodeEnd(name, is6, iface)
		}
	}
	p, err := c.pod(key)
	if err != nil {
		return end{}, err
	}
	a, err := addrOf(p, is6)
	if err != nil {
		return end{}, err
	}
	return end{pod: p, node: p.Node, addr: a}, nil
}

// addrEnd is the end holding address a: a node whose host endpoints hold it (the smallest
// name), else a pod, else neither.
func (c *Cluster) addrEnd(a netip.Addr, iface string) end {
	if nodes := c.nodesHolding(a); len(nodes) > 0 {
		return c.through(nodes[0], a, iface)
	}
	if p := c.holder(a); p != nil {
		return end{pod: p, node: p.Node, addr: a}
	}
	return end{addr: a}
}

// nodesHolding are the nodes whose host endpoints hold a, by name.
func (c *Cluster) nodesHolding(a netip.Addr) []string {
	var nodes []string
	for _, e := range c.endpoints {
		if e.Host != nil && slices.Contains(e.Addrs, a) && !slices.Contains(nodes, e.Node) {
			nodes = append(nodes, e.Node)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// nodeEnd is node name's own traffic: its smallest address of the family among its host
// endpoints' (their expected IPs: explain knows no other address of a node).
func (c *Cluster) nodeEnd(name string, is6 bool, iface string) (end, error) {
	var addrs []netip.Addr
	for _, e := range c.endpoints {
		if e.Host == nil || e.Node != name {
			continue
		}
		for _, a := range e.Addrs {
			if a.Is6() == is6 {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		fam := "IPv4"
		if is6 {
			fam = "IPv6"
		}
		return end{}, fmt.Errorf("node %s has no host endpoint with an %s address in its expectedIPs", name, fam)
	}
	return c.through(name, slices.MinFunc(addrs, netip.Addr.Compare), iface), nil
}

// through is node's own traffic from or to its address a through interface iface, and the host
// endpoint that judges it as the dispatch maps pick it: the one of that interface holding a,
// else the node's "*" endpoint holding a. An empty iface is the smallest interface of a named
// endpoint holding a, else any interface no endpoint names.
func (c *Cluster) through(node string, a netip.Addr, iface string) end {
	e := end{host: true, node: node, addr: a, iface: iface}
	var named []*model.Endpoint
	for k := range c.endpoints {
		h := c.endpoints[k]
		if h.Host == nil || h.Node != node || !slices.Contains(h.Addrs, a) || h.Host.Interface == "" {
			continue // one without interfaceName needs the node's interfaces: never dispatched here
		}
		switch {
		case h.Host.Interface == model.HostInterfaceAll:
			if e.hep == nil {
				e.hep = &h
			}
		case iface == "" || h.Host.Interface == iface:
			named = append(named, &h)
		}
	}
	if len(named) > 0 {
		h := slices.MinFunc(named, func(x, y *model.Endpoint) int { return strings.Compare(x.Host.Interface, y.Host.Interface) })
		e.hep, e.iface = h, h.Host.Interface
	}
	return e
}

// hostSide explains one direction of the node's own traffic through end e, where peer is the
// other end's address, walking the node's table from chain (input_host or output_host): an
// exception of the chain accepts it, or the host endpoint's decision, which the walk must
// agree with.
func (c *Cluster) hostSide(dir model.Direction, e end, peer netip.Addr, q Query, pkt ruleset.Packet, chain string) (Side, error) {
	s := Side{Direction: dir.String(), Judged: true, Node: e.node, Interface: e.iface}
	if e.hep != nil {
		s.HostEndpoint = e.hep.Key.Name
	}
	builder := c.table(e.node)
	before, done, err := c.hostStages(&s, builder, dir, e, peer, q, &pkt, chain)
	if err != nil || done {
		return s, err
	}
	steps, v, err := builder.Table().Walk(chain, pkt)
	if err != nil {
		return s, fmt.Errorf("walking the table of node %s: %w", e.node, err)
	}
	steps = append(before, steps...)
	if r, ok := exception(builder.Table(), chain, steps); ok {
		s.Verdict, s.Reason, s.DecidedBy = nft.Allow.String(), r.Comment, DecidedBy{Kind: "exception"}
		s.HostEndpoint = ""
		s.NFTables = nftSteps(steps)
		return s, nil
	}
	if e.hep == nil {
		if v.Kind != ruleset.Accept {
			return s, fmt.Errorf("node %s, %s: no host endpoint covers interface %q but the table's walk ends in %s", e.node, dir, e.iface, v)
		}
		s.Verdict, s.DecidedBy = nft.Allow.String(), DecidedBy{Kind: "no host endpoint"}
		s.Reason = "no host endpoint of node " + e.node + " covers its interface: not policed"
		s.NFTables = nftSteps(steps)
		return s, nil
	}
	d, ok := builder.DecideHost(dir, e.hep.Key, e.addr, peer, q.Proto, pkt.Sport, decidedPort(q, pkt))
	if !ok {
		return s, fmt.Errorf("node %s holds no host endpoint %s with address %s", e.node, e.hep.Key.Name, e.addr)
	}
	if err := c.decided(&s, builder, d, chain, pkt); err != nil {
		return s, err
	}
	s.NFTables = append(nftSteps(before), s.NFTables...)
	return s, nil
}

// hostStages walks the host endpoint stages that judge the node's own traffic before its
// normal policy, in Calico's order, as far as the node's table has them: doNotTrack (the raw
// chain of the direction), then, arriving, preDNAT. A stage whose policy denies decides the
// side; one whose policy allows decides it too (the later chains accept the packet on the
// mark the stage set, which the walk carries); an exception of the stage's chain or a stage
// that decides nothing leaves the packet to the next one. It returns the steps of the walked
// stages, pkt with the mark they left, and whether a stage decided s; the walk and
// Builder.DecideStage must agree.
func (c *Cluster) hostStages(s *Side, builder *nft.Builder, dir model.Direction, e end, peer netip.Addr, q Query, pkt *ruleset.Packet, chain string) ([]ruleset.Step, bool, error) {
	stages := []nft.Stage{nft.StageUntracked}
	if dir == model.Ingress {
		stages = append(stages, nft.StagePreDNAT)
	}
	t := builder.Table()
	var steps []ruleset.Step
	for i, st := range stages {
		stChain := nft.HostStageChain(st, dir)
		if t.Chains[stChain] == nil {
			continue
		}
		walked, v, err := t.Walk(stChain, *pkt)
		if err != nil {
			return nil, false, fmt.Errorf("walking the table of node %s: %w", e.node, err)
		}
		steps = append(steps, walked...)
		pkt.Mark = markAfter(t, walked, pkt.Mark)
		if _, ok := exception(t, stChain, walked); ok || e.hep == nil {
			if v.Kind != ruleset.Accept {
				return nil, false, fmt.Errorf("node %s, %s: no %s policy judges the packet but the walk of %s ends in %s", e.node, dir, stageName(st), stChain, v)
			}
			continue
		}
		d, ok := builder.DecideStage(st, dir, e.hep.Key, e.addr, peer, q.Proto, pkt.Sport, decidedPort(q, *pkt))
		if !ok {
			return nil, false, fmt.Errorf("node %s holds no host endpoint %s with address %s", e.node, e.hep.Key.Name, e.addr)
		}
		if d.Outcome.Undecided() {
			if v.Kind != ruleset.Accept {
				return nil, false, fmt.Errorf("node %s, %s of %s: no %s policy decides but the walk of %s ends in %s", e.node, dir, e.hep.Key.Name, stageName(st), stChain, v)
			}
			continue
		}
		if (v.Kind == ruleset.Accept) != (d.Outcome.Verdict == nft.Allow) {
			return nil, false, fmt.Errorf("node %s, %s of %s: the compiled %s decision says %s (%s) but the walk of %s ends in %s",
				e.node, dir, e.hep.Key.Name, stageName(st), d.Outcome.Verdict, d.Outcome.Reason, stChain, v)
		}
		if v.Kind == ruleset.Accept { // the later chains accept on the mark
			var later []string
			for _, next := range stages[i+1:] {
				if n := nft.HostStageChain(next, dir); t.Chains[n] != nil {
					later = append(later, n)
				}
			}
			for _, n := range append(later, chain) {
				walked, v, err := t.Walk(n, *pkt)
				if err != nil {
					return nil, false, fmt.Errorf("walking the table of node %s: %w", e.node, err)
				}
				if v.Kind != ruleset.Accept {
					return nil, false, fmt.Errorf("node %s, %s of %s: the %s policy allows but the walk of %s ends in %s", e.node, dir, e.hep.Key.Name, stageName(st), n, v)
				}
				steps = append(steps, walked...)
			}
		}
		s.Stage = stageName(st)
		s.Verdict, s.Reason = d.Outcome.Verdict.String(), d.Outcome.Reason
		s.DecidedBy = c.decidedBy(d.Origin)
		s.Tiers = tierPaths(d)
		s.NFTables = nftSteps(steps)
		return steps, true, nil
	}
	return steps, false, nil
}

// stageName names a host endpoint stage as Calico's policy field does; the untracked stage
// says so.
func stageName(st nft.Stage) string {
	switch st {
	case nft.StageUntracked:
		return "doNotTrack (untracked)"
	case nft.StagePreDNAT:
		return "preDNAT"
	}
	return ""
}

// markAfter is the packet's mark after the rules of steps, from mark.
func markAfter(t *ruleset.Table, steps []ruleset.Step, mark uint32) uint32 {
	for _, st := range steps {
		if ch := t.Chains[st.Chain]; ch != nil && st.Rule < len(ch.Rules) {
			r := ch.Rules[st.Rule]
			mark = (mark | r.MarkSet) &^ r.MarkClear
		}
	}
	return mark
}

// exception is the rule of base chain that accepted a walk before any dispatch map: loopback,
// the node's pods, ICMPv6, a failsafe port.
func exception(t *ruleset.Table, chain string, steps []ruleset.Step) (ruleset.Rule, bool) {
	if len(steps) == 0 {
		return ruleset.Rule{}, false
	}
	last := steps[len(steps)-1]
	ch := t.Chains[chain]
	if last.Chain != chain || last.Verdict.Kind != ruleset.Accept || ch == nil || last.Rule >= len(ch.Rules) {
		return ruleset.Rule{}, false
	}
	r := ch.Rules[last.Rule]
	if n := len(r.Lookups); n > 0 && r.Lookups[n-1].Map {
		return ruleset.Rule{}, false
	}
	return r, true
}
