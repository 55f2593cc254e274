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

// This file is a node as a hop of a flow: traffic forwarded through it, judged by the
// applyOnForward policy of the host endpoints of the interfaces it enters and leaves by (the
// fwd_in and fwd_out chains), besides the sides of its ends.

// stageForward names the forward stage as Calico's policy field does.
const stageForward = "applyOnForward"

// forward explains the flow from → to forwarded by node via (a query's Via, "node/NAME"),
// entering by iface when neither end is a pod of the node (else by the pod's interface):
// fwd_in of the interface it enters by when that is no workload interface (local side the
// destination), then fwd_out of the one it leaves by (local side the source).
func (c *Cluster) forward(via string, from, to end, q Query, pkt ruleset.Packet) ([]Side, error) {
	node, ok := strings.CutPrefix(via, nodePrefix)
	if !ok || node == "" {
		return nil, fmt.Errorf("--via %q: want node/NODE", via)
	}
	if from.host && from.node == node || to.host && to.node == node {
		return nil, fmt.Errorf("--via %s: an end of the flow is the node itself, not forwarded by it", via)
	}
	fromPod := from.pod != nil && from.node == node
	toPod := to.pod != nil && to.node == node
	if fromPod && toPod {
		return nil, fmt.Errorf("--via %s: both ends are pods of the node: no host endpoint's interface is passed", via)
	}
	ifname := c.forwardIface(node, q.Interface)
	pkt.Iifname, pkt.Oifname = ifname, ifname
	if fromPod {
		pkt.Iifname = workloadIfname
	}
	if toPod {
		pkt.Oifname = workloadIfname
	}
	var sides []Side
	if !fromPod {
		s, err := c.forwardSide(model.Ingress, node, pkt.Iifname, to.addr, from.addr, q, pkt)
		if err != nil {
			return nil, err
		}
		sides = append(sides, s)
	}
	if !toPod {
		s, err := c.forwardSide(model.Egress, node, pkt.Oifname, from.addr, to.addr, q, pkt)
		if err != nil {
			return nil, err
		}
		sides = append(sides, s)
	}
	return sides, nil
}

// forwardIface is the interface of node a forwarded packet passes outside its pods: iface,
// else the smallest interface a host endpoint of node names, else any interface ("").
func (c *Cluster) forwardIface(node, iface string) string {
	if iface != "" {
		return iface
	}
	var named []string
	for _, e := range c.endpoints {
		if e.Host != nil && e.Node == node && e.Host.Interface != "" && e.Host.Interface != model.HostInterfaceAll {
			named = append(named, e.Host.Interface)
		}
	}
	if len(named) == 0 {
		return ""
	}
	return slices.Min(named)
}

// forwardHep is the host endpoint of node that polices interface ifname at the forward stage:
// the one naming it, else the node's "*" one; nil when none does.
func (c *Cluster) forwardHep(node, ifname string) *model.Endpoint {
	var all *model.Endpoint
	for k := range c.endpoints {
		h := c.endpoints[k]
		if h.Host == nil || h.Node != node {
			continue
		}
		switch h.Host.Interface {
		case ifname:
			if ifname != "" {
				return &h
			}
		case model.HostInterfaceAll:
			if all == nil || h.Key.Name < all.Key.Name {
				all = &h
			}
		}
	}
	return all
}

// forwardSide explains the forward stage of direction dir on node through interface ifname,
// where local is the packet's address on the host endpoint's side (its destination entering,
// its source leaving) and peer the other: the walk of fwd_in (fwd_out) and
// Builder.DecideStage, which must agree; a stage that decides nothing must accept.
func (c *Cluster) forwardSide(dir model.Direction, node, ifname string, local, peer netip.Addr, q Query, pkt ruleset.Packet) (Side, error) {
	s := Side{Direction: dir.String(), Judged: true, Node: node, Interface: ifname, Stage: stageForward}
	builder := c.table(node)
	t := builder.Table()
	chain := nft.HostStageChain(nft.StageForward, dir)
	hep := c.forwardHep(node, ifname)
	if hep != nil {
		s.HostEndpoint = hep.Key.Name
	}
	if t.Chains[chain] == nil {
		s.Verdict, s.DecidedBy = nft.Allow.String(), DecidedBy{Kind: "no policy"}
		s.Reason = "no host endpoint of node " + node + " has applyOnForward policy: not policed"
		return s, nil
	}
	steps, v, err := t.Walk(chain, pkt)
	if err != nil {
		return s, fmt.Errorf("walking the table of node %s: %w", node, err)
	}
	s.NFTables = nftSteps(steps)
	var d nft.Decided
	decided := false
	if hep != nil {
		d, decided = builder.DecideStage(nft.StageForward, dir, hep.Key, local, peer, q.Proto, pkt.Sport, decidedPort(q, pkt))
	}
	if _, exc := exception(t, chain, steps); exc || !decided || d.Outcome.Undecided() {
		if v.Kind != ruleset.Accept {
			return s, fmt.Errorf("node %s, forwarded %s through %q: no applyOnForward policy decides but the walk of %s ends in %s", node, dir, ifname, chain, v)
		}
		s.Verdict, s.DecidedBy = nft.Allow.String(), DecidedBy{Kind: "no policy"}
		s.Reason = "no applyOnForward policy of node " + node + " decides: not policed at this stage"
		if exc {
			s.DecidedBy, s.Reason = DecidedBy{Kind: "exception"}, "accepted before any host endpoint's applyOnForward policy"
		}
		return s, nil
	}
	if (v.Kind == ruleset.Accept) != (d.Outcome.Verdict == nft.Allow) {
		return s, fmt.Errorf("node %s, forwarded %s of %s: the compiled applyOnForward decision says %s (%s) but the walk of %s ends in %s",
			node, dir, hep.Key.Name, d.Outcome.Verdict, d.Outcome.Reason, chain, v)
	}
	s.Verdict, s.Reason = d.Outcome.Verdict.String(), d.Outcome.Reason
	s.DecidedBy = c.decidedBy(d.Origin)
	s.Tiers = tierPaths(d)
	return s, nil
}
