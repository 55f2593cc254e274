package sync

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// TestHostClaims: of two HostEndpoints claiming one node's interface the smaller name is
// emitted whatever the order; the other is counted as invalid once, however often the
// interface settles again, and takes over when the holder goes; an endpoint moving to
// another interface is withdrawn from the first before it is emitted for the second.
func TestHostClaims(t *testing.T) {
	metrics := NewMetrics(prometheus.NewRegistry())
	w := New(Config{NodeName: "n1", Metrics: metrics})
	hep := func(name, ifname, version string) *HostEndpoint {
		return &HostEndpoint{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version},
			Spec: HostEndpointSpec{Node: "n1", InterfaceName: ifname, ExpectedIPs: []string{"10.0.0.1"}}}
	}
	invalid := func() float64 {
		return testutil.ToFloat64(metrics.InvalidObjects.WithLabelValues(calicoKindHostEndpoint))
	}
	took := func() []string {
		w.mu.Lock()
		defer w.mu.Unlock()
		var out []string
		for _, u := range w.pending {
			switch u := u.(type) {
			case model.EndpointSet:
				out = append(out, "set "+u.Endpoint.Key.Name+" "+u.Endpoint.Host.Interface)
			case model.EndpointDeleted:
				out = append(out, "delete "+u.Key.Name)
			}
		}
		w.pending = nil
		return out
	}
	check := func(what string, wantInvalid float64, want ...string) {
		t.Helper()
		if got := took(); len(got) != len(want) || strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("%s: emitted %q, want %q", what, got, want)
		}
		if got := invalid(); got != wantInvalid {
			t.Errorf("%s: invalid objects counted %v, want %v", what, got, wantInvalid)
		}
	}
	w.hostEndpointChanged(nil, hep("b", "eth0", "1"))
	check("b claims eth0", 0, "set b eth0")
	w.hostEndpointChanged(nil, hep("a", "eth0", "2"))
	check("a claims eth0 too", 1, "delete b", "set a eth0")
	w.hostEndpointChanged(nil, hep("a", "eth0", "2"))
	w.hostEndpointChanged(nil, hep("b", "eth0", "3"))
	w.hostEndpointChanged(nil, hep("c", "eth0", "4"))
	check("both again, and a third", 2)
	w.hostEndpointDeleted(hep("a", "eth0", "2"))
	check("a deleted", 2, "delete a", "set b eth0")
	w.hostEndpointChanged(nil, hep("b", "eth1", "5"))
	check("b moves to eth1", 2, "delete b", "set c eth0", "set b eth1")
	w.mu.Lock()
	w.autoHostEndpointLocked("n1", nil)
	w.mu.Unlock()
	check("no automatic endpoint to delete", 2)
}
