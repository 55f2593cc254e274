package explain

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
)

// fakeSets holds the addresses of patterns as a node's kernel would; err fails every read.
type fakeSets struct {
	addrs map[string][]CachedAddr
	err   error
}

func (f fakeSets) Addresses(pattern string) ([]CachedAddr, error) { return f.addrs[pattern], f.err }

// TestExplainDomains: an egress side whose policies name a domain lists the pattern and its
// sets; its addresses, with the time each has left, only where explain reads the node's sets,
// the flow's destination marked; otherwise it says they are known on the node alone.
func TestExplainDomains(t *testing.T) {
	v4, v6 := nft.DomainSets("*.github.com")
	q := Query{From: "build/a", To: "140.82.121.6", Proto: model.ProtocolTCP, Port: 443}
	head := "  domainNames of its policies (the verdict above counts no DNS answer; on the node, a rule naming a pattern also matches the addresses its sets hold):\n" +
		"    *.github.com (ClusterNetworkPolicy/build-egress egress rule 1): sets " + v4 + ", " + v6 + "\n"
	for _, tc := range []struct {
		name string
		sets DomainSets // of node-a; nil: offline
		want string
	}{
		{"offline", nil, head + "      addresses known only on node node-a (explain there with --node-sets node-a)\n"},
		{"live", fakeSets{addrs: map[string][]CachedAddr{"*.github.com": {
			{Addr: netip.MustParseAddr("140.82.121.3"), Expires: 70*time.Second + 400*time.Millisecond},
			{Addr: netip.MustParseAddr("140.82.121.6"), Expires: 52 * time.Second},
			{Addr: netip.MustParseAddr("2606:50c0:8000::154"), Expires: 9 * time.Second},
		}}}, head +
			"      140.82.121.3 expires in 1m10s\n" +
			"      140.82.121.6 expires in 52s ← this flow's destination\n" +
			"      2606:50c0:8000::154 expires in 9s\n"},
		{"live, empty", fakeSets{}, head + "      no address: no answer for it is cached\n"},
		{"unreadable", fakeSets{err: errors.New("no table")}, head + "      addresses unknown: no table\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := Load("testdata/domains")
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if tc.sets != nil {
				c.SetDomainSets("node-a", tc.sets)
			}
			r, err := c.Explain(q)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			_, got, _ := strings.Cut(b.String(), "    admin    decided     (default pass): ClusterNetworkPolicy/build-egress\n")
			got, _, _ = strings.Cut(got, "  nftables on node node-a:\n")
			if got != tc.want {
				t.Errorf("domainNames of the egress side:\n%s\nwant\n%s\nwhole:\n%s", got, tc.want, b.String())
			}
			if r.Ingress.Domains != nil {
				t.Errorf("ingress side lists domains %v", r.Ingress.Domains)
			}
		})
	}
	// a side whose policies name no domain lists none
	c, _ := Load("testdata/cluster")
	r, err := c.Explain(Query{From: "y/a", To: "x/a", Proto: model.ProtocolTCP, Port: 80})
	if err != nil || r.Egress.Domains != nil {
		t.Errorf("testdata/cluster: domains %v, %v; want none", r, err)
	}
}
