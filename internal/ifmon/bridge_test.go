package ifmon

import (
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestBridgePorts: a pod namespace whose veth's node side is a port of a bridge gets its
// addresses after the port exists (as the bridge CNI plugin does it): the monitor finds them
// behind the port without configuration, reports them as the port's (the graph's RouteSet), and
// withdraws them when the port leaves the bridge. A veth that is no bridge port, and a port of a
// bridge the configuration does not name, are not looked behind.
func TestBridgePorts(t *testing.T) {
	node, fd := newNetns(t)
	pod := netns.NewBare(t, "ifp", netns.LoopbackDown).Name
	other := netns.NewBare(t, "ifo", netns.LoopbackDown).Name
	_, rec := start(t, Config{NetNS: fd})
	cur := 0

	ipIn(t, node, "link add cni0 type bridge")
	ipIn(t, node, "link set cni0 up")
	ipIn(t, node, "link add vp type veth peer name eth0 netns "+pod)
	ipIn(t, node, "link set vp master cni0 up")
	ipIn(t, node, "link add vq type veth peer name eth0 netns "+other) // no bridge port
	ipIn(t, pod, "link set eth0 up")
	ipIn(t, other, "addr add 10.9.0.9/24 dev eth0")
	ipIn(t, pod, "addr add 10.9.0.2/24 dev eth0")
	ipIn(t, pod, "addr add fd00:9::2/64 dev eth0 nodad")

	from := cur
	for _, dst := range []string{"10.9.0.2/32", "fd00:9::2/128"} { // in one batch, in any order
		want := netip.MustParsePrefix(dst)
		c := from
		rec.waitFor(t, &c, "PortAddrSet "+dst, func(e Event) bool {
			ps, ok := e.(PortAddrSet)
			return ok && ps.Dst == want && ps.Interface == "vp"
		})
		cur = max(cur, c)
	}
	rec.mu.Lock()
	var routes []model.RouteSet
	for _, u := range rec.updates {
		if rs, ok := u.(model.RouteSet); ok {
			routes = append(routes, rs)
		}
	}
	rec.mu.Unlock()
	for _, want := range []string{"10.9.0.2/32", "fd00:9::2/128"} {
		found := false
		for _, rs := range routes {
			if rs.Dst == netip.MustParsePrefix(want) && rs.Interface == "vp" {
				found = true
			}
		}
		if !found {
			t.Errorf("no RouteSet %s via vp among %v", want, routes)
		}
	}
	for _, rs := range routes {
		if rs.Dst.Addr() == netip.MustParseAddr("10.9.0.9") || rs.Dst.Addr().IsLinkLocalUnicast() {
			t.Errorf("reported %v: not a global address behind a bridge port", rs)
		}
	}

	// the bridge's own reports on its port (family AF_BRIDGE) change nothing
	ipIn(t, node, "link set vp type bridge_slave learning off")
	ipIn(t, node, "link set vp type bridge_slave cost 7")
	ipIn(t, node, "link add vx type veth peer name vy")
	ipIn(t, node, "link del vx")
	rec.waitFor(t, &cur, "LinkDeleted vx", func(e Event) bool {
		ld, ok := e.(LinkDeleted)
		return ok && ld.Link.Name == "vx"
	})
	rec.mu.Lock()
	for _, e := range rec.events {
		if pd, ok := e.(PortAddrDeleted); ok {
			t.Errorf("the bridge's report on its port withdrew %v", pd)
		}
		if ld, ok := e.(LinkDeleted); ok && ld.Link.Name == "vp" {
			t.Errorf("the bridge's report on its port deleted the port: %v", ld)
		}
	}
	rec.mu.Unlock()

	ipIn(t, node, "link set vp nomaster")
	rec.waitFor(t, &cur, "PortAddrDeleted", func(e Event) bool {
		pd, ok := e.(PortAddrDeleted)
		return ok && pd.Dst == netip.MustParsePrefix("10.9.0.2/32")
	})

	// a monitor restricted to another bridge's ports does not look behind cni0's
	ipIn(t, node, "link set vp master cni0")
	_, rec2 := start(t, Config{NetNS: fd, Bridges: []string{"br9"}})
	_, rec3 := start(t, Config{NetNS: fd, Bridges: []string{"cni0"}})
	c3 := 0
	rec3.waitFor(t, &c3, "PortAddrSet with the bridge named", func(e Event) bool {
		_, ok := e.(PortAddrSet)
		return ok
	})
	rec2.mu.Lock()
	defer rec2.mu.Unlock()
	for _, e := range rec2.events {
		if _, ok := e.(PortAddrSet); ok {
			t.Errorf("a monitor of bridge br9 looked behind cni0's port: %v", e)
		}
	}
}
