package e2e

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestHostEndpointLockdown: the agent on node a with a "*" HostEndpoint for its node and a
// GlobalNetworkPolicy denying everything both ways: ssh (22) and the API server port (6443)
// stay reachable from an external client, another port is closed, and the agent stays in
// sync: a policy it reads afterwards opens that port.
func TestHostEndpointLockdown(t *testing.T) {
	testenv.RequireRoot(t)
	s := kube.Require(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*setupTimeout)
	defer cancel()
	if err := installCalicoCRDs(ctx, s); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	cl := netns.NewForTest(t, netns.Config{Nodes: []string{"a"}, External: true})
	a, ext := cl.Node("a"), cl.External()
	for _, port := range []uint16{22, 6443, 8080} {
		// on the underlay: the agent's API server is forwarded to it on 127.0.0.1:6443
		if err := cl.Serve(a.NetNS, "TCP", port, a.Underlay...); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(doc string) {
		t.Helper()
		var o unstructured.Unstructured
		if err := utilyaml.Unmarshal([]byte(doc), &o.Object); err != nil {
			t.Fatal(err)
		}
		res := strings.ToLower(o.GetKind()) + "s"
		if k, ok := strings.CutSuffix(res, "policys"); ok {
			res = k + "policies"
		}
		ri := dyn.Resource(calicoGroupVersion.WithResource(res))
		if old, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err == nil {
			o.SetResourceVersion(old.GetResourceVersion())
			_, err = ri.Update(ctx, &o, metav1.UpdateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		if _, err := ri.Create(ctx, &o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := (&calicoRunner{dyn: dyn}).deleteCalico(ctx); err != nil {
			t.Error(err)
		}
	})
	apply("apiVersion: projectcalico.org/v3\nkind: HostEndpoint\nmetadata: {name: a-all, labels: {role: node}}\n" +
		"spec: {node: a, interfaceName: '*', expectedIPs: [" + a.Underlay[0].String() + ", '" + a.Underlay[1].String() + "']}\n")
	apply("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: lockdown}\n" +
		"spec: {selector: role == 'node', types: [Ingress, Egress], ingress: [{action: Deny}], egress: [{action: Deny}]}\n")
	enf := newEnforcer(t, s, cl)
	stop, err := enf.Start(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)

	probe := func(to netip.Addr, port uint16) bool {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ok, err := netns.Probe(pctx, ext.NetNS, to, "TCP", port, 500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	for _, to := range a.Underlay {
		for port, want := range map[uint16]bool{22: true, 6443: true, 8080: false} {
			if got := probe(to, port); got != want {
				t.Errorf("external → a %s:%d under deny-everything: connected = %v, want %v", to, port, got, want)
			}
		}
	}
	// the agent still follows the API: a policy admitting 8080, ordered first, opens it
	apply("apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: admit-8080}\n" +
		"spec: {order: 1, selector: role == 'node', types: [Ingress], ingress: [{action: Allow, protocol: TCP, destination: {ports: [8080]}}]}\n")
	deadline := time.Now().Add(30 * time.Second)
	for !probe(a.Underlay[0], 8080) {
		if time.Now().After(deadline) {
			t.Fatal("the agent did not apply a policy made after the lockdown: out of sync")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
