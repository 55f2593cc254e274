package sync_test

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestConvertHostEndpoint: a HostEndpoint's fields as Felix reads them, and each bad input
// refused with the field named.
func TestConvertHostEndpoint(t *testing.T) {
	hep := func(edit func(s *sync.HostEndpointSpec)) *sync.HostEndpoint {
		h := &sync.HostEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "n1-eth0", Labels: map[string]string{"role": "node"}},
			Spec: sync.HostEndpointSpec{Node: "n1", InterfaceName: "eth0", ExpectedIPs: []string{"10.0.0.2", "10.0.0.1", "10.0.0.1"}}}
		edit(&h.Spec)
		return h
	}
	ep, ignored, err := sync.ConvertHostEndpoint(hep(func(s *sync.HostEndpointSpec) {
		s.Profiles = []string{"projectcalico-default-allow", "kns.x"}
		s.Ports = []sync.HostEndpointPort{{Name: "ssh", Protocol: sync.NumOrString{Str: "TCP"}, Port: 22}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if ep.Key != (model.EndpointKey{Name: "n1-eth0"}) || ep.Node != "n1" || ep.Host == nil || *ep.Host != (model.HostEndpoint{Interface: "eth0", DefaultAllow: true}) ||
		len(ep.Addrs) != 2 || ep.Addrs[0] != netip.MustParseAddr("10.0.0.1") || len(ep.NamedPorts) != 1 || ep.NamedPorts[0].Port != 22 {
		t.Errorf("got %+v host %+v", ep, ep.Host)
	}
	if len(ignored) != 1 || !strings.Contains(ignored[0], "kns.x") {
		t.Errorf("ignored %q, want the profile that is not applied", ignored)
	}
	for name, c := range map[string]struct {
		edit  func(s *sync.HostEndpointSpec)
		field string
	}{
		"no node":         {func(s *sync.HostEndpointSpec) { s.Node = "" }, "spec.node"},
		"no interface":    {func(s *sync.HostEndpointSpec) { s.InterfaceName = ""; s.ExpectedIPs = nil }, "spec.interfaceName"},
		"bad interface":   {func(s *sync.HostEndpointSpec) { s.InterfaceName = "eth*" }, "spec.interfaceName"},
		"bad expected IP": {func(s *sync.HostEndpointSpec) { s.ExpectedIPs = []string{"10.0.0.0/8"} }, "spec.expectedIPs[0]"},
		"bad port": {func(s *sync.HostEndpointSpec) {
			s.Ports = []sync.HostEndpointPort{{Name: "x", Protocol: sync.NumOrString{Str: "TCP"}}}
		}, "spec.ports[0].port"},
		"bad port name": {func(s *sync.HostEndpointSpec) {
			s.Ports = []sync.HostEndpointPort{{Name: "X_", Protocol: sync.NumOrString{Str: "TCP"}, Port: 1}}
		}, "spec.ports[0].name"},
		"bad protocol": {func(s *sync.HostEndpointSpec) {
			s.Ports = []sync.HostEndpointPort{{Name: "x", Protocol: sync.NumOrString{Str: "nope"}, Port: 1}}
		}, "spec.ports[0].protocol"},
	} {
		if _, _, err := sync.ConvertHostEndpoint(hep(c.edit)); err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: err %v, want one naming %s", name, err, c.field)
		}
	}
	byIP, _, err := sync.ConvertHostEndpoint(hep(func(s *sync.HostEndpointSpec) { s.InterfaceName = "" }))
	if err != nil || byIP.Host.Interface != "" || len(byIP.Addrs) != 2 {
		t.Errorf("no interfaceName: %+v %v, want the interface holding its expected IPs", byIP, err)
	}
	all, _, err := sync.ConvertHostEndpoint(hep(func(s *sync.HostEndpointSpec) { s.InterfaceName = "*"; s.ExpectedIPs = nil }))
	if err != nil || all.Host.Interface != model.HostInterfaceAll || all.Host.DefaultAllow {
		t.Errorf("*: %+v %v, want every interface, denied by default", all, err)
	}
}
