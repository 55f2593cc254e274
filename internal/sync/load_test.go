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
