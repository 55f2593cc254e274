package e2e

import (
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/network-policy-api/conformance"
)

// upstreamTest is what TestCNPCaseTable reads of one upstream ConformanceTest's source.
type upstreamTest struct {
	name, feature, manifest string
	subtests                []string
	pokes                   [][]poke // per subtest
}

var (
	reTest     = regexp.MustCompile(`\nvar (\w+) = suite\.ConformanceTest\{`)
	reFeature  = regexp.MustCompile(`suite\.Support(\w+)`)
	reManifest = regexp.MustCompile(`Manifests:\s*\[\]string\{"([^"]+)"\}`)
	reRun      = regexp.MustCompile(`t\.Run\("`)
	reGetPod   = regexp.MustCompile(`(\w+)\s*:?=\s*kubernetes\.GetPod\(t, s\.Client, "` + conformanceNamespacePrefix + `([\w-]+)", "([\w-]+)"`)
	rePoke     = regexp.MustCompile(`PokeServer\(t, s\.ClientSet, &s\.KubeConfig, "` + conformanceNamespacePrefix +
		`([\w-]+)", "([\w-]+)", "(\w+)",\s*(\w+)\.Status\.PodIP, int32\(([^)]+)\), s\.TimeoutConfig, (true|false)\)`)
	reHostPort = regexp.MustCompile(`^s\.HostNetworkPorts\[(\d)\]$`)
)

// upstreamTests parses the ConformanceTests out of the module's own test sources (embedded in
// conformance.Manifests with the manifests): names, features, manifests, subtest names and
// every PokeServer call with the server pod it names.
func upstreamTests() ([]upstreamTest, error) {
	files, err := fs.Glob(conformance.Manifests, "tests/*.go")
	if err != nil {
		return nil, err
	}
	var out []upstreamTest
	for _, f := range files {
		b, err := fs.ReadFile(conformance.Manifests, f)
		if err != nil {
			return nil, err
		}
		src := string(b)
		idx := reTest.FindAllStringSubmatchIndex(src, -1)
		for i, m := range idx {
			end := len(src)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			body := src[m[1]:end]
			ut := upstreamTest{name: src[m[2]:m[3]]}
			feats := reFeature.FindAllStringSubmatch(body, -1)
			ut.feature = feats[len(feats)-1][1]
			ut.manifest = reManifest.FindStringSubmatch(body)[1]
			parts := reRun.Split(body, -1)
			servers := map[string]string{}
			for _, g := range reGetPod.FindAllStringSubmatch(parts[0], -1) {
				servers[g[1]] = g[2] + "/" + g[3]
			}
			for _, sub := range parts[1:] {
				ut.subtests = append(ut.subtests, sub[:strings.Index(sub, `",`)])
				vars := maps.Clone(servers)
				var pokes []poke
				// GetPod assignments and pokes interleave: resolve each poke's server by the
				// last assignment before it.
				for _, pm := range rePoke.FindAllStringSubmatchIndex(sub, -1) {
					g := func(k int) string { return sub[pm[2*k]:pm[2*k+1]] }
					for _, a := range reGetPod.FindAllStringSubmatch(sub[:pm[0]], -1) {
						vars[a[1]] = a[2] + "/" + a[3]
					}
					port, err := upstreamPort(g(5))
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", f, ut.name, err)
					}
					pokes = append(pokes, poke{From: g(1) + "/" + g(2), Proto: corev1.Protocol(strings.ToUpper(g(3))),
						To: vars[g(4)], Port: port, Connect: g(6) == "true"})
				}
				ut.pokes = append(ut.pokes, pokes)
			}
			out = append(out, ut)
		}
	}
	return out, nil
}

// upstreamPort reads int32(N) or int32(s.HostNetworkPorts[i]).
func upstreamPort(expr string) (int32, error) {
	if m := reHostPort.FindStringSubmatch(expr); m != nil {
		i, _ := strconv.Atoi(m[1])
		return int32(hostNetworkPorts[i]), nil
	}
	n, err := strconv.Atoi(expr)
	return int32(n), err
}

// upstreamNotPorted are the ConformanceTests of the module's suite (v0.3.0) that the table
// does not port: their subtests relabel namespaces and pods, or patch a policy, between pokes,
// which a subtest of the table (its changes, then its pokes) cannot express.
func upstreamNotPorted() []string {
	return []string{"CNPAdminTierPodSelector", "CNPAdminTierPortRange", "CNPAdminTierSamePriority",
		"CNPBaselineTierPodSelector", "CNPBaselineTierPortRange", "CNPBaselineTierSamePriority"}
}

// upstreamPokesNotPorted are the subtests ("<test> / <subtest>") whose upstream pokes go on
// after a namespace relabel the table cannot express: the table's pokes are the ones before it,
// a strict prefix of upstream's.
func upstreamPokesNotPorted() []string {
	return []string{"CNPAdminTierEgressInlineCIDRPeers / Should support a 'deny-egress' rule policy for egress-cidr-peer",
		"CNPBaselineTierEgressInlineCIDRPeers / Should support a 'deny-egress' rule policy for egress-cidr-peer"}
}

