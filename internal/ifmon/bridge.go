package ifmon

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// A pod on a bridge (flannel, the bridge plugin) has no host route: its node-side veth is a port
// of the bridge, and its address is on the veth's peer, in the pod's namespace. The monitor finds
// it there: for each port of a bridge that is a veth whose peer lives in another namespace
// (IFLA_LINK_NETNSID), it dumps that namespace's addresses of the peer (RTM_GETADDR with
// IFA_TARGET_NETNSID and strict checking, the peer's index as filter) and records each global
// address as behind the port (State.Behind). No configuration is needed; a flag naming the
// bridge (Config.Bridges) restricts the bridges looked at.
//
// The pod's namespace sends the monitor no events: a new port is asked again every portRetry, up
// to portAttempts times while its peer has no global address (the CNI adds them after enslaving
// the port), and settleTries times more once it has one (a second family's address may follow);
// the addresses last found are kept while the port stays on its bridge.

// portInfo is what a port's own link message says of its peer.
type portInfo struct {
	peerIndex uint32
	nsid      int32
	hasNSID   bool
}

// linkPeer reads the link's IFLA_LINK and IFLA_LINK_NETNSID.
func linkPeer(c *netlink.Conn, index uint32) (portInfo, error) {
	lm := rtnetlink.LinkMessage{Family: unix.AF_UNSPEC, Index: index}
	body, err := lm.MarshalBinary()
	if err != nil {
		return portInfo{}, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request},
		Data:   body,
	})
	if err != nil {
		return portInfo{}, err
	}
	var pi portInfo
	for _, m := range msgs {
		if len(m.Data) < unix.SizeofIfInfomsg {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[unix.SizeofIfInfomsg:])
		if err != nil {
			return portInfo{}, err
		}
		for ad.Next() {
			switch ad.Type() {
			case unix.IFLA_LINK:
				pi.peerIndex = ad.Uint32()
			case unix.IFLA_LINK_NETNSID:
				pi.nsid, pi.hasNSID = ad.Int32(), true
			}
		}
		if err := ad.Err(); err != nil {
			return portInfo{}, err
		}
	}
	return pi, nil
}

// peerAddrs returns the global addresses of the port's peer, in the peer's namespace.
func peerAddrs(c *netlink.Conn, port uint32) ([]netip.Addr, error) {
	pi, err := linkPeer(c, port)
	if err != nil {
		return nil, fmt.Errorf("reading port %d: %w", port, err)
	}
	if !pi.hasNSID || pi.peerIndex == 0 {
		return nil, nil // not a veth into another namespace
	}
	var out []netip.Addr
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		hdr := make([]byte, unix.SizeofIfAddrmsg)
		hdr[0] = family
		binary.NativeEndian.PutUint32(hdr[4:], pi.peerIndex)
		ae := netlink.NewAttributeEncoder()
		ae.Int32(unix.IFA_TARGET_NETNSID, pi.nsid)
		attrs, err := ae.Encode()
		if err != nil {
			return nil, err
		}
		msgs, err := c.Execute(netlink.Message{
			Header: netlink.Header{Type: unix.RTM_GETADDR, Flags: netlink.Request | netlink.Dump},
			Data:   append(hdr, attrs...),
		})
		if err != nil {
			return nil, fmt.Errorf("reading the addresses behind port %d (netns id %d): %w", port, pi.nsid, err)
		}
		for _, m := range msgs {
			var am rtnetlink.AddressMessage
			if am.UnmarshalBinary(m.Data) != nil || am.Index != pi.peerIndex || am.Scope != unix.RT_SCOPE_UNIVERSE {
				continue
			}
			ip := am.Attributes.Local
			if ip == nil {
				ip = am.Attributes.Address
			}
			if a, ok := ipAddr(ip); ok {
				out = append(out, a)
			}
		}
	}
	return out, nil
}

// How often and how many times a bridge port without a known address behind it is asked again.
const (
	portRetry    = 250 * time.Millisecond
	portAttempts = 120 // 30 s
	settleTries  = 8   // 2 s
)

// isPort reports whether l is a veth port of a bridge the monitor looks behind.
func (m *Monitor) isPort(s State, l Link) bool {
	if l.Master == 0 || l.Kind != "veth" {
		return false
	}
	br, ok := s.Links[l.Master]
	if !ok || br.Kind != "bridge" {
		return false
	}
	return len(m.cfg.Bridges) == 0 || slices.Contains(m.cfg.Bridges, br.Name)
}

// portLookups is what the monitor knows of its lookups behind one port.
type portLookups struct {
	tries int       // lookups done, or counted as done once addresses were found
	next  time.Time // not looked behind again before
}

// nextLookup is when a port awaits its next lookup (zero: none does).
func (m *Monitor) nextLookup() time.Time {
	var next time.Time
	for _, p := range m.ports {
		if p.tries < portAttempts && (next.IsZero() || p.next.Before(next)) {
			next = p.next
		}
	}
	return next
}

// lookBehindPorts drops the addresses of links that are no longer ports, looks behind the ports
// not yet tried out and commits what it found.
func (m *Monitor) lookBehindPorts(q *netlink.Conn) {
	m.mu.Lock()
	next := m.state.clone()
	m.mu.Unlock()
	for dst, idx := range next.Behind {
		if l, ok := next.Links[idx]; !ok || !m.isPort(next, l) {
			delete(next.Behind, dst)
		}
	}
	for idx := range m.ports {
		if l, ok := next.Links[idx]; !ok || !m.isPort(next, l) {
			delete(m.ports, idx)
		}
	}
	now := time.Now()
	for _, idx := range slices.Sorted(maps.Keys(next.Links)) {
		p := m.ports[idx]
		if !m.isPort(next, next.Links[idx]) || p.tries >= portAttempts || now.Before(p.next) {
			continue
		}
		// the link events of a new port come in bursts: a try is due every portRetry, not per event
		p.tries++ // an error (the peer's namespace going away) counts as a try
		p.next = now.Add(portRetry)
		m.ports[idx] = p
		addrs, err := peerAddrs(q, idx)
		if err != nil || len(addrs) == 0 {
			continue
		}
		p.tries = max(p.tries, portAttempts-settleTries)
		m.ports[idx] = p
		for dst, i := range next.Behind {
			if i == idx && !slices.Contains(addrs, dst.Addr()) {
				delete(next.Behind, dst)
			}
		}
		for _, a := range addrs {
			next.Behind[netip.PrefixFrom(a, a.BitLen())] = idx
		}
	}
	m.commit(next)
}

// keepBehind carries the bridge ports' addresses of prev over to a fresh dump next, for the
// links that are still the same ports: a dump does not look behind ports.
func keepBehind(prev, next State) {
	for dst, idx := range prev.Behind {
		if l, ok := next.Links[idx]; ok && l.Master == prev.Links[idx].Master && l.Master != 0 {
			next.Behind[dst] = idx
		}
	}
}
