package e2e

import (
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path"
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
	file                    string // its source file, under conformance/tests
	subtests                []upstreamSubtest
}

// upstreamSubtest is one t.Run: its steps (split where a change follows a poke) and the pod
// label changes of its t.Cleanup.
type upstreamSubtest struct {
	name    string
	steps   []upstreamStep
	cleanup []string
}

// upstreamStep is what TestCNPCaseTable compares with a cnpStep: whether upstream changes
// something before the pokes, the label changes among those changes (labelChange's form), and
// the pokes.
type upstreamStep struct {
	changed bool
	labels  []string
	pokes   []poke
}

var (
	reTest     = regexp.MustCompile(`\nvar (\w+) = suite\.ConformanceTest\{`)
	reFeature  = regexp.MustCompile(`suite\.Support(\w+)`)
	reManifest = regexp.MustCompile(`Manifests:\s*\[\]string\{"([^"]+)"\}`)
	reRun      = regexp.MustCompile(`t\.Run\("`)
	reCleanup  = regexp.MustCompile(`(?s)t\.Cleanup\(func\(\) \{(.*?)\n\t*\}\)`)
	reGetPod   = regexp.MustCompile(`(\w+)\s*:?=\s*kubernetes\.GetPod\(t, s\.Client, "` + conformanceNamespacePrefix + `([\w-]+)", "([\w-]+)"`)
	rePoke     = regexp.MustCompile(`PokeServer\(t, s\.ClientSet, &s\.KubeConfig, "` + conformanceNamespacePrefix +
		`([\w-]+)", "([\w-]+)", "(\w+)",\s*(\w+)\.Status\.PodIP, int32\(([^)]+)\), s\.TimeoutConfig, (true|false)\)`)
	reHostPort = regexp.MustCompile(`^s\.HostNetworkPorts\[(\d)\]$`)
	// reChange is every call of upstream's that changes the cluster.
	reChange = regexp.MustCompile(`kubernetes\.(?:SetPodLabel|RemovePodLabel|PatchPod|PatchNamespace|PatchClusterNetworkPolicy)\(|s\.Client\.(?:Create|Update|Patch|Delete)\(`)
	// rePodLabel is upstream's SetPodLabel or RemovePodLabel of conformanceRoleLabel.
	rePodLabel = regexp.MustCompile(`kubernetes\.(Set|Remove)PodLabel\(t, s\.Client, "` + conformanceNamespacePrefix +
		`([\w-]+)", "([\w-]+)", conformanceRoleLabel(?:, "([\w-]+)")?`)
	reRoleLabel = regexp.MustCompile(`const conformanceRoleLabel = "([\w-]+)"`)
	// reGetNamespace and reSetLabels, the last of each before a PatchNamespace, are its
	// namespace and its labels.
	reGetNamespace = regexp.MustCompile(`kubernetes\.GetNamespace\(t, s\.Client, "` + conformanceNamespacePrefix + `([\w-]+)"`)
	reSetLabels    = regexp.MustCompile(`\.SetLabels\(map\[string\]string\{([^}]*)\}\)`)
	reLabelPair    = regexp.MustCompile(`"([\w./-]+)":\s*"([\w./-]*)"`)
)

// labelChange is how TestCNPCaseTable writes a label change: of a pod "pod <house>/<pod>
// key=value", or "pod <house>/<pod> -key" for a removal; of a namespace "namespace <house>
// k1=v1,k2=v2" (the labels it gets, sorted).
func labelChange(ch change) (string, bool) {
	switch {
	case ch.Pod != "" && ch.PodLabelValue == nil:
		return "pod " + ch.Pod + " -" + ch.PodLabel, true
	case ch.Pod != "":
		return "pod " + ch.Pod + " " + ch.PodLabel + "=" + *ch.PodLabelValue, true
	case ch.Namespace != "":
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(ch.NamespaceLabels)) {
			pairs = append(pairs, k+"="+ch.NamespaceLabels[k])
		}
		return "namespace " + ch.Namespace + " " + strings.Join(pairs, ","), true
	}
	return "", false
}

