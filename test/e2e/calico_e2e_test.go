package e2e

// TestCalico: Calico's policy API (projectcalico.org/v3, deploy/crds/calico) on the netns
// cluster with the agent on every node, over IPv4 and IPv6: the cases of calico_cases_test.go,
// each a set of manifests as a user writes them, applied through the API server, then its
// expected matrices and pokes checked with real traffic and with nftpolicy explain.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/nftpolicy/nftpolicy/internal/explain"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// calicoGroupVersion is the API of Calico's kinds, as their CRDs serve it.
var calicoGroupVersion = schema.GroupVersion{Group: "projectcalico.org", Version: "v3"}

// calicoKinds are the resources of Calico's kinds, in the order reset deletes them: policies
// before the tiers and sets they name.
var calicoKinds = []string{"globalnetworkpolicies", "networkpolicies", "globalnetworksets", "networksets", "hostendpoints", "tiers"}

// TestCalico runs every Calico case on IPv4 and on IPv6 in the 9-pod model, with the Calico
// CRDs and the ClusterNetworkPolicy CRD installed, every pod running as service account
// sa-<pod name> (sa-c labelled role=trusted).
func TestCalico(t *testing.T) {
	testenv.RequireRoot(t)
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if err := installCalicoCRDs(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := s.InstallClusterNetworkPolicyExperimentalCRD(ctx); err != nil {
		t.Fatal(err)
	}
	cnps, err := s.ClusterNetworkPolicyClient()
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	fab := &netnsFabric{cl: netns.NewForTest(t, netns.Config{Nodes: nodeNames(), Layout: podLayout(t)}), nsFD: map[string]int{}}
	t.Cleanup(fab.close)
	enf := newEnforcer(t, s, fab.cl)
	w := calicoWorld()
	h := newHarness(t, s, fab, w)
	h.enf, h.cnps = enf, cnps
	h.explained = explainAgrees(t, s)
	if err := runAsServiceAccounts(ctx, h); err != nil {
		t.Fatal(err)
	}
	c := &calicoRunner{h: h, dyn: dyn, fab: fab, explain: explainClient(t, s)}
	t.Cleanup(func() { // for the tests after this one
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := c.deleteCalico(ctx); err != nil {
			t.Error(err)
		}
		if err := h.deletePolicies(ctx); err != nil {
			t.Error(err)
		}
	})
	startEnforcers(t, enf)
	h.perFamily(t, func(t *testing.T, v familyView) {
		for _, cc := range calicoCases() {
			t.Run(cc.Name, func(t *testing.T) { c.run(t, cc, v) })
		}
	})
}

// calicoWorld is the netpol model (x, y, z; a, b, c; TCP and UDP on 80 and 81) whose pods also
// serve TCP 6379, the port of Calico's documentation samples; x/a is role=database and the b
// pods role=frontend, the labels of those samples.
func calicoWorld() *world {
	w := netpolWorld()
	w.serves = append(w.serves, served{protocolTCP, 6379})
	w.podLabels = func(key string) map[string]string {
		_, name := splitKey(key)
		l := basePodLabels(name)
		switch {
		case key == "x/a":
			l["role"] = "database"
		case name == "b":
			l["role"] = "frontend"
		}
		return l
	}
	return w
}

// installCalicoCRDs installs every CRD of deploy/crds/calico.
func installCalicoCRDs(ctx context.Context, s *kube.Server) error {
	files, err := filepath.Glob("../../deploy/crds/calico/*.yaml")
	if err != nil || len(files) == 0 {
		return fmt.Errorf("the Calico CRDs: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := s.InstallCRD(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// runAsServiceAccounts makes service accounts sa-a, sa-b and sa-c in every namespace (sa-c
// labelled role=trusted) and recreates each pod to run as sa-<its name>: a pod's service
// account cannot change.
func runAsServiceAccounts(ctx context.Context, h *harness) error {
	c := h.srv.Client
	for _, ns := range h.w.namespaces {
		for _, name := range []string{"a", "b", "c"} {
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sa-" + name}}
			if name == "c" {
				sa.Labels = map[string]string{"role": "trusted"}
			}
			if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("service account %s/%s: %w", ns, sa.Name, err)
			}
		}
	}
	zero := int64(0)
	for _, key := range h.w.pods {
		ns, name := splitKey(key)
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return err
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: p.Labels}, Spec: p.Spec}
		pod.Spec.ServiceAccountName = "sa-" + name
		pod.Spec.DeprecatedServiceAccount = ""
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("recreating pod %s: %w", key, err)
		}
		if _, err := h.srv.SetPodStatus(ctx, ns, name, corev1.PodRunning, h.addrs[key]); err != nil {
			return err
		}
	}
	return nil
}

