package nft

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// GroupKey returns the key under which endpoints share one Decision for a direction and family
// (hex): the ordered tiers and policies, plus every fact of the local address that Compile reads
// (its membership in the local-side sets, the local-side prefixes containing it and, for
// ingress, its named ports). Two endpoints with equal keys get identical Decisions.
func (s *State) GroupKey(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr) string {
	id, _ := s.groupKey(dir, tiers, local)
	return hex.EncodeToString(id[:])
}

// groupKey is GroupKey's SHA-256, of the direction too, streamed: a key of thousands of
// policies costs no string of their length. facts is the SHA-256 of the local-side facts alone.
func (s *State) groupKey(dir model.Direction, tiers []dataplane.TierPolicies, local netip.Addr) (key, facts keyID) {
	local = local.Unmap()
	h := sha256.New()
	buf := make([]byte, 0, 256)
	buf = append(buf, dir.String()...)
	if local.Is4() {
		buf = append(buf, "|v4"...)
	} else {
		buf = append(buf, "|v6"...)
	}
	for _, t := range tiers {
		buf = append(append(buf, 0, 't'), t.Tier...)
		buf = strconv.AppendInt(append(buf, 0), int64(t.DefaultAction), 10)
		for _, k := range t.Policies {
			buf = append(append(append(append(append(append(buf, 0, 'p'), k.Kind...), 0), k.Namespace...), 0), k.Name...)
			if len(buf) > 4096 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
	}
	h.Write(buf)
	var header keyID
	h.Sum(header[:0])
	refs := s.localRefs(dir, tiers, string(header[:]))
	set := map[string]bool{}
	for _, id := range refs.sets {
		if s.member(id, local) {
			set["s:"+string(id)] = true
		}
	}
	for _, n := range refs.nets {
		if n.Contains(local) {
			set["n:"+n.String()] = true
		}
	}
	for _, id := range refs.namedPorts {
		if np := s.Sets[id]; np != nil {
			for _, mb := range np.ports[local] {
				set[fmt.Sprintf("p:%s:%d:%d", id, mb.Protocol, mb.Port)] = true
			}
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	text := []byte("|" + strings.Join(keys, ","))
	h.Write(text)
	h.Sum(key[:0])
	return key, sha256.Sum256(text)
}

// localSideRefs are the distinct sets, prefixes and (ingress) named-port sets that the local
// sides of a tier list's rules reference: the facts of a local address that its compile reads.
type localSideRefs struct {
	sets       []dataplane.SetID
	nets       []netip.Prefix
	namedPorts []dataplane.SetID
}

// localRefs returns the local-side references of the rules of tiers in one direction, keyed by
// the tiers' digest (groupKey's header, of the direction and family) and kept until a policy
// changes: every local
// endpoint of a group asks, and a walk over the rules costs as much as the policies are long.
func (s *State) localRefs(dir model.Direction, tiers []dataplane.TierPolicies, header string) *localSideRefs {
	key := header
	if r, ok := s.localSide[key]; ok {
		return r
	}
	refs := &localSideRefs{}
	seenSet, seenNet, seenNP := map[dataplane.SetID]bool{}, map[netip.Prefix]bool{}, map[dataplane.SetID]bool{}
	addSets := func(seen map[dataplane.SetID]bool, out *[]dataplane.SetID, ids []dataplane.SetID) {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				*out = append(*out, id)
			}
		}
	}
	for _, t := range tiers {
		for r := range s.tierRules(dir, t) {
			m := &r.Dst // local side of an ingress rule
			if dir == model.Egress {
				m = &r.Src
			}
			addSets(seenSet, &refs.sets, m.Sets)
			addSets(seenSet, &refs.sets, m.NotSets)
			for _, ns := range [][]netip.Prefix{m.Nets, m.NotNets} {
				for _, n := range ns {
					if !seenNet[n] {
						seenNet[n] = true
						refs.nets = append(refs.nets, n)
					}
				}
			}
			if dir == model.Ingress {
				addSets(seenNP, &refs.namedPorts, m.NamedPortSets)
				addSets(seenNP, &refs.namedPorts, m.NotNamedPortSets)
			}
		}
	}
	if s.localSide == nil {
		s.localSide = map[string]*localSideRefs{}
	}
	s.localSide[key] = refs
	return refs
}
