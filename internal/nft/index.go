package nft

import (
	"net/netip"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/setmap"
)

// index is what incremental work looks up: from a changed set, policy or address to the
// policies, groups and endpoints it concerns. It follows the State and the layout: a policy's
// sets as the State holds the policy, a policy's groups and endpoints as the layout holds them.
type index struct {
	setPolicies    map[dataplane.SetID]map[model.PolicyKey]struct{}   // set → policies whose rules reference it
	policyGroups   map[model.PolicyKey]map[string]struct{}            // policy → group chains whose tiers hold it
	policyEndpoint map[model.PolicyKey]map[model.EndpointKey]struct{} // policy → local endpoints it applies to
	localAddrs     map[netip.Addr]model.EndpointKey                   // address of a local pod → pod
	hostAddrs      map[netip.Addr]map[model.EndpointKey]struct{}      // address of the node → its host endpoints
}

func newIndex() index {
	return index{
		setPolicies:    map[dataplane.SetID]map[model.PolicyKey]struct{}{},
		policyGroups:   map[model.PolicyKey]map[string]struct{}{},
		policyEndpoint: map[model.PolicyKey]map[model.EndpointKey]struct{}{},
		localAddrs:     map[netip.Addr]model.EndpointKey{},
		hostAddrs:      map[netip.Addr]map[model.EndpointKey]struct{}{},
	}
}

// policySets indexes (add) or forgets the sets a policy's rules reference.
func (x *index) policySets(p *dataplane.PolicyUpdated, add bool) {
	for _, id := range policySets(p) {
		if add {
			setmap.Add(x.setPolicies, id, p.Key)
		} else {
			setmap.Remove(x.setPolicies, id, p.Key)
		}
	}
}

// endpoint re-indexes an endpoint from its previous message old (nil: none) to cur (nil: it is
// removed): its policies and addresses. When the tiers keep their names, each tier's policy list
// is compared by its common head and tail, so that one policy added to or removed from thousands
// costs comparisons, not index changes.
func (x *index) endpoint(k model.EndpointKey, old, cur *dataplane.EndpointUpdated) {
	var none dataplane.EndpointUpdated
	if old == nil {
		old = &none
	}
	if cur == nil {
		cur = &none
	}
	if gone, added, ok := policyDiff(old, cur); ok {
		for _, p := range gone {
			if !appliesIn(cur, p) {
				setmap.Remove(x.policyEndpoint, p, k)
			}
		}
		for _, p := range added {
			setmap.Add(x.policyEndpoint, p, k)
		}
	} else {
		for _, tiers := range old.AllTiers() {
			for _, t := range tiers {
				for _, p := range t.Policies {
					setmap.Remove(x.policyEndpoint, p, k)
				}
			}
		}
		for _, tiers := range cur.AllTiers() {
			for _, t := range tiers {
				for _, p := range t.Policies {
					setmap.Add(x.policyEndpoint, p, k)
				}
			}
		}
	}
	for _, a := range old.Addrs {
		if old.Host {
			setmap.Remove(x.hostAddrs, a, k)
		} else if x.localAddrs[a] == k {
			delete(x.localAddrs, a)
		}
	}
	for _, a := range cur.Addrs {
		if cur.Host {
			setmap.Add(x.hostAddrs, a, k)
		} else {
			x.localAddrs[a] = k
		}
	}
}

// maxPolicyDiff bounds the policies a diff of two tier lists may find gone, each looked for in
// the new lists.
const maxPolicyDiff = 16

// policyDiff lists the policies of old's tiers that the same tiers of cur lack at the same place
// (gone) and those cur has in their stead (added), per tier by the lists' common head and tail;
// false when the directions' tiers differ in number or name, or too many are gone.
func policyDiff(old, cur *dataplane.EndpointUpdated) (gone, added []model.PolicyKey, ok bool) {
	olds, curs := old.AllTiers(), cur.AllTiers()
	for i := range olds {
		d := [2][]dataplane.TierPolicies{olds[i], curs[i]}
		if len(d[0]) != len(d[1]) {
			return nil, nil, false
		}
		for i := range d[0] {
			if d[0][i].Tier != d[1][i].Tier {
				return nil, nil, false
			}
			g, a := keysDiff(d[0][i].Policies, d[1][i].Policies)
			gone, added = append(gone, g...), append(added, a...)
			if len(gone) > maxPolicyDiff {
				return nil, nil, false
			}
		}
	}
	return gone, added, true
}

// keysDiff returns the middles of a and b between their common head and tail.
func keysDiff(a, b []model.PolicyKey) (gone, added []model.PolicyKey) {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	return a[head : len(a)-tail], b[head : len(b)-tail]
}

// appliesIn reports whether policy p is in one of the endpoint's tier lists.
func appliesIn(m *dataplane.EndpointUpdated, p model.PolicyKey) bool {
	for _, tiers := range m.AllTiers() {
		for _, t := range tiers {
			if slices.Contains(t.Policies, p) {
				return true
			}
		}
	}
	return false
}

// group indexes (add) or forgets the policies of a group's tiers under its name.
func (x *index) group(name string, tiers []dataplane.TierPolicies, add bool) {
	for _, t := range tiers {
		for _, p := range t.Policies {
			if add {
				setmap.Add(x.policyGroups, p, name)
			} else {
				setmap.Remove(x.policyGroups, p, name)
			}
		}
	}
}

// groupTiers re-indexes a group name from the tiers old to cur, by their common heads and tails
// where the tiers keep their names (see endpoint).
func (x *index) groupTiers(name string, old, cur []dataplane.TierPolicies) {
	o, c := dataplane.EndpointUpdated{Ingress: old}, dataplane.EndpointUpdated{Ingress: cur}
	gone, added, ok := policyDiff(&o, &c)
	if !ok {
		x.group(name, old, false)
		x.group(name, cur, true)
		return
	}
	for _, p := range gone {
		if !appliesIn(&c, p) {
			setmap.Remove(x.policyGroups, p, name)
		}
	}
	for _, p := range added {
		setmap.Add(x.policyGroups, p, name)
	}
}

// policySets lists every set a policy's rules reference.
func policySets(p *dataplane.PolicyUpdated) []dataplane.SetID {
	var ids []dataplane.SetID
	for _, rules := range [][]dataplane.Rule{p.Ingress, p.Egress} {
		for i := range rules {
			for _, m := range []*dataplane.Match{&rules[i].Src, &rules[i].Dst} {
				ids = append(ids, m.Sets...)
				ids = append(ids, m.NotSets...)
				ids = append(ids, m.NamedPortSets...)
				ids = append(ids, m.NotNamedPortSets...)
			}
		}
	}
	return ids
}
