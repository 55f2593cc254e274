package kernel_test

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// costlyPolicies: x/a is selected by x/costly — rule 0 allows TCP 81 from every IPv4 address,
// then n rules each allow one more port from every IPv4 address but one (nested ipBlocks with
// excepts: each interval of the address space gets a class of its own) — and by x/allow-y
// (TCP 80 from namespace y); y/b by y/allow-xa (TCP 80 from x/a).
func costlyPolicies(n int) []model.Policy {
	costly := []model.Rule{nfttest.AllowTCP(model.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}},
		model.Peer{Ports: []model.Port{nfttest.TCP(81)}})}
	for i := range n {
		except := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i >> 8), byte(i)}), 32)
		costly = append(costly, nfttest.AllowTCP(
			model.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, NotNets: []netip.Prefix{except}},
			model.Peer{Ports: []model.Port{nfttest.TCP(uint16(2000 + i))}}))
	}
	return append(otherPolicies(), nfttest.NP("x", "costly", "pod == 'a'", costly, nil, model.Ingress))
}

// otherPolicies are the policies beside the one a rejection test rejects: x/allow-y (TCP 80 into
// x/a from namespace y) and y/allow-xa (TCP 80 into y/b from x/a).
func otherPolicies() []model.Policy {
	return []model.Policy{
		nfttest.NP("x", "allow-y", "pod == 'a'", []model.Rule{
			nfttest.AllowTCP(model.Peer{NamespaceSelector: "ns == 'y'"}, model.Peer{Ports: []model.Port{nfttest.TCP(80)}}),
		}, nil, model.Ingress),
		nfttest.NP("y", "allow-xa", "pod == 'b'", []model.Rule{
			nfttest.AllowTCP(model.Peer{Selector: "pod == 'a'", NamespaceSelector: "ns == 'x'"}, model.Peer{Ports: []model.Port{nfttest.TCP(80)}}),
		}, nil, model.Ingress),
	}
}

// othersAllow is the truth table of otherPolicies, decided=false for what the rejected policy
// alone allowed into x/a.
func othersAllow(p nfttest.Probe) (allowed, decided bool) {
	switch {
	case p.From.Key() == p.To.Key():
		return true, true
	case p.To.Key() == "y/b":
		return p.From.Key() == "x/a" && p.Proto == model.ProtocolTCP && p.Port == 80, true
	case p.To.Key() != "x/a":
		return true, true
	case p.From.NS == "y" && p.Proto == model.ProtocolTCP && p.Port == 80:
		return true, true
	}
	return false, false
}

// TestRejectCostlyPolicy: a policy whose compile exceeds the budget is rejected — reported once,
// by key — and no longer allows anything, while it keeps isolating the pod it selects; the other
// policy of that pod and the policies of other pods are enforced exactly. Within the budget, the
// same policy is enforced as written. Real traffic, IPv4 and IPv6, in a two-node cluster.
func TestRejectCostlyPolicy(t *testing.T) {
	tc := newTrafficCluster(t)
	sc := nfttest.Scenario{Name: "costly", Policies: nfttest.Static(costlyPolicies(600)...)}
	for _, c := range []struct {
		name     string
		budget   int64
		rejected []model.PolicyKey
		tcp81    bool // x/costly's rule 0 allows TCP 81 into x/a from IPv4 peers
	}{
		{"within the default budget", 0, nil, true},
		{"over a small budget", 1_000_000, []model.PolicyKey{nfttest.NPKey("x", "costly")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rejected []model.PolicyKey
			tc.enforceWith(t, sc, nft.Config{CompileBudget: c.budget, Rejected: func(k model.PolicyKey, reason string) {
				if reason == "" {
					t.Errorf("policy %s rejected without a reason", k)
				}
				rejected = append(rejected, k)
			}})
			if !slices.Equal(rejected, c.rejected) {
				t.Errorf("rejected %v, want %v", rejected, c.rejected)
			}
			sc.Allowed = func(p nfttest.Probe) bool {
				if ok, decided := othersAllow(p); decided {
					return ok
				}
				return c.tcp81 && !p.Is6 && p.Proto == model.ProtocolTCP && p.Port == 81
			}
			tc.check(t, sc)
		})
	}
}

