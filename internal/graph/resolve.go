package graph

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// resolver is stage 4, the policy resolver: per local endpoint and direction, the tiers in
// order holding the active policies that select it; its interface (routes) and the addresses
// it owns (owners, owner.go). It is told of endpoint updates (by the set calculator) and tier
// changes (by the active policies), asks the active policies which policies select an endpoint,
// and tells the sequencer which endpoints changed.
type resolver struct {
	policies resolverPolicies
	changes  changes

	local  map[model.EndpointKey]*endpoint
	routes map[netip.Addr]string
	owners addrOwners
	// hosts holds the host endpoints' own part, of the local ones; they claim no address.
	hosts map[model.EndpointKey]*model.HostEndpoint
	// hostAddrs are the node's own addresses, each with the interface holding it
	// (HostAddrSet): every local host endpoint's message lists them (host.go).
	hostAddrs map[model.HostAddrSet]struct{}
	// report and reported: the host endpoints' problems, each reported once (host.go)
	report   func(Problem)
	reported map[model.EndpointKey][]Problem
	// order is resolve's scratch list for sorting an endpoint's policies
	order []ordered
}

// ordered is a policy with its tier, as resolve sorts them.
type ordered struct {
	p    *policy
	tier model.Tier
}

// resolverPolicies is what the resolver asks the active policies.
type resolverPolicies interface {
	appendSelecting(ps []*policy, e *endpoint) []*policy
	tier(name string) (model.Tier, bool)
}

func newResolver(policies resolverPolicies, changes changes) *resolver {
	return &resolver{policies: policies, changes: changes,
		local: map[model.EndpointKey]*endpoint{}, routes: map[netip.Addr]string{},
		owners: newAddrOwners(), hosts: map[model.EndpointKey]*model.HostEndpoint{}, hostAddrs: map[model.HostAddrSet]struct{}{},
		reported: map[model.EndpointKey][]Problem{}}
}

// onEndpoint keeps the local endpoints and their address claims: a local endpoint's change
// re-resolves it (and the other holders of the addresses it gains or loses).
func (r *resolver) onEndpoint(e *endpoint, ch endpointChange) {
	if !e.local || !ch.updated {
		return // memberships alone: the active policies re-resolve it if its policies changed
	}
	k := e.key()
	r.changes.endpointChanged(k)
	if e.host {
		// The node's addresses are its own: a host endpoint owns its addresses alongside
		// pods (which never hold them) and other host endpoints (one per interface).
		if ch.removed {
			delete(r.local, k)
			delete(r.hosts, k)
			delete(r.reported, k)
		} else {
			r.local[k] = e
			r.hosts[k] = ch.host
		}
		r.hostsChanged() // the interfaces of those without interfaceName may move
		return
	}
	switch {
	case ch.added:
		r.local[k] = e
		r.claimAddrs(e, ch.claim)
	case ch.removed:
		delete(r.local, k)
		r.releaseAddrs(e, e.net)
	case ch.netChanged || !ch.claim.Equal(r.owners.claims[e]):
		old := e.net
		if ch.netChanged {
			old = ch.old
		}
		r.releaseAddrs(e, old)
		r.claimAddrs(e, ch.claim)
	}
}

// onTiers re-resolves every local endpoint: tier order and default actions appear in every
// one's lists.
func (r *resolver) onTiers() {
	for k := range r.local {
		r.changes.endpointChanged(k)
	}
}

func (r *resolver) setRoute(dst netip.Prefix, iface string, present bool) {
	if !dst.IsValid() || !dst.IsSingleIP() {
		return
	}
	a := dst.Addr().Unmap()
	if present {
		r.routes[a] = iface
	} else {
		delete(r.routes, a)
	}
	r.dirtyHolders(a)
}

// message is the local endpoint's EndpointUpdated; exists is false when it is gone.
func (r *resolver) message(k model.EndpointKey, _ bool) (*dataplane.EndpointUpdated, bool) {
	e := r.local[k]
	if e == nil {
		return nil, false
	}
	return r.resolve(e), true
}

