package sync_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/graph/graphtest"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// describe renders an update as a short line, for comparing streams.
func describe(u model.Update) string {
	switch u := u.(type) {
	case model.NamespaceSet:
		return "ns " + u.Namespace.Name
	case model.NamespaceDeleted:
		return "ns- " + u.Name
	case model.EndpointSet:
		return "ep " + u.Endpoint.Key.String()
	case model.EndpointDeleted:
		return "ep- " + u.Key.String()
	case model.PolicySet:
		return "pol " + u.Policy.Key.String()
	case model.PolicyDeleted:
		return "pol- " + u.Key.String()
	case model.SyncStatusUpdate:
		return "sync " + u.Status.String()
	}
	return "?"
}

func TestLoadDir(t *testing.T) {
	ups, errs := sync.LoadDir("testdata/cluster")
	var got []string
	for _, u := range ups {
		got = append(got, describe(u))
	}
	want := []string{
		"ns x", "ns y", "ns z",
		"ep x/a", "ep x/a2", "ep x/b", "ep y/a", "ep z/c", // z/host (hostNetwork) and z/done (Succeeded) are not endpoints
		"pol NetworkPolicy/x/allow-b-and-blue", "pol NetworkPolicy/y/deny-all", "pol NetworkPolicy/z/egress-net",
		"sync in-sync",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("updates:\n got %q\nwant %q", got, want)
	}
	// Each bad object is named with its file and document.
	bad := filepath.Join("testdata", "cluster", "90-bad.yaml")
	wantErrs := []string{
		bad + " (document 1): NetworkPolicy x/bad-cidr: spec.ingress[0].from[0].ipBlock.cidr",
		bad + " (document 2): ",                             // strict decoding: unknown field
		bad + " (document 3): ",                             // namespace y unquoted: a boolean
		bad + " (document 4): Service x/svc: kind not used", // not an error of the object, but reported
	}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors: got %d, want %d: %v", len(errs), len(wantErrs), errs)
	}
	for i, w := range wantErrs {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
	if !strings.Contains(errs[1].Error(), "podSelecter") {
		t.Errorf("strict decoding error does not name the unknown field: %v", errs[1])
	}

	// The dual-stack pod keeps both addresses and its named ports.
	for _, u := range ups {
		if s, ok := u.(model.EndpointSet); ok && s.Endpoint.Key.String() == "x/a" {
			wantEP := model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "a"}, Node: "node-1",
				Labels: model.LabelsOf(map[string]string{"pod": "a"}), Addrs: addrs("10.0.1.1", "fd00::1:1"), Running: true,
				NamedPorts: []model.NamedPort{{Name: "serve-80", Protocol: model.ProtocolTCP, Port: 80}, {Name: "serve-81-udp", Protocol: model.ProtocolUDP, Port: 81}}}
			if !reflect.DeepEqual(s.Endpoint, wantEP) {
				t.Errorf("x/a: got %+v\nwant %+v", s.Endpoint, wantEP)
			}
		}
		if s, ok := u.(model.NamespaceSet); ok && s.Namespace.Name == "y" && s.Namespace.Labels["team"] != "blue" {
			t.Errorf("namespace y lost its labels: %v", s.Namespace.Labels)
		}
	}

	again, _ := sync.LoadDir("testdata/cluster")
	if !reflect.DeepEqual(ups, again) {
		t.Error("LoadDir is not deterministic")
	}
}