// upstreamTests parses the ConformanceTests out of the module's own test sources (embedded in
// conformance.Manifests with the manifests): names, features, manifests, subtest names, every
// PokeServer call with the server pod it names, where the calls that change the cluster fall
// between them, the pod label changes, and the pod label changes of each t.Cleanup.
func upstreamTests() ([]upstreamTest, error) {
	files, err := fs.Glob(conformance.Manifests, "tests/*.go")
	if err != nil {
		return nil, err
	}
	var out []upstreamTest
	roleLabel := ""
	for _, f := range files {
		b, err := fs.ReadFile(conformance.Manifests, f)
		if err != nil {
			return nil, err
		}
		if m := reRoleLabel.FindSubmatch(b); m != nil {
			roleLabel = string(m[1])
		}
	}
	if roleLabel != conformanceRoleLabel {
		return nil, fmt.Errorf("upstream's conformanceRoleLabel is %q, the table's %q", roleLabel, conformanceRoleLabel)
	}
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
			ut := upstreamTest{name: src[m[2]:m[3]], file: path.Base(f)}
			feats := reFeature.FindAllStringSubmatch(body, -1)
			ut.feature = feats[len(feats)-1][1]
			ut.manifest = reManifest.FindStringSubmatch(body)[1]
			parts := reRun.Split(body, -1)
			servers := map[string]string{}
			for _, g := range reGetPod.FindAllStringSubmatch(parts[0], -1) {
				servers[g[1]] = g[2] + "/" + g[3]
			}
			for _, sub := range parts[1:] {
				us := upstreamSubtest{name: sub[:strings.Index(sub, `",`)]}
				for _, c := range reCleanup.FindAllStringSubmatch(sub, -1) {
					if len(reChange.FindAllString(c[1], -1)) != len(rePodLabel.FindAllString(c[1], -1)) {
						return nil, fmt.Errorf("%s %s / %s: a cleanup changes more than pod labels", f, ut.name, us.name)
					}
					us.cleanup = append(us.cleanup, upstreamPodLabels(c[1])...)
				}
				sub = reCleanup.ReplaceAllString(sub, "")
				vars := maps.Clone(servers)
				st := upstreamStep{}
				// Changes and pokes interleave: a change after a poke starts the next step.
				// GetPod assignments interleave too: resolve each poke's server by the last
				// assignment before it.
				changes := reChange.FindAllStringIndex(sub, -1)
				for _, pm := range rePoke.FindAllStringSubmatchIndex(sub, -1) {
					for len(changes) > 0 && changes[0][0] < pm[0] {
						if len(st.pokes) > 0 {
							us.steps = append(us.steps, st)
							st = upstreamStep{}
						}
						st.changed = true
						if l, ok := upstreamLabelChange(sub[:changes[0][0]], sub[changes[0][0]:]); ok {
							st.labels = append(st.labels, l)
						}
						changes = changes[1:]
					}
					g := func(k int) string { return sub[pm[2*k]:pm[2*k+1]] }
					for _, a := range reGetPod.FindAllStringSubmatch(sub[:pm[0]], -1) {
						vars[a[1]] = a[2] + "/" + a[3]
					}
					port, err := upstreamPort(g(5))
					if err != nil {
						return nil, fmt.Errorf("%s %s: %w", f, ut.name, err)
					}
					st.pokes = append(st.pokes, poke{From: g(1) + "/" + g(2), Proto: corev1.Protocol(strings.ToUpper(g(3))),
						To: vars[g(4)], Port: port, Connect: g(6) == "true"})
				}
				if len(changes) > 0 {
					return nil, fmt.Errorf("%s %s / %s: a change after the last poke", f, ut.name, us.name)
				}
				us.steps = append(us.steps, st)
				ut.subtests = append(ut.subtests, us)
			}
			out = append(out, ut)
		}
	}
	return out, nil
}

// upstreamPodLabels returns the pod label changes of src in labelChange's form.
func upstreamPodLabels(src string) []string {
	var out []string
	for _, m := range rePodLabel.FindAllStringSubmatch(src, -1) {
		out = append(out, upstreamPodLabel(m))
	}
	return out
}

// upstreamLabelChange returns, in labelChange's form, the label change that the upstream call
// at the start of rest makes, if it is one: SetPodLabel, RemovePodLabel, or PatchNamespace
// with the namespace and labels before's last GetNamespace and SetLabels gave it.
func upstreamLabelChange(before, rest string) (string, bool) {
	if loc := rePodLabel.FindStringIndex(rest); loc != nil && loc[0] == 0 {
		return upstreamPodLabel(rePodLabel.FindStringSubmatch(rest)), true
	}
	if !strings.HasPrefix(rest, "kubernetes.PatchNamespace(") {
		return "", false
	}
	ns, labels := reGetNamespace.FindAllStringSubmatch(before, -1), reSetLabels.FindAllStringSubmatch(before, -1)
	if ns == nil || labels == nil {
		return "PatchNamespace of an unknown namespace or labels", true
	}
	ch := change{Namespace: ns[len(ns)-1][1], NamespaceLabels: map[string]string{}}
	for _, p := range reLabelPair.FindAllStringSubmatch(labels[len(labels)-1][1], -1) {
		ch.NamespaceLabels[p[1]] = p[2]
	}
	return labelChange(ch)
}

