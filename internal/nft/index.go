package nft

import (
	"net/netip"

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
	localAddrs     map[netip.Addr]model.EndpointKey                   // address of a local endpoint → endpoint
}

func newIndex() index {
	return index{
		setPolicies:    map[dataplane.SetID]map[model.PolicyKey]struct{}{},
		policyGroups:   map[model.PolicyKey]map[string]struct{}{},
		policyEndpoint: map[model.PolicyKey]map[model.EndpointKey]struct{}{},
		localAddrs:     map[netip.Addr]model.EndpointKey{},
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

// endpoint indexes (add) or forgets an endpoint's policies and addresses.
func (x *index) endpoint(k model.EndpointKey, m *dataplane.EndpointUpdated, add bool) {
	for _, tiers := range [][]dataplane.TierPolicies{m.Ingress, m.Egress} {
		for _, t := range tiers {
			for _, p := range t.Policies {
				if add {
					setmap.Add(x.policyEndpoint, p, k)
				} else {
					setmap.Remove(x.policyEndpoint, p, k)
				}
			}
		}
	}
	for _, a := range m.Addrs {
		if add {
			x.localAddrs[a] = k
		} else if x.localAddrs[a] == k {
			delete(x.localAddrs, a)
		}
	}
}

// group indexes (add) or forgets the policies of a group's tiers.
func (x *index) group(g *group, add bool) {
	for _, t := range g.tiers {
		for _, p := range t.Policies {
			if add {
				setmap.Add(x.policyGroups, p, g.name)
			} else {
				setmap.Remove(x.policyGroups, p, g.name)
			}
		}
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
