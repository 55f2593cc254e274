package nft

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// GroupKey returns the key under which endpoints share one Decision for a direction and family:
// the ordered tiers and policies, plus every fact of the local address that Compile reads (its
// membership in the local-side sets, the local-side prefixes containing it and, for ingress, its
// named ports). Two endpoints with equal keys get identical Decisions.
func (s *State) GroupKey(dir model.Direction, tiers []graph.TierPolicies, local netip.Addr) string {
	local = local.Unmap()
	var b strings.Builder
	if local.Is4() {
		b.WriteString("v4")
	} else {
		b.WriteString("v6")
	}
	for _, t := range tiers {
		fmt.Fprintf(&b, "|%s/%d", t.Tier, t.DefaultAction)
		for _, k := range t.Policies {
			b.WriteString(";" + k.String())
		}
	}
	facts := map[string]bool{}
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			m := &r.Dst // local side of an ingress rule
			if dir == model.Egress {
				m = &r.Src
			}
			for _, id := range append(append([]graph.SetID(nil), m.Sets...), m.NotSets...) {
				if s.member(id, local) {
					facts["s:"+string(id)] = true
				}
			}
			for _, n := range append(append([]netip.Prefix(nil), m.Nets...), m.NotNets...) {
				if n.Contains(local) {
					facts["n:"+n.String()] = true
				}
			}
			if dir == model.Ingress {
				for _, id := range append(append([]graph.SetID(nil), m.NamedPortSets...), m.NotNamedPortSets...) {
					if set := s.Sets[id]; set != nil {
						for _, mb := range set.ports[local] {
							facts[fmt.Sprintf("p:%s:%d:%d", id, mb.Protocol, mb.Port)] = true
						}
					}
				}
			}
		}
	}
	keys := make([]string, 0, len(facts))
	for k := range facts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("|" + strings.Join(keys, ","))
	return b.String()
}