// TestLoadDirMeaning runs the loaded cluster through the graph and checks what the converted
// policies allow on node-1, so the conversion means what NetworkPolicy means.
func TestLoadDirMeaning(t *testing.T) {
	ups, _ := sync.LoadDir("testdata/cluster")
	g := graph.New(graph.Config{NodeName: "node-1"})
	for _, u := range ups {
		g.OnUpdate(u)
	}
	st := graphtest.NewState()
	if err := st.ApplyAll(g.Flush()); err != nil {
		t.Fatal(err)
	}
	if ps := g.Problems(); len(ps) > 0 {
		t.Errorf("graph problems: %v", ps)
	}
	const (
		xa  = "10.0.1.1"
		xb  = "10.0.2.2"
		ya  = "10.0.1.3"
		zc  = "10.0.1.4"
		ext = "10.0.1.50"
	)
	tests := []struct {
		name     string
		from, to string
		proto    model.Protocol
		port     uint16
		want     bool
	}{
		{"x/b to x/a on x/a's named port serve-80 (80)", xb, xa, model.ProtocolTCP, 80, true},
		{"x/b to x/a on 8080 (x/b's own serve-80 does not count)", xb, xa, model.ProtocolTCP, 8080, false},
		{"x/b to x/a2, selected too but without serve-80: nothing allowed", xb, "10.0.1.2", model.ProtocolTCP, 80, false},
		{"y/a to x/a2: the namespace rule has no ports", ya, "10.0.1.2", model.ProtocolTCP, 80, true},
		{"x/b to x/a over UDP 80 (serve-80 is TCP)", xb, xa, model.ProtocolUDP, 80, false},
		{"y/a (namespace of team blue) to x/a on any port", ya, xa, model.ProtocolTCP, 12345, true},
		{"z/c (no team) to x/a on 80: only pod=b of x", zc, xa, model.ProtocolTCP, 80, false},
		{"x/b to y/a: deny-all in y", xb, ya, model.ProtocolTCP, 80, false},
		{"z/c to an address in the ipBlock", zc, ext, model.ProtocolTCP, 443, true},
		{"z/c to the excepted address", zc, xa, model.ProtocolTCP, 80, false},
		{"z/c outside the ipBlock", zc, "10.0.3.1", model.ProtocolTCP, 443, false},
		{"z/c ingress stays open (policyTypes [Egress])", xb, zc, model.ProtocolTCP, 80, true},
		{"y/a egress is open", ya, ext, model.ProtocolUDP, 53, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := st.Allowed(graphtest.Packet{Src: netip.MustParseAddr(tt.from), Dst: netip.MustParseAddr(tt.to),
				Proto: tt.proto, SrcPort: 40000, DstPort: tt.port})
			if got != tt.want {
				t.Errorf("allowed = %v, want %v\n%s", got, tt.want, st.Dump())
			}
		})
	}
}

func TestConvertObjects(t *testing.T) {
	pod := func(ns, name, ip string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:   corev1.PodSpec{NodeName: "n"},
			Status: corev1.PodStatus{PodIPs: []corev1.PodIP{{IP: ip}}}}
	}
	objs := []runtime.Object{
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, // no namespace: default
		pod("", "b", "10.0.0.2"),
		pod("a", "a", "10.0.0.1"),
		pod("a", "a", "10.0.0.9"), // duplicate: dropped
		pod("a", "bad", "not-an-ip"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cm"}},
		// an invalid policy keeps its name: a later one of the same name is a duplicate
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "q"},
			Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "not-a-cidr"}}}}}}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "q"}},
		&corev1.Node{},
		pod("a", "", "10.0.0.3"),
	}
	ups, errs := sync.ConvertObjects(objs)
	var got []string
	for _, u := range ups {
		got = append(got, describe(u))
	}
	want := []string{"ns a", "ns default", "ep a/a", "ep default/b", "pol NetworkPolicy/default/p", "sync in-sync"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	wantErrs := []string{"Pod a/a: duplicate", "Pod a/bad: pod IP", "ConfigMap a/cm: kind not used",
		"NetworkPolicy a/q: ", "NetworkPolicy a/q: duplicate", "Node : metadata.name is empty", "Pod a/: metadata.name is empty"}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors %v, want %d", errs, len(wantErrs))
	}
	for i, w := range wantErrs {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
	if ns := ups[1].(model.NamespaceSet).Namespace; !reflect.DeepEqual(ns.Labels, map[string]string{"kubernetes.io/metadata.name": "default"}) {
		t.Errorf("implicit namespace default: %+v", ns)
	}
	if ep := ups[2].(model.EndpointSet).Endpoint; ep.Addrs[0] != netip.MustParseAddr("10.0.0.1") {
		t.Errorf("duplicate replaced the first pod: %+v", ep)
	}
}