// calicoRunner applies a case's manifests through the dynamic client and checks its
// expectations.
type calicoRunner struct {
	h       *harness
	dyn     dynamic.Interface
	fab     *netnsFabric
	explain sync.Client
}

// run runs one case: reset (no policy of any API, base labels, all reachable), apply its
// manifests, wait until every agent has committed them, then check each expectation.
func (c *calicoRunner) run(t *testing.T, cc calicoCase, v familyView) {
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
	defer cancel()
	if err := c.deleteCalico(ctx); err != nil {
		t.Fatal(err)
	}
	c.h.reset(t, ctx, v)
	objs, err := calicoManifests(cc.Manifests, v)
	if err != nil {
		t.Fatalf("the manifests: %v", err)
	}
	versions := map[string]uint64{}
	for _, o := range objs {
		res, created, err := c.create(ctx, o)
		if err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if rv, err := parseVersion(created.GetResourceVersion()); err == nil && rv > versions[res] {
			versions[res] = rv
		}
	}
	c.caughtUp(t, ctx, versions)
	for _, m := range cc.Matrices {
		exp := NewReachability(modelPods(), true)
		m.Expect(exp)
		c.h.validate(t, ctx, "after the manifests", v, m.Proto, m.Port, exp)
	}
	if len(cc.Pokes) > 0 {
		c.checkPokes(t, ctx, v, cc.Pokes)
	}
}

// caughtUp waits until every agent has committed the writes so far: Barrier's resources and
// those of the objects written (versions, by resource as the agent's metrics name them).
func (c *calicoRunner) caughtUp(t *testing.T, ctx context.Context, versions map[string]uint64) {
	t.Helper()
	all, err := c.h.srv.Barrier(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for res, rv := range versions {
		if rv > all[res] {
			all[res] = rv
		}
	}
	if err := c.h.enf.CaughtUp(ctx, all); err != nil {
		t.Fatalf("the agents did not commit the manifests: %v", err)
	}
}

func parseVersion(rv string) (uint64, error) {
	var n uint64
	_, err := fmt.Sscan(rv, &n)
	return n, err
}

// create creates o (strict field validation: a field the CRD lacks fails the case) and returns
// its resource as the agent's metrics name it and the object as stored.
func (c *calicoRunner) create(ctx context.Context, o *unstructured.Unstructured) (string, *unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(o.GetAPIVersion())
	if err != nil {
		return "", nil, err
	}
	res := strings.ToLower(o.GetKind()) + "s" // every kind here: NetworkSet, Tier, ...
	if k, ok := strings.CutSuffix(res, "policys"); ok {
		res = k + "policies"
	}
	api := c.dyn.Resource(gv.WithResource(res))
	var ri dynamic.ResourceInterface = api
	if o.GetNamespace() != "" {
		ri = api.Namespace(o.GetNamespace())
	}
	created, err := ri.Create(ctx, o, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if gv.Group != "" && gv.Group != "networking.k8s.io" && gv.Group != "policy.networking.k8s.io" {
		res += "." + gv.Group
	}
	return res, created, err
}

// deleteCalico deletes every object of Calico's kinds.
func (c *calicoRunner) deleteCalico(ctx context.Context) error {
	for _, res := range calicoKinds {
		api := c.dyn.Resource(calicoGroupVersion.WithResource(res))
		list, err := api.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s: %w", res, err)
		}
		for _, o := range list.Items {
			var ri dynamic.ResourceInterface = api
			if o.GetNamespace() != "" {
				ri = api.Namespace(o.GetNamespace())
			}
			if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s %s: %w", res, o.GetName(), err)
			}
		}
	}
	return nil
}

// calicoManifests executes the manifests' template for the family of v and decodes its
// documents. The template's functions: cidr "ns/pod" (the pod's address as a /32 or /128),
// icmp (ICMP or ICMPv6) and echo (the echo request's type: 8 or 128).
func calicoManifests(text string, v familyView) ([]*unstructured.Unstructured, error) {
	tmpl, err := template.New("manifests").Option("missingkey=error").Funcs(template.FuncMap{
		"cidr": func(pod string) string { a := v.IP(pod); return netip.PrefixFrom(a, a.BitLen()).String() },
		"icmp": func() string {
			if v.is6 {
				return "ICMPv6"
			}
			return "ICMP"
		},
		"echo": func() int {
			if v.is6 {
				return 128
			}
			return 8
		},
	}).Parse(text)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, nil); err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(&b, 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if o.Object == nil {
			continue
		}
		out = append(out, &o)
	}
}

