package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
)

// DomainSets reads what one node's kernel holds for domainNames patterns: the addresses of a
// pattern's sets (nft.DomainSets) with the time each has left. The agent's DNS observer writes
// them at run time; a computed table has none.
type DomainSets interface {
	Addresses(pattern string) ([]CachedAddr, error)
}

// CachedAddr is an address a pattern's set holds and the time it has left before the kernel
// expires it.
type CachedAddr struct {
	Addr    netip.Addr    `json:"address"`
	Expires time.Duration `json:"expires"`
}

// Domain is a domainNames pattern of an egress rule of the side's policies: the sets that hold
// its addresses on the side's node and, where explain read that node's kernel (Live), the
// addresses they hold.
type Domain struct {
	Pattern string   `json:"pattern"`
	Rules   []string `json:"rules"` // the rules naming it: "<policy> egress rule <n>"
	Sets    []string `json:"sets"`  // IPv4's, IPv6's
	// Live is true when Addresses were read from the node's kernel; false, they are known only
	// on the node.
	Live      bool         `json:"live"`
	Addresses []CachedAddr `json:"addresses,omitempty"`
	// Error says why the node's sets could not be read.
	Error string `json:"error,omitempty"`
}

// SetDomainSets makes explain read the domainNames sets of node from r: the node explain runs
// on, whose kernel r reads.
func (c *Cluster) SetDomainSets(node string, r DomainSets) {
	if c.domainSets == nil {
		c.domainSets = map[string]DomainSets{}
	}
	c.domainSets[node] = r
}

// domains lists the domainNames patterns of the egress rules of the policies d's tiers hold,
// in their order, each once, with the addresses node's kernel holds when explain reads it.
func (c *Cluster) domains(node string, d nft.Decided) []Domain {
	var out []Domain
	for _, t := range d.Tiers {
		for _, key := range t.Policies {
			p, ok := c.policies[key]
			if !ok {
				continue
			}
			for i, r := range p.EgressRules {
				for _, pattern := range r.Destination.DomainNames {
					rule := fmt.Sprintf("%s %s rule %d", key, model.Egress, i)
					if j := slices.IndexFunc(out, func(d Domain) bool { return d.Pattern == pattern }); j >= 0 {
						out[j].Rules = append(out[j].Rules, rule)
						continue
					}
					v4, v6 := nft.DomainSets(pattern)
					out = append(out, Domain{Pattern: pattern, Rules: []string{rule}, Sets: []string{v4, v6}})
				}
			}
		}
	}
	r := c.domainSets[node]
	if r == nil {
		return out
	}
	for i := range out {
		addrs, err := r.Addresses(out[i].Pattern)
		if err != nil {
			out[i].Error = err.Error()
			continue
		}
		out[i].Live, out[i].Addresses = true, addrs
	}
	return out
}

// writeDomains writes the side's domainNames patterns; peer is the flow's other end, marked
// where a set holds it.
func writeDomains(b *strings.Builder, s Side, peer netip.Addr) {
	if len(s.Domains) == 0 {
		return
	}
	b.WriteString("  domainNames of its policies (the verdict above counts no DNS answer; on the node, a rule naming a pattern also matches the addresses its sets hold):\n")
	for _, d := range s.Domains {
		fmt.Fprintf(b, "    %s (%s): sets %s\n", d.Pattern, strings.Join(d.Rules, ", "), strings.Join(d.Sets, ", "))
		switch {
		case d.Error != "":
			fmt.Fprintf(b, "      addresses unknown: %s\n", d.Error)
		case !d.Live:
			fmt.Fprintf(b, "      addresses known only on node %s (explain there with --node-sets %s)\n", s.Node, s.Node)
		case len(d.Addresses) == 0:
			b.WriteString("      no address: no answer for it is cached\n")
		}
		for _, a := range d.Addresses {
			mark := ""
			if a.Addr == peer {
				mark = " ← this flow's destination"
			}
			fmt.Fprintf(b, "      %s expires in %s%s\n", a.Addr, a.Expires.Round(time.Second), mark)
		}
	}
}
