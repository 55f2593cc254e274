package sync_test

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestWatcherAutoHostEndpoints: with AutoHostEndpoints every Node is a "*" host endpoint with
// its labels, its IP addresses and the default-allow profile, there at in-sync, following the
// node's relabel and gone with it.
func TestWatcherAutoHostEndpoints(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.31.0.1"},
			{Type: corev1.NodeHostName, Address: "n1"}}}}
	cs, waitWatches := fakeCluster(t, node)
	c := startCollector(t, sync.New(sync.Config{Client: sync.ClientsetClient(cs), NodeName: "n1", AutoHostEndpoints: true}))
	want := newState()
	want.InSync = true
	hep := func(labels map[string]string) model.Endpoint {
		return model.Endpoint{Key: model.EndpointKey{Name: "n1-auto-hep"}, Node: "n1", Labels: model.LabelsOf(labels),
			Addrs: []netip.Addr{netip.MustParseAddr("172.31.0.1")}, Running: true,
			Host: &model.HostEndpoint{Interface: model.HostInterfaceAll, DefaultAllow: true}}
	}
	want.Endpoints[model.EndpointKey{Name: "n1-auto-hep"}] = hep(map[string]string{"zone": "a"})
	if got := c.waitSync(t); !equalState(got, want) {
		t.Fatalf("state at in-sync:\n got %v\nwant %v", got, want)
	}
	waitWatches()
	all := func(s state) state { return s }
	relabelled := node.DeepCopy()
	relabelled.Labels["zone"], relabelled.ResourceVersion = "b", "2"
	if _, err := cs.CoreV1().Nodes().Update(context.Background(), relabelled, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want.Endpoints[model.EndpointKey{Name: "n1-auto-hep"}] = hep(map[string]string{"zone": "b"})
	c.waitFor(t, "the node relabelled", all, want)
	if err := cs.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	delete(want.Endpoints, model.EndpointKey{Name: "n1-auto-hep"})
	c.waitFor(t, "the node deleted", all, want)
}
