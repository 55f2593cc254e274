package graph

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

func TestNetInfo(t *testing.T) {
	addr := netip.MustParseAddr
	http := model.NamedPort{Name: "http", Protocol: model.ProtocolTCP, Port: 8080}
	dns := model.NamedPort{Name: "dns", Protocol: model.ProtocolUDP, Port: 53}
	long := model.NamedPort{Name: strings.Repeat("p", 200), Protocol: model.ProtocolSCTP, Port: 65535}
	tests := []struct {
		name      string
		addrs     []netip.Addr
		ports     []model.NamedPort
		wantAddrs []netip.Addr
		wantPorts []model.NamedPort
	}{
		{"nothing", nil, nil, nil, nil},
		{"one IPv4 address", []netip.Addr{addr("10.0.0.1")}, nil, []netip.Addr{addr("10.0.0.1")}, nil},
		{"dual stack, order kept", []netip.Addr{addr("fd00::1"), addr("10.0.0.1")}, nil,
			[]netip.Addr{addr("fd00::1"), addr("10.0.0.1")}, nil},
		{"repeated address once", []netip.Addr{addr("10.0.0.1"), addr("10.0.0.2"), addr("10.0.0.1")}, nil,
			[]netip.Addr{addr("10.0.0.1"), addr("10.0.0.2")}, nil},
		{"named ports, a repeated one once", []netip.Addr{addr("10.0.0.1")}, []model.NamedPort{http, dns, http},
			[]netip.Addr{addr("10.0.0.1")}, []model.NamedPort{http, dns}},
		{"same name on two ports: both", nil, []model.NamedPort{http, {Name: "http", Protocol: model.ProtocolTCP, Port: 80}},
			nil, []model.NamedPort{http, {Name: "http", Protocol: model.ProtocolTCP, Port: 80}}},
		{"a name longer than a byte's varint", []netip.Addr{addr("fd00::2")}, []model.NamedPort{long},
			[]netip.Addr{addr("fd00::2")}, []model.NamedPort{long}},
		{"more ports than distinct scans, each twice: each once, in order", []netip.Addr{addr("10.0.0.1")}, manyPorts(300, 2),
			[]netip.Addr{addr("10.0.0.1")}, manyPorts(300, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := packNet(tt.addrs, tt.ports)
			if got := slices.Collect(n.addrs()); !slices.Equal(got, tt.wantAddrs) || (got == nil) != (tt.wantAddrs == nil) {
				t.Errorf("addresses %#v, want %#v", got, tt.wantAddrs)
			}
			if got := slices.Collect(n.namedPorts()); !slices.Equal(got, tt.wantPorts) {
				t.Errorf("named ports %v, want %v", got, tt.wantPorts)
			}
			if again := packNet(tt.wantAddrs, tt.wantPorts); again != n {
				t.Errorf("packing the result again gives %q, not %q: equal contents must pack equal", again, n)
			}
			// appended after what a buffer already holds (the graph's scratch), the same bytes
			if b := appendNet([]byte("held"), tt.addrs, tt.ports); string(b[:4]) != "held" || netInfo(b[4:]) != n {
				t.Errorf("appended after 4 bytes: %q, want %q after them", b, n)
			}
		})
	}
}

// manyPorts is n distinct named ports, each repeated times in a row.
func manyPorts(n, times int) []model.NamedPort {
	var out []model.NamedPort
	for i := range n {
		for range times {
			out = append(out, model.NamedPort{Name: "p" + strconv.Itoa(i), Protocol: model.ProtocolTCP, Port: uint16(1000 + i)})
		}
	}
	return out
}

// packNet is addrs and ports packed on their own.
func packNet(addrs []netip.Addr, ports []model.NamedPort) netInfo {
	return netInfo(appendNet(nil, addrs, ports))
}