// resolve is the endpoint's message with the addresses it owns (owner.go) and, per direction,
// the tiers in order holding the active policies that select it, in (Order, Key) order.
func (r *resolver) resolve(e *endpoint) *dataplane.EndpointUpdated {
	if h := r.hosts[e.key()]; h != nil {
		return r.resolveHost(e, h)
	}
	msg := &dataplane.EndpointUpdated{Key: e.key()}
	for a := range e.net.addrs() {
		if r.owns(e, a) {
			msg.Addrs = append(msg.Addrs, a)
		}
	}
	for _, a := range msg.Addrs {
		if ifc, ok := r.routes[a]; ok {
			msg.Interface = ifc
			break
		}
	}
	l := r.tierLists(e, localOnly)
	msg.Ingress, msg.Egress = l.Ingress, l.Egress
	return msg
}

// The policies of each stage's lists (dataplane.EndpointUpdated): a pod's and the node's own
// traffic by the policies that are neither preDNAT nor doNotTrack, forwarded traffic by those
// of them with applyOnForward, and the preDNAT and doNotTrack stages by theirs.
func localOnly(m *model.Policy) bool { return !m.PreDNAT && !m.DoNotTrack }
func forwarded(m *model.Policy) bool { return m.ApplyOnForward && localOnly(m) }
func preDNAT(m *model.Policy) bool   { return m.PreDNAT && !m.DoNotTrack }
func untracked(m *model.Policy) bool { return m.DoNotTrack }

// undecided makes a pre-DNAT or untracked list leave to the later stages what it does not
// decide: its tiers pass at their end, and TierHostUndecided ends it (Felix drops at a tier's
// end only in the normal and forward stages).
func undecided(tiers *[]dataplane.TierPolicies) {
	if len(*tiers) == 0 {
		return
	}
	for i := range *tiers {
		(*tiers)[i].DefaultAction = model.ActionPass
	}
	*tiers = append(*tiers, dataplane.TierPolicies{Tier: model.TierHostUndecided, DefaultAction: model.ActionDeny})
}

// tierLists are the endpoint's tiers in order, per direction, with the active policies that
// select it and that stage keeps, in (Order, Key) order.
func (r *resolver) tierLists(e *endpoint, stage func(*model.Policy) bool) dataplane.Lists {
	ps := r.policies.appendSelecting(nil, e)
	ps = slices.DeleteFunc(ps, func(p *policy) bool { return !stage(&p.m) })
	if len(ps) == 0 {
		return dataplane.Lists{}
	}
	tierOf := func(p *policy) model.Tier { t, _ := r.policies.tier(p.m.Tier); return t }
	// Each policy's tier is looked up once, not per comparison: O(n log n) comparisons of
	// fields, no allocation.
	r.order = r.order[:0]
	for _, p := range ps {
		r.order = append(r.order, ordered{p: p, tier: tierOf(p)})
	}
	slices.SortFunc(r.order, func(a, b ordered) int {
		if a.tier.Order != b.tier.Order {
			return cmp.Compare(a.tier.Order, b.tier.Order)
		}
		if c := strings.Compare(a.tier.Name, b.tier.Name); c != 0 {
			return c
		}
		if a.p.m.Order != b.p.m.Order {
			return cmp.Compare(a.p.m.Order, b.p.m.Order)
		}
		return comparePolicyOrder(a.p.key, b.p.key)
	})
	for i := range r.order {
		ps[i] = r.order[i].p
	}
	clear(r.order)
	build := func(apply func(*policy) bool) []dataplane.TierPolicies {
		var out []dataplane.TierPolicies
		for _, p := range ps {
			if !apply(p) {
				continue
			}
			if n := len(out); n == 0 || out[n-1].Tier != p.m.Tier {
				t := tierOf(p)
				out = append(out, dataplane.TierPolicies{Tier: t.Name, DefaultAction: t.DefaultAction})
			}
			tp := &out[len(out)-1]
			tp.Policies = append(tp.Policies, p.key)
		}
		return out
	}
	return dataplane.Lists{Ingress: build(func(p *policy) bool { return p.m.ApplyIngress }),
		Egress: build(func(p *policy) bool { return p.m.ApplyEgress })}
}

// comparePolicyOrder orders policies of one tier and order as Felix does: by name, then
// namespace, then kind (calico-semantics.md: felix/calc's policy sorter).
func comparePolicyOrder(a, b model.PolicyKey) int {
	return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Kind, b.Kind))
}
