package sync_test

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// TestFingerprint: the fingerprint a pod record keeps tells endpoints that differ in any one
// field apart, including where one string ends and the next begins, and is equal for equal
// endpoints built separately (the Watcher emits a pod's new version only when they differ).
func TestFingerprint(t *testing.T) {
	// base builds a new endpoint each time: nothing is shared between the two compared
	base := func() model.Endpoint {
		return model.Endpoint{
			Key:            model.EndpointKey{Namespace: "shop", Name: "web-1"},
			Node:           "node-1",
			Labels:         model.LabelsOf(map[string]string{"app": "web", "tier": "front"}),
			ServiceAccount: "default",
			Addrs:          []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")},
			NamedPorts:     []model.NamedPort{{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}, {Name: "dns", Protocol: model.ProtocolUDP, Port: 53}},
		}
	}
	labels := func(m map[string]string) func(*model.Endpoint) {
		return func(e *model.Endpoint) { e.Labels = model.LabelsOf(m) }
	}
	addrs := func(s ...string) func(*model.Endpoint) {
		return func(e *model.Endpoint) {
			e.Addrs = nil
			for _, a := range s {
				e.Addrs = append(e.Addrs, netip.MustParseAddr(a))
			}
		}
	}
	ports := func(p ...model.NamedPort) func(*model.Endpoint) {
		return func(e *model.Endpoint) { e.NamedPorts = p }
	}
	for _, c := range []struct {
		name string
		a, b func(*model.Endpoint) // applied to a new base each; nil: none
		same bool
	}{
		{"equal endpoints built separately", nil, nil, true},
		{"the same labels from another map", nil, labels(map[string]string{"tier": "front", "app": "web"}), true},
		{"namespace", nil, func(e *model.Endpoint) { e.Key.Namespace = "shop2" }, false},
		{"name", nil, func(e *model.Endpoint) { e.Key.Name = "web-2" }, false},
		{"namespace/name boundary", func(e *model.Endpoint) { e.Key = model.EndpointKey{Namespace: "ab", Name: "c"} },
			func(e *model.Endpoint) { e.Key = model.EndpointKey{Namespace: "a", Name: "bc"} }, false},
		{"node", nil, func(e *model.Endpoint) { e.Node = "node-2" }, false},
		{"label value", nil, labels(map[string]string{"app": "web", "tier": "back"}), false},
		{"label key", nil, labels(map[string]string{"app": "web", "zone": "front"}), false},
		{"label key/value boundary", labels(map[string]string{"a": "bc"}), labels(map[string]string{"ab": "c"}), false},
		{"two labels vs one spelling them", labels(map[string]string{"a": "b", "c": "d"}), labels(map[string]string{"a": "b\x01c\x01d"}), false},
		{"empty label value vs no label", labels(map[string]string{"a": ""}), labels(nil), false},
		{"one label more", nil, labels(map[string]string{"app": "web", "tier": "front", "x": "y"}), false},
		{"labels/service account boundary", func(e *model.Endpoint) { e.Labels, e.ServiceAccount = model.LabelsOf(map[string]string{"a": "b"}), "" },
			func(e *model.Endpoint) { e.Labels, e.ServiceAccount = model.Labels{}, "a" }, false},
		{"service account", nil, func(e *model.Endpoint) { e.ServiceAccount = "web" }, false},
		{"address", nil, addrs("10.0.0.2", "fd00::1"), false},
		{"address order", nil, addrs("fd00::1", "10.0.0.1"), false},
		{"one address less", nil, addrs("10.0.0.1"), false},
		{"IPv4 vs IPv4-mapped IPv6", addrs("10.0.0.1"), addrs("::ffff:10.0.0.1"), false},
		{"address zone", addrs("fe80::1"), addrs("fe80::1%eth0"), false},
		{"port name", nil, ports(model.NamedPort{Name: "web", Protocol: model.ProtocolTCP, Port: 8080}, model.NamedPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53}), false},
		{"port protocol", nil, ports(model.NamedPort{Name: "http", Protocol: model.ProtocolSCTP, Port: 8080}, model.NamedPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53}), false},
		{"port number", nil, ports(model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8081}, model.NamedPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53}), false},
		{"port order", nil, ports(model.NamedPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53}, model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}), false},
		{"one port less", nil, ports(model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}), false},
		{"nil and empty lists", func(e *model.Endpoint) { e.Addrs, e.NamedPorts = nil, nil },
			func(e *model.Endpoint) { e.Addrs, e.NamedPorts = []netip.Addr{}, []model.NamedPort{} }, true},
	} {
		a, b := base(), base()
		if c.a != nil {
			c.a(&a)
		}
		if c.b != nil {
			c.b(&b)
		}
		if fa, fb := sync.Fingerprint(a), sync.Fingerprint(b); (fa == fb) != c.same {
			t.Errorf("%s: fingerprints %x and %x of\n%+v\n%+v", c.name, fa, fb, a, b)
		}
	}
}
