package graph

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// This file is the resolver's part for host endpoints: the node's addresses per interface
// (ifmon's HostAddrSet), the interface of an endpoint without interfaceName, and the problems
// of their input, each reported once.

func (r *resolver) setHostAddr(u model.HostAddrSet, present bool) {
	u.Addr = u.Addr.Unmap()
	if present {
		r.hostAddrs[u] = struct{}{}
	} else {
		delete(r.hostAddrs, u)
	}
	r.hostsChanged()
}

// hostsChanged re-resolves every local host endpoint: their messages list the node's
// addresses, and which interface an endpoint without interfaceName takes depends on the others.
// A node has few host endpoints.
func (r *resolver) hostsChanged() {
	for k := range r.hosts {
		r.changes.endpointChanged(k)
	}
}

// resolveHost is a host endpoint's message: its interface (for one without interfaceName,
// hostInterfaces'; none yet: no address, so no dispatch), the node's addresses (its expected IPs
// and those ifmon reports, loopback's aside), its tier lists ended, unless a default-allow
// profile allows what they leave undecided, by TierHostDefault, which denies it (Calico's
// default for host endpoints, with or without policy), and the lists of the other stages
// (forwarded, pre-DNAT and untracked traffic; the last two leave what they do not decide to
// the next stage: undecided).
func (r *resolver) resolveHost(e *endpoint, h *model.HostEndpoint) *dataplane.EndpointUpdated {
	k := e.key()
	msg := &dataplane.EndpointUpdated{Key: k, Interface: h.Interface, Host: true}
	if msg.Interface == "" {
		if ifcs := r.hostInterfaces(k); len(ifcs) > 0 {
			msg.Interface = ifcs[0]
			if len(ifcs) > 1 {
				msg.Interfaces = ifcs
			}
		}
	}
	if msg.Interface != "" {
		msg.Addrs = slices.Collect(e.net.addrs())
		for u := range r.hostAddrs {
			if !u.Addr.IsLoopback() {
				msg.Addrs = append(msg.Addrs, u.Addr)
			}
		}
		slices.SortFunc(msg.Addrs, netip.Addr.Compare)
		msg.Addrs = slices.Compact(msg.Addrs)
	}
	l := r.tierLists(e, localOnly)
	msg.Ingress, msg.Egress = l.Ingress, l.Egress
	if !h.DefaultAllow {
		deny := dataplane.TierPolicies{Tier: model.TierHostDefault, DefaultAction: model.ActionDeny}
		msg.Ingress = append(msg.Ingress, deny)
		msg.Egress = append(msg.Egress, deny)
	}
	msg.Forward = r.tierLists(e, forwarded)
	msg.PreDNAT = r.tierLists(e, preDNAT)
	msg.PreDNAT.Egress = nil
	msg.Untracked = r.tierLists(e, untracked)
	for _, l := range []*dataplane.Lists{&msg.PreDNAT, &msg.Untracked} {
		undecided(&l.Ingress)
		undecided(&l.Egress)
	}
	r.reportHost(k)
	return msg
}

// hostInterfaces are the interfaces host endpoint k, which has no interfaceName, applies to,
// sorted: as Felix resolves it, an
// interface goes to the endpoint naming it, else to the endpoint of the smallest name
// expecting one of its addresses, so an endpoint may get several. None while no interface
// holds its expected IPs. O(host endpoints × addresses).
func (r *resolver) hostInterfaces(k model.EndpointKey) []string {
	taken := map[string]bool{}
	for _, h := range r.hosts {
		if h.Interface != "" {
			taken[h.Interface] = true
		}
	}
	holders := map[string]model.EndpointKey{} // interface → its endpoint without interfaceName
	for hk, h := range r.hosts {
		if h.Interface != "" {
			continue
		}
		for a := range r.local[hk].net.addrs() {
			for u := range r.hostAddrs {
				if u.Addr != a || u.Interface == "" {
					continue
				}
				if cur, ok := holders[u.Interface]; !taken[u.Interface] && (!ok || hk.Name < cur.Name) {
					holders[u.Interface] = hk
				}
			}
		}
	}
	var got []string
	for ifc, hk := range holders {
		if hk == k {
			got = append(got, ifc)
		}
	}
	slices.Sort(got)
	return got
}

// hostProblemsOf are host endpoint k's problems, once the node's addresses are known (ifmon):
// an expected IP that is not the node's (the endpoint matches it as a peer only), a named
// interface that holds none of the node's addresses (it does not exist yet: its traffic is
// policed by name from its first packet), no interface holding the expected IPs of an endpoint
// without interfaceName (not enforced until one does).
func (r *resolver) hostProblemsOf(k model.EndpointKey) []Problem {
	e, h := r.local[k], r.hosts[k]
	if len(r.hostAddrs) == 0 || e == nil || h == nil {
		return nil
	}
	object := "HostEndpoint/" + k.Name
	addrs := r.hostAddrList()
	var out []Problem
	for a := range e.net.addrs() {
		if !slices.ContainsFunc(addrs, func(u model.HostAddrSet) bool { return u.Addr == a }) {
			out = append(out, Problem{Object: object,
				Message: "expected IP " + a.String() + " is not an address of this node: it matches the endpoint as a peer only"})
		}
	}
	switch h.Interface {
	case model.HostInterfaceAll:
	case "":
		if len(r.hostInterfaces(k)) == 0 {
			out = append(out, Problem{Object: object,
				Message: "no interface of this node that no other host endpoint takes holds its expected IPs: not enforced until one does"})
		}
	default:
		if !slices.ContainsFunc(addrs, func(u model.HostAddrSet) bool { return u.Interface == h.Interface }) {
			out = append(out, Problem{Object: object, Message: "interface " + h.Interface +
				" holds no address of this node: it does not exist yet; its traffic is policed by name from its first packet"})
		}
	}
	return out
}

// hostAddrList is hostAddrs as a slice.
func (r *resolver) hostAddrList() []model.HostAddrSet {
	out := make([]model.HostAddrSet, 0, len(r.hostAddrs))
	for u := range r.hostAddrs {
		out = append(out, u)
	}
	return out
}

// reportHost reports host endpoint k's problems that it did not have at its last resolve.
func (r *resolver) reportHost(k model.EndpointKey) {
	ps := r.hostProblemsOf(k)
	if r.report != nil {
		for _, p := range ps {
			if !slices.Contains(r.reported[k], p) {
				r.report(p)
			}
		}
	}
	if len(ps) == 0 {
		delete(r.reported, k)
	} else {
		r.reported[k] = ps
	}
}

// hostProblems are the problems of every local host endpoint.
func (r *resolver) hostProblems() []Problem {
	var out []Problem
	for k := range r.hosts {
		out = append(out, r.hostProblemsOf(k)...)
	}
	return out
}
