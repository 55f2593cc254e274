package graph

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// addrOwners decides, among the local endpoints, which one owns each address that several hold:
// only the owner lists the address in its EndpointUpdated, so only its dispatch and
// anti-spoofing elements are keyed by it, and a change of another holder never touches them.
// Remote endpoints take no part: a packet for a local pod's address is judged here as that
// pod's, whatever a pod object of another node says. Sizes follow the node's pods (a few
// hundred), not the cluster's.
type addrOwners struct {
	// holders lists the local endpoints holding each address; almost always one.
	holders map[netip.Addr][]*endpoint
	// claims holds what ranks each local endpoint (ownerBefore).
	claims map[*endpoint]model.AddrClaim
}

func newAddrOwners() addrOwners {
	return addrOwners{holders: map[netip.Addr][]*endpoint{}, claims: map[*endpoint]model.AddrClaim{}}
}

// ownerBefore reports whether a ranks before b for an address both hold (model.AddrClaim.Before).
func (o *addrOwners) ownerBefore(a, b *endpoint) bool { return o.claims[a].Before(o.claims[b]) }

// owns reports whether local endpoint e owns its address a.
func (r *resolver) owns(e *endpoint, a netip.Addr) bool {
	for _, h := range r.owners.holders[a] {
		if h != e && r.owners.ownerBefore(h, e) {
			return false
		}
	}
	return true
}

// claimAddrs files local endpoint e under its addresses with claim c. The other holders of
// those addresses are marked dirty: their ownership may have changed.
func (r *resolver) claimAddrs(e *endpoint, c model.AddrClaim) {
	r.owners.claims[e] = c
	for a := range e.net.addrs() {
		r.dirtyHolders(a)
		r.owners.holders[a] = append(r.owners.holders[a], e)
	}
}

// releaseAddrs takes local endpoint e out from under the addresses of net (e's, or the ones it
// had), marking the other holders dirty: one of them may own an address now.
func (r *resolver) releaseAddrs(e *endpoint, net netInfo) {
	for a := range net.addrs() {
		hs := slices.DeleteFunc(r.owners.holders[a], func(h *endpoint) bool { return h == e })
		if len(hs) == 0 {
			delete(r.owners.holders, a)
			continue
		}
		r.owners.holders[a] = hs
		r.dirtyHolders(a)
	}
	delete(r.owners.claims, e)
}

// dirtyHolders marks every local endpoint holding a dirty.
func (r *resolver) dirtyHolders(a netip.Addr) {
	for _, h := range r.owners.holders[a] {
		r.changes.endpointChanged(h.key())
	}
}