// TestCNPCaseTable checks the table against the module's sources and objects, without root or a
// cluster: the same 24 tests and 96 subtests as upstream's but upstreamNotPorted, under the same
// names, features and manifests, the same pokes in the same order (but the prefixes of
// upstreamPokesNotPorted); every manifest decodes strictly; every change applies to the
// policy as the earlier subtests left it (rules at those indices exist); every poke names pods of
// the world and a port the server serves.
func TestCNPCaseTable(t *testing.T) {
	all, err := upstreamTests()
	if err != nil {
		t.Fatal(err)
	}
	notPorted := upstreamNotPorted()
	var up []upstreamTest
	for _, u := range all {
		if !slices.Contains(notPorted, u.name) {
			up = append(up, u)
		}
	}
	if len(all)-len(up) != len(notPorted) {
		t.Errorf("upstream has %d tests, %d of them not ported; upstreamNotPorted lists %d: %v", len(all), len(all)-len(up), len(notPorted), notPorted)
	}
	ours := cnpTests()
	var names []string
	for _, u := range up {
		names = append(names, u.name)
	}
	subtests, standard := 0, 0
	for _, c := range ours {
		subtests += len(c.Subtests)
		if c.Feature == "ClusterNetworkPolicy" {
			standard++
		}
	}
	if len(ours) != 24 || subtests != 96 || standard != 18 || len(all) != 30 {
		t.Errorf("%d tests (%d Standard), %d subtests; upstream has %d tests; want 24 (18), 96; 30", len(ours), standard, subtests, len(all))
	}
	w, hosts, err := conformanceWorld()
	if err != nil {
		t.Fatal(err)
	}
	pods := slices.Clone(w.pods)
	for _, h := range hosts {
		pods = append(pods, h.key)
	}
	for i, c := range ours {
		if i >= len(up) || up[i].name != c.Name {
			t.Errorf("test %d is %s; upstream's is %v", i, c.Name, names)
			continue
		}
		u := up[i]
		if c.Feature != u.feature || c.Manifest != u.manifest {
			t.Errorf("%s: feature %s, manifest %s; upstream: %s, %s", c.Name, c.Feature, c.Manifest, u.feature, u.manifest)
		}
		if len(c.Subtests) != len(u.subtests) {
			t.Errorf("%s: %d subtests, upstream %d", c.Name, len(c.Subtests), len(u.subtests))
			continue
		}
		objs, err := manifestObjects(c.Manifest)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		for j, s := range c.Subtests {
			if s.Name != u.subtests[j] {
				t.Errorf("%s subtest %d: %q, upstream %q", c.Name, j, s.Name, u.subtests[j])
			}
			if slices.Contains(upstreamPokesNotPorted(), c.Name+" / "+s.Name) {
				if len(s.Pokes) >= len(u.pokes[j]) || !slices.Equal(s.Pokes, u.pokes[j][:len(s.Pokes)]) {
					t.Errorf("%s / %s: pokes\n%v\nwant a strict prefix of upstream's\n%v", c.Name, s.Name, s.Pokes, u.pokes[j])
				}
			} else if !slices.Equal(s.Pokes, u.pokes[j]) {
				t.Errorf("%s / %s: pokes\n%v\nupstream\n%v", c.Name, s.Name, s.Pokes, u.pokes[j])
			}
			for _, ch := range s.Change {
				if err := applyOffline(objs, ch); err != nil {
					t.Errorf("%s / %s: %s: %v", c.Name, s.Name, ch.By, err)
				}
			}
			for _, p := range s.Pokes {
				if !slices.Contains(w.pods, conformanceKey(p.From)) || !slices.Contains(pods, conformanceKey(p.To)) {
					t.Errorf("%s / %s: poke %v names a pod outside the world", c.Name, s.Name, p)
				}
				if !servedBy(p, hosts) {
					t.Errorf("%s / %s: poke %v: the server does not serve that port", c.Name, s.Name, p)
				}
			}
		}
	}
}

// applyOffline applies ch to the manifest's objects, as the runner would to the stored ones.
func applyOffline(objs []any, ch change) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	for _, o := range objs {
		switch o := o.(type) {
		case *policyv1beta1.ClusterNetworkPolicy:
			if ch.CNP == o.Name {
				ch.Edit(o, oneAddrView{})
				return nil
			}
		case *networkingv1.NetworkPolicy:
			if ch.DeleteNetworkPolicy != "" && conformanceKey(ch.DeleteNetworkPolicy) == o.Namespace+"/"+o.Name {
				return nil
			}
		}
	}
	return fmt.Errorf("the manifest has no such object")
}

// servedBy reports whether p's server serves p's port: a house pod its TCP and UDP ports (and
// SCTP 9003, 9005), a hostNetwork pod the host network ports.
func servedBy(p poke, hosts []hostPod) bool {
	serves := conformanceServes
	if slices.ContainsFunc(hosts, func(h hostPod) bool { return h.key == conformanceKey(p.To) }) {
		serves = centaurServes()
		if p.Proto == protocolSCTP {
			return p.Port == int32(hostNetworkPorts[6]) || p.Port == int32(hostNetworkPorts[7])
		}
	} else if p.Proto == protocolSCTP {
		return p.Port == 9003 || p.Port == 9005
	}
	return slices.Contains(serves, served{p.Proto, p.Port})
}

// oneAddrView gives every pod the same address: enough to apply changes offline.
type oneAddrView struct{}

func (oneAddrView) IP(string) netip.Addr { return netip.MustParseAddr("192.0.2.1") }