func TestLoadDirMissing(t *testing.T) {
	ups, errs := sync.LoadDir(filepath.Join(t.TempDir(), "nope"))
	if len(errs) != 1 || !os.IsNotExist(unwrapAll(errs[0])) {
		t.Errorf("errors %v, want one not-exist error", errs)
	}
	if len(ups) != 1 {
		t.Errorf("updates %v, want only in-sync", ups)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

// TestLoadDirManyDocuments: a file of more documents than LoadDir decodes at once keeps their
// order and numbers, across chunks, for the updates and the errors; a document that is not
// YAML is reported and the next ones are read.
func TestLoadDirManyDocuments(t *testing.T) {
	const n = 1300
	bad := map[int]bool{3: true, 511: true, 512: true, 513: true, 1023: true, 1024: true, 1299: true}
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("---\n")
		}
		switch {
		case bad[i]:
			fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata: {name: bad%d, namespace: a, zzz: 1}\n", i)
		case i == 700:
			b.WriteString("# only a comment\n")
		default:
			fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns%04d}\n", i)
		}
	}
	b.WriteString("---\n: : not yaml [\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: after-bad}\n")
	dir := t.TempDir()
	file := filepath.Join(dir, "many.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ups, errs := sync.LoadDir(dir)
	var want []string
	for i := range n {
		if bad[i] {
			want = append(want, fmt.Sprintf("%s (document %d): Pod a/bad%d: strict decoding error: unknown field \"metadata.zzz\"", file, i+1, i))
		}
	}
	want = append(want, fmt.Sprintf("%s (document %d): yaml: ", file, n+1))
	if len(errs) != len(want) {
		t.Fatalf("errors: got %d, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
	namespaces, after := 0, false
	for _, u := range ups {
		if ns, ok := u.(model.NamespaceSet); ok && strings.HasPrefix(ns.Namespace.Name, "ns") {
			namespaces++
		}
		if ns, ok := u.(model.NamespaceSet); ok && ns.Namespace.Name == "after-bad" {
			after = true
		}
	}
	if !after {
		t.Errorf("the document after the one that is not YAML was not read")
	}
	if want := n - len(bad) - 1; namespaces != want {
		t.Errorf("namespaces: got %d, want %d", namespaces, want)
	}
}

// TestLoadDirKinds: every kind LoadDir reads, and bad documents, give the same updates and
// errors whether a document is block YAML (read by LoadDir's YAML subset), the same object as
// JSON, or YAML that only yaml.v2 reads (an anchor); a duplicate key is an error in each.
func TestLoadDirKinds(t *testing.T) {
	const (
		pod = `apiVersion: v1
kind: Pod
metadata:
  name: a
  namespace: x
  labels:
    app: web
spec:
  nodeName: n1
  containers:
  - name: c
    image: registry.k8s.io/pause:3.9
    ports:
    - name: http
      containerPort: 8080
      protocol: TCP
status:
  phase: Running
  podIP: 10.0.0.1
  podIPs:
  - ip: 10.0.0.1
  - ip: fd00::1
`
		netpol = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: p
  namespace: x
spec:
  podSelector:
    matchLabels:
      app: web
  policyTypes:
  - Ingress
  ingress:
  - from:
    - namespaceSelector: {}
      podSelector:
        matchExpressions:
        - {key: role, operator: In, values: [client]}
    - ipBlock:
        cidr: 10.1.0.0/16
        except:
        - 10.1.2.0/24
    ports:
    - protocol: TCP
      port: http
    - port: 9000
      endPort: 9010
`
		cnp = `kind: ClusterNetworkPolicy
metadata:
  name: c
spec:
  tier: Admin
  priority: 7
  subject:
    namespaces:
      matchLabels:
        kubernetes.io/metadata.name: x
  ingress:
  - name: deny-all
    action: Deny
    from:
    - namespaces: {}
`
	)
	tests := []struct {
		name string
		docs []string
		want []string // the updates, described
		errs []string // what each error contains, in order
	}{
		{"namespace", []string{"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  labels:\n    team: blue\n"},
			[]string{"ns x", "sync in-sync"}, nil},
		{"pod", []string{pod}, []string{"ns x", "ep x/a", "sync in-sync"}, nil},
		{"network policy", []string{netpol}, []string{"ns x", "pol NetworkPolicy/x/p", "sync in-sync"}, nil},
		{"cluster network policy v1beta1", []string{"apiVersion: policy.networking.k8s.io/v1beta1\n" + cnp},
			[]string{"pol ClusterNetworkPolicy/c", "sync in-sync"}, nil},
		{"cluster network policy v1alpha2", []string{"apiVersion: policy.networking.k8s.io/v1alpha2\n" + cnp},
			[]string{"pol ClusterNetworkPolicy/c", "sync in-sync"}, nil},
		{"node", []string{"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\nstatus:\n  addresses:\n  - type: InternalIP\n    address: 172.31.0.1\n"},
			[]string{"sync in-sync"}, nil},
		{"list", []string{"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: x\n- apiVersion: v1\n  kind: Namespace\n  metadata:\n    name: z\n"},
			[]string{"ns x", "ns z", "sync in-sync"}, nil},
		{"kind not used", []string{"apiVersion: v1\nkind: Service\nmetadata:\n  name: s\n  namespace: x\n"},
			[]string{"sync in-sync"}, []string{"(document 1): Service x/s: kind not used by nftpolicy"}},
		{"unknown field", []string{strings.Replace(netpol, "  podSelector:", "  podSelecter:", 1)},
			[]string{"sync in-sync"}, []string{`(document 1): NetworkPolicy x/p: strict decoding error: unknown field "spec.podSelecter"`}},
		{"string field given a boolean", []string{"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: yes\n"},
			[]string{"sync in-sync"}, []string{"(document 1): Namespace: ", "bool"}},
		{"not YAML", []string{"apiVersion: v1\nkind: Namespace\nmetadata: name: x\n"},
			[]string{"sync in-sync"}, []string{"(document 1): yaml: "}},
		{"duplicate key", []string{"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  name: z\n"},
			[]string{"sync in-sync"}, []string{`(document 1): Namespace z: yaml: unmarshal errors:`, `key "name" already set in map`}},
		{"duplicate key in a flow mapping", []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: x, labels: {a: b, a: c}}\n"},
			[]string{"sync in-sync"}, []string{`(document 1): Namespace x: yaml: unmarshal errors:`, `key "a" already set in map`}},
		{"duplicate key deep in a policy, others kept", []string{strings.Replace(netpol, "    - port: 9000\n", "    - port: 9000\n      port: 9001\n", 1), pod},
			[]string{"ns x", "ep x/a", "sync in-sync"}, []string{`(document 1): NetworkPolicy x/p: yaml: unmarshal errors:`, `key "port" already set in map`}},
	}
	write := func(t *testing.T, name string, docs []string) ([]model.Update, []error) {
		t.Helper()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return sync.LoadDir(dir)
	}
	check := func(t *testing.T, ups []model.Update, errs []error, want, wantErrs []string) {
		t.Helper()
		var got []string
		for _, u := range ups {
			got = append(got, describe(u))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("updates %q, want %q", got, want)
		}
		if len(errs) != min(len(wantErrs), 1) {
			t.Fatalf("errors %v, want %d", errs, min(len(wantErrs), 1))
		}
		for _, w := range wantErrs {
			if !strings.Contains(errs[0].Error(), w) {
				t.Errorf("error %q does not say %q", errs[0], w)
			}
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name != "not YAML" && !sync.YAMLSubsetReads(strings.ReplaceAll(tt.docs[0], "yes", "x")) &&
				!strings.Contains(tt.name, "duplicate") {
				t.Errorf("LoadDir's YAML subset does not read the document:\n%s", tt.docs[0])
			}
			ups, errs := write(t, "block.yaml", tt.docs)
			check(t, ups, errs, tt.want, tt.errs)

			// The same documents as yaml.v2 alone reads them: an anchor on the kind.
			var anchored []string
			for _, d := range tt.docs {
				d = strings.Replace(d, "kind: ", "kind: &k ", 1)
				if sync.YAMLSubsetReads(d) {
					t.Fatalf("the subset reads an anchor:\n%s", d)
				}
				anchored = append(anchored, d)
			}
			aups, aerrs := write(t, "anchored.yaml", anchored)
			check(t, aups, aerrs, tt.want, tt.errs)
			if !reflect.DeepEqual(aups, ups) {
				t.Errorf("anchored documents: updates %+v\nwant %+v", aups, ups)
			}

			// As JSON, where the document is YAML (a duplicate key stays one).
			if tt.name == "not YAML" || strings.Contains(tt.name, "duplicate") {
				return
			}
			var js []string
			for _, d := range tt.docs {
				j, err := yaml.YAMLToJSON([]byte(d))
				if err != nil {
					t.Fatal(err)
				}
				js = append(js, string(j)+"\n")
			}
			jups, jerrs := write(t, "objects.json", js)
			check(t, jups, jerrs, tt.want, tt.errs)
			if !reflect.DeepEqual(jups, ups) {
				t.Errorf("JSON: updates %+v\nwant %+v", jups, ups)
			}
		})
	}
}