// checkPokes pokes until every poke gives its expectation or convergeTimeout passes, then
// requires explain to give each poke's flow the same verdict.
func (c *calicoRunner) checkPokes(t *testing.T, ctx context.Context, v familyView, pokes []calicoPoke) {
	t.Helper()
	deadline := time.Now().Add(convergeTimeout)
	for attempt := 1; ; attempt++ {
		var wrong []string
		for _, p := range pokes {
			got, err := c.poke(ctx, v, p)
			if err != nil {
				t.Fatalf("poking %s: %v", p, err)
			}
			if got != p.Connect {
				wrong = append(wrong, fmt.Sprintf("  %s: want %s, got %s", p, connects(p.Connect), connects(got)))
			}
		}
		if len(wrong) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d pokes still wrong after %d rounds over %s:\n%s", len(wrong), len(pokes), attempt, convergeTimeout, strings.Join(wrong, "\n"))
		}
		time.Sleep(pollInterval)
	}
	ex, err := explain.Live(ctx, c.explain)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	for _, p := range pokes {
		q := explain.Query{From: p.From, To: p.To, Proto: explainProtocol(p.Proto), Port: uint16(p.Port), SrcPort: p.SrcPort, IPv6: v.is6}
		if p.Ping {
			q.Proto, q.Port, q.ICMPType = model.ProtocolICMP, 0, 8
			if v.is6 {
				q.Proto, q.ICMPType = model.ProtocolICMPv6, 128
			}
		}
		r, err := ex.Explain(q)
		if err != nil {
			t.Errorf("explain %s: %v", p, err)
			continue
		}
		if r.Allowed != p.Connect {
			var text strings.Builder
			_ = r.WriteText(&text)
			t.Errorf("%s: the traffic connected=%v, explain says:\n%s", p, p.Connect, text.String())
		}
	}
}

// poke makes one poke: a ping (an echo request answered by the destination's kernel), or a TCP
// or UDP probe of a served port, from a fixed source port when SrcPort is set.
func (c *calicoRunner) poke(ctx context.Context, v familyView, p calicoPoke) (bool, error) {
	from := c.fab.netnsOf(p.From)
	to := v.IP(p.To)
	switch {
	case p.Ping:
		return ping(ctx, from, to, probeTimeout)
	case p.SrcPort != 0:
		return probeFromPort(ctx, from, to, p.Port, p.SrcPort, probeTimeout)
	}
	return netns.Probe(ctx, from, to, netns.Protocol(p.Proto), uint16(p.Port), probeTimeout)
}

// probeFromPort connects over TCP from source port sport to to:port in netnsName and reports
// whether the server's reply arrives. The socket closes with a reset (linger 0), so the next
// probe can reuse the same source port at once.
func probeFromPort(ctx context.Context, netnsName string, to netip.Addr, port int32, sport uint16, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var ok bool
	err := netns.Do(netnsName, func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{Port: int(sport)}, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
			if err != nil {
				return err
			}
			return serr
		}}
		conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(to, uint16(port)).String())
		if err != nil {
			return nil // blocked: a timeout, a refusal or an unreachable
		}
		defer conn.Close()
		conn.(*net.TCPConn).SetLinger(0)
		if dl, ok := ctx.Deadline(); ok {
			conn.SetDeadline(dl)
		}
		buf := make([]byte, 64)
		n, _ := io.ReadAtLeast(conn, buf, 1)
		ok = n > 0
		return nil
	})
	return ok, err
}

// ping sends an echo request (type 8, or 128 in ICMPv6; code 0) from netnsName to to over a
// raw socket and reports whether its echo reply comes back before timeout.
func ping(ctx context.Context, netnsName string, to netip.Addr, timeout time.Duration) (bool, error) {
	conn, err := netns.ICMPConn(netnsName, to.Is6())
	if err != nil {
		return false, err
	}
	defer conn.Close()
	mark := fmt.Appendf(nil, "nftpolicy-ping-%d", time.Now().UnixNano())
	var req, rep icmp.Type = ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply
	proto := 1
	if to.Is6() {
		req, rep, proto = ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, 58
	}
	id := int(time.Now().UnixNano() & 0xffff)
	msg := icmp.Message{Type: req, Body: &icmp.Echo{ID: id, Seq: 1, Data: mark}}
	b, err := msg.Marshal(nil) // ICMPv6: the kernel fills the checksum of a raw socket's packets
	if err != nil {
		return false, err
	}
	if _, err := conn.WriteTo(b, &net.IPAddr{IP: to.AsSlice()}); err != nil {
		return false, nil // blocked locally
	}
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	buf := make([]byte, 1500)
	for {
		if err := conn.SetReadDeadline(deadline); err != nil {
			return false, err
		}
		n, _, err := conn.ReadFrom(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		m, err := icmp.ParseMessage(proto, buf[:n])
		if err != nil || m.Type != rep {
			continue
		}
		if e, ok := m.Body.(*icmp.Echo); ok && bytes.Equal(e.Data, mark) {
			return true, nil
		}
	}
}