// overlapping wraps a real committer and adds an element overlapping another to every ipBlock
// set or map (nets_…, …_nets) of the tables it sends, in a copy: the kernel refuses such a set
// (EEXIST), as it would a compiler's mistake.
type overlapping struct{ *ruleset.Conn }

func (o overlapping) broken(t *ruleset.Table) *ruleset.Table {
	var out *ruleset.Table
	for name, s := range t.Sets {
		if !s.Interval || !strings.Contains(name, "nets") || s.Len() == 0 {
			continue
		}
		if out == nil {
			out = ruleset.NewTable(t.Name)
			maps.Copy(out.Chains, t.Chains)
			maps.Copy(out.Sets, t.Sets)
		}
		bad := s.Clone()
		for e := range s.All() {
			if e.Addr.Is4() && e.Addr != e.AddrEnd { // a range: one address inside it again
				bad.Put(ruleset.Element{ElementKey: ruleset.ElementKey{Addr: e.AddrEnd, AddrEnd: e.AddrEnd}, Value: e.Value})
				break
			}
		}
		out.Sets[name] = bad
	}
	if out == nil {
		return t
	}
	return out
}

func (o overlapping) Replace(t *ruleset.Table) error { return o.Conn.Replace(o.broken(t)) }
func (o overlapping) Commit(t *ruleset.Table, c *ruleset.Changes) error {
	return o.Conn.Commit(o.broken(t), c)
}

// TestRejectRefusedPolicy: the kernel refuses the table because of one group's ipBlock map; the
// dataplane names the object, rejects the costliest policy of that group (x/cidr, two ipBlock
// rules) and commits everything else: x/a still accepts TCP 80 from namespace y, nothing on TCP
// 81 (which x/cidr allowed), and y/b's policy holds. Real kernel and traffic, IPv4 and IPv6.
func TestRejectRefusedPolicy(t *testing.T) {
	tc := newTrafficCluster(t)
	sc := nfttest.Scenario{Name: "refused", Policies: nfttest.Static(append(otherPolicies(),
		nfttest.NP("x", "cidr", "pod == 'a'", []model.Rule{
			nfttest.AllowTCP(model.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, model.Peer{Ports: []model.Port{nfttest.TCP(81)}}),
			nfttest.AllowTCP(model.Peer{Nets: []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")}}, model.Peer{Ports: []model.Port{nfttest.TCP(81)}}),
		}, nil, model.Ingress))...)}
	sc.Allowed = func(p nfttest.Probe) bool {
		ok, _ := othersAllow(p) // nothing more: x/cidr is rejected
		return ok
	}
	var rejected []model.PolicyKey
	for _, n := range tc.c.Nodes() {
		fd, err := n.FD()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := ruleset.Open(fd)
		if err != nil {
			t.Fatal(err)
		}
		dp := kernel.NewApplier(nft.NewBuilder(nft.Config{Rejected: func(k model.PolicyKey, reason string) {
			if !strings.Contains(reason, "refused") || !strings.Contains(reason, "nets") {
				t.Errorf("policy %s rejected for %q, want the refused set named", k, reason)
			}
			rejected = append(rejected, k)
		}}), overlapping{conn}, nil)
		err = dp.Apply(nfttest.MessagesFor(n.Name, tc.addrs, sc))
		if err == nil {
			_, err = dp.Resync() // the failed first commit is retried as a replace
		}
		dp.Close()
		_ = closeFD(fd)
		if err != nil {
			t.Logf("node %s: %v", n.Name, err)
		}
	}
	if want := []model.PolicyKey{nfttest.NPKey("x", "cidr")}; !slices.Equal(rejected, want) {
		t.Errorf("rejected %v, want %v", rejected, want)
	}
	tc.check(t, sc)
}