// upstreamPodLabel writes one match of rePodLabel in labelChange's form.
func upstreamPodLabel(m []string) string {
	ch := change{Pod: m[2] + "/" + m[3], PodLabel: conformanceRoleLabel}
	if m[1] == "Set" {
		ch.PodLabelValue = &m[4]
	}
	l, _ := labelChange(ch)
	return l
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

// TestCNPCaseTable checks the table against the module's sources and objects, without root or a
// cluster: the same 30 tests and 112 subtests as upstream's, in the same order, under the same
// names, features and manifests; in each subtest the same pokes in the same order, split into
// steps where upstream changes something between them, the same label changes in each step,
// and the same label changes in its cleanup; every manifest decodes strictly; every change
// applies to the objects as the earlier subtests left them (policies, rules at those indices,
// pods and namespaces exist); every poke names pods of the world and a port the server serves.
func TestCNPCaseTable(t *testing.T) {
	up, err := upstreamTests()
	if err != nil {
		t.Fatal(err)
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
	if len(ours) != 30 || subtests != 112 || standard != 24 || len(up) != 30 {
		t.Errorf("%d tests (%d Standard), %d subtests; upstream has %d tests; want 30 (24), 112; 30", len(ours), standard, subtests, len(up))
	}
	if len(ours) != len(up) {
		t.Errorf("%d tests, upstream %d: %v", len(ours), len(up), names)
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
			t.Errorf("test %d is %s; upstream's are %v", i, c.Name, names)
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
			us := u.subtests[j]
			name := c.Name + " / " + s.Name
			if s.Name != us.name {
				t.Errorf("%s subtest %d: %q, upstream %q", c.Name, j, s.Name, us.name)
			}
			if got := labelChanges(s.Cleanup); !slices.Equal(got, us.cleanup) || len(got) != len(s.Cleanup) {
				t.Errorf("%s: cleanup %v, upstream %v", name, got, us.cleanup)
			}
			if len(s.Steps) != len(us.steps) {
				t.Errorf("%s: %d steps, upstream %d", name, len(s.Steps), len(us.steps))
				continue
			}
			for k, st := range s.Steps {
				ust := us.steps[k]
				if (len(st.Change) > 0) != ust.changed || (k > 0 && len(st.Change) == 0) {
					t.Errorf("%s step %d: %d changes; upstream changes something: %v", name, k+1, len(st.Change), ust.changed)
				}
				if got := labelChanges(st.Change); !slices.Equal(got, ust.labels) {
					t.Errorf("%s step %d: label changes %v, upstream %v", name, k+1, got, ust.labels)
				}
				if !slices.Equal(st.Pokes, ust.pokes) {
					t.Errorf("%s step %d: pokes\n%v\nupstream\n%v", name, k+1, st.Pokes, ust.pokes)
				}
				for _, ch := range st.Change {
					if err := applyOffline(objs, w, ch); err != nil {
						t.Errorf("%s step %d: %s: %v", name, k+1, ch.By, err)
					}
				}
				for _, p := range st.Pokes {
					if !slices.Contains(w.pods, conformanceKey(p.From)) || !slices.Contains(pods, conformanceKey(p.To)) {
						t.Errorf("%s: poke %v names a pod outside the world", name, p)
					}
					if !servedBy(p, hosts) {
						t.Errorf("%s: poke %v: the server does not serve that port", name, p)
					}
				}
			}
			for _, ch := range s.Cleanup {
				if err := applyOffline(objs, w, ch); err != nil {
					t.Errorf("%s cleanup: %s: %v", name, ch.By, err)
				}
			}
		}
	}
}

// TestDocListsCNPTests keeps the lists of the tests true: doc.go's ("<test> <subtests>") and
// docs/conformance.md's table ("| `<test>` | `<source file>` | <feature> | <subtests> |"), every
// upstream test in upstream's order.
func TestDocListsCNPTests(t *testing.T) {
	up, err := upstreamTests()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("../../docs/conformance.md")
	if err != nil {
		t.Fatal(err)
	}
	docAt, mdAt := 0, 0
	for _, u := range up {
		n := strconv.Itoa(len(u.subtests))
		line := regexp.MustCompile(`(?m)^//\t` + u.name + ` +` + n + `(  |$)`)
		row := regexp.MustCompile("(?m)^\\| `" + u.name + "` \\| `" + regexp.QuoteMeta(u.file) + "` \\| [^|]+ \\| " + n + " \\|")
		if loc := line.FindIndex(doc[docAt:]); loc == nil {
			t.Errorf("doc.go does not list %s with %s subtests after the tests before it", u.name, n)
		} else {
			docAt += loc[1]
		}
		if loc := row.FindIndex(md[mdAt:]); loc == nil {
			t.Errorf("docs/conformance.md does not list %s (%s, %s subtests) after the tests before it", u.name, u.file, n)
		} else {
			mdAt += loc[1]
		}
	}
}

// labelChanges returns the label changes among changes, in labelChange's form.
func labelChanges(changes []change) []string {
	var out []string
	for _, ch := range changes {
		if l, ok := labelChange(ch); ok {
			out = append(out, l)
		}
	}
	return out
}

// applyOffline applies ch to the manifest's objects, as the runner would to the stored ones; a
// label change needs its pod or namespace in the world.
func applyOffline(objs []any, w *world, ch change) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	switch {
	case ch.Pod != "":
		if !slices.Contains(w.pods, conformanceKey(ch.Pod)) {
			return fmt.Errorf("the world has no pod %s", ch.Pod)
		}
		return nil
	case ch.Namespace != "":
		if !slices.Contains(w.namespaces, conformanceKey(ch.Namespace)) {
			return fmt.Errorf("the world has no namespace %s", ch.Namespace)
		}
		return nil
	}
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
