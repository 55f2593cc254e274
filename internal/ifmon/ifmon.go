package ifmon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jsimonetti/rtnetlink/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/model"
)

// Link is one network interface.
type Link struct {
	Index uint32
	Name  string
	Up    bool   // administratively up and operationally up (or unknown, as dummy/loopback report)
	Kind  string // rtnetlink IFLA_INFO_KIND ("veth", "dummy", …); empty when the kernel gives none
	// Master is the index of the link this one is enslaved to (a bridge's port: the bridge), 0
	// when none.
	Master uint32
}

// AddrKey is one address assigned to one interface.
type AddrKey struct {
	Index  uint32
	Prefix netip.Prefix // the address with its prefix length, e.g. 10.0.0.1/24
}

// State is what ifmon knows of the namespace. Routes holds main-table unicast host routes
// (/32, /128) with the index of the interface they go out of; Behind the addresses (/32, /128)
// of pods behind bridge ports with the port's index (bridge.go).
type State struct {
	Links  map[uint32]Link
	Addrs  map[AddrKey]struct{}
	Routes map[netip.Prefix]uint32
	Behind map[netip.Prefix]uint32
}

func newState() State {
	return State{Links: map[uint32]Link{}, Addrs: map[AddrKey]struct{}{}, Routes: map[netip.Prefix]uint32{},
		Behind: map[netip.Prefix]uint32{}}
}

func (s State) clone() State {
	return State{Links: maps.Clone(s.Links), Addrs: maps.Clone(s.Addrs), Routes: maps.Clone(s.Routes),
		Behind: maps.Clone(s.Behind)}
}

// Equal reports whether two states hold the same links, addresses, routes and bridge ports'
// addresses.
func (s State) Equal(o State) bool {
	return maps.Equal(s.Links, o.Links) && maps.Equal(s.Addrs, o.Addrs) && maps.Equal(s.Routes, o.Routes) &&
		maps.Equal(s.Behind, o.Behind)
}

// InterfaceOf returns the name of the interface the host route to dst goes out of.
func (s State) InterfaceOf(dst netip.Prefix) (string, bool) {
	idx, ok := s.Routes[dst]
	if !ok {
		return "", false
	}
	l, ok := s.Links[idx]
	return l.Name, ok
}

// Event is one change: LinkSet, LinkDeleted, AddrSet, AddrDeleted, RouteSet, RouteDeleted,
// PortAddrSet or PortAddrDeleted.
type Event interface{ isEvent() }

type LinkSet struct{ Link Link }
type LinkDeleted struct{ Link Link }
type AddrSet struct{ Addr AddrKey }
type AddrDeleted struct{ Addr AddrKey }

// RouteSet says host route Dst leaves through interface Index named Interface (set again after a
// rename).
type RouteSet struct {
	Dst       netip.Prefix
	Index     uint32
	Interface string
}
type RouteDeleted struct{ Dst netip.Prefix }

// PortAddrSet says a pod's address Dst is behind bridge port Index named Interface.
type PortAddrSet struct {
	Dst       netip.Prefix
	Index     uint32
	Interface string
}
type PortAddrDeleted struct{ Dst netip.Prefix }

func (LinkSet) isEvent()         {}
func (LinkDeleted) isEvent()     {}
func (AddrSet) isEvent()         {}
func (AddrDeleted) isEvent()     {}
func (RouteSet) isEvent()        {}
func (RouteDeleted) isEvent()    {}
func (PortAddrSet) isEvent()     {}
func (PortAddrDeleted) isEvent() {}

// Handler receives each batch of changes, in the goroutine running Run, in order.
type Handler interface {
	// Changes gets the typed events of one batch and their translation into graph updates.
	Changes(events []Event, updates []model.Update)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(events []Event, updates []model.Update)

func (f HandlerFunc) Changes(e []Event, u []model.Update) { f(e, u) }

// Config configures a Monitor.
type Config struct {
	// NetNS is an fd of the network namespace to watch; 0 means the current one.
	NetNS int
	// ReadBuffer is the initial receive buffer of the event socket in bytes (0: kernel default).
	// It is doubled on every ENOBUFS.
	ReadBuffer int
	// WorkloadPrefixes are interface name prefixes of workload interfaces ("veth", "cali").
	WorkloadPrefixes []string
	// Bridges, when not empty, are the only bridges whose ports are looked behind (bridge.go);
	// empty: every bridge of the namespace.
	Bridges []string
	// Handler receives changes; nil means only the state is kept.
	Handler Handler
	// Synced, if set, is called once, after the first dump's changes were handed to Handler:
	// from then on the state the Handler was given is the kernel's.
	Synced func()
}

// Monitor follows links, addresses and host routes of one namespace.
type Monitor struct {
	cfg Config

	mu    sync.Mutex
	state State

	// ports are the lookups behind each bridge port (bridge.go); owned by the goroutine running
	// Run.
	ports map[uint32]portLookups

	events  atomic.Uint64
	resyncs atomic.Uint64
	enobufs atomic.Uint64
	dumps   atomic.Uint64
}

// New returns a Monitor; Run starts it.
func New(cfg Config) *Monitor {
	return &Monitor{cfg: cfg, state: newState(), ports: map[uint32]portLookups{}}
}

// Events is the number of change events delivered so far.
func (m *Monitor) Events() uint64 { return m.events.Load() }

// Resyncs is the number of full dumps after the first one (each one follows an ENOBUFS).
func (m *Monitor) Resyncs() uint64 { return m.resyncs.Load() }

// LinkDownDumps is the number of full dumps taken because a link carrying routes went down.
func (m *Monitor) LinkDownDumps() uint64 { return m.dumps.Load() }

// ENOBUFS is the number of times the kernel reported lost events.
func (m *Monitor) ENOBUFS() uint64 { return m.enobufs.Load() }

// Snapshot returns a copy of the current state.
func (m *Monitor) Snapshot() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state.clone()
}

// WorkloadInterfaces returns the names of existing interfaces matching the workload prefixes,
// sorted.
func (m *Monitor) WorkloadInterfaces() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.state.Links {
		if m.IsWorkload(l.Name) {
			out = append(out, l.Name)
		}
	}
	slices.Sort(out)
	return out
}

// IsWorkload reports whether name matches a configured workload prefix.
func (m *Monitor) IsWorkload(name string) bool {
	for _, p := range m.cfg.WorkloadPrefixes {
		if p != "" && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var groups = []uint32{unix.RTNLGRP_LINK, unix.RTNLGRP_IPV4_IFADDR, unix.RTNLGRP_IPV6_IFADDR,
	unix.RTNLGRP_IPV4_ROUTE, unix.RTNLGRP_IPV6_ROUTE}

// Run subscribes, dumps the initial state, and follows events until ctx is done.
func (m *Monitor) Run(ctx context.Context) error {
	c, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: m.cfg.NetNS})
	if err != nil {
		return fmt.Errorf("ifmon: dial rtnetlink: %w", err)
	}
	var once sync.Once
	closeConn := func() { once.Do(func() { c.Close() }) }
	defer closeConn()
	for _, g := range groups {
		if err := c.JoinGroup(g); err != nil {
			return fmt.Errorf("ifmon: join group %d: %w", g, err)
		}
	}
	rbuf := m.cfg.ReadBuffer
	if rbuf > 0 {
		if err := c.SetReadBuffer(rbuf); err != nil {
			return fmt.Errorf("ifmon: set read buffer: %w", err)
		}
	}
	stop := context.AfterFunc(ctx, closeConn)
	defer stop()
	q, err := netlink.Dial(unix.NETLINK_ROUTE, &netlink.Config{NetNS: m.cfg.NetNS, Strict: true})
	if err != nil {
		return fmt.Errorf("ifmon: dial rtnetlink for bridge ports: %w", err)
	}
	defer q.Close()

	if err := m.resync(); err != nil {
		return err
	}
	m.lookBehindPorts(q)
	if m.cfg.Synced != nil {
		m.cfg.Synced()
	}
	for {
		if err := c.SetReadDeadline(m.nextLookup()); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("ifmon: set read deadline: %w", err)
		}
		msgs, err := c.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			m.lookBehindPorts(q)
			continue
		}
		if errors.Is(err, unix.ENOBUFS) {
			m.enobufs.Add(1)
			if rbuf <= 0 {
				rbuf = 1 << 20
			} else if rbuf < 1<<28 {
				rbuf *= 2
			}
			if err := c.SetReadBuffer(rbuf); err != nil {
				return fmt.Errorf("ifmon: enlarge read buffer to %d: %w", rbuf, err)
			}
			if err := drain(c); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("ifmon: drain after ENOBUFS: %w", err)
			}
			m.resyncs.Add(1)
			if err := m.resync(); err != nil {
				return err
			}
			m.lookBehindPorts(q)
			continue
		}
		if err != nil {
			return fmt.Errorf("ifmon: receive: %w", err)
		}
		m.mu.Lock()
		next := m.state.clone()
		m.mu.Unlock()
		redump := false
		for _, msg := range msgs {
			redump = apply(next, msg) || redump
		}
		m.commit(next)
		if redump {
			// The kernel flushes the routes of a link that goes down without always sending
			// RTM_DELROUTE for each: read them back rather than guess.
			m.dumps.Add(1)
			if err := m.resync(); err != nil {
				return err
			}
		}
		m.lookBehindPorts(q)
	}
}

// drain reads and discards every queued event until none comes for a few milliseconds. After an
// overflow the kernel reports ENOBUFS once and then drops events silently until the socket's
// queue has been emptied once (NETLINK_S_CONGESTED), so the re-dump must start only after the
// queue is empty: every event dropped before that is then covered by the dump, and every later
// loss is reported again.
func drain(c *netlink.Conn) error {
	defer c.SetReadDeadline(time.Time{})
	for {
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Millisecond)); err != nil {
			return err
		}
		_, err := c.Receive()
		switch {
		case err == nil, errors.Is(err, unix.ENOBUFS):
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil
		default:
			return err
		}
	}
}

// resync dumps the kernel's state and makes it the monitor's, emitting the differences.
func (m *Monitor) resync() error {
	s, err := Dump(m.cfg.NetNS)
	if err != nil {
		return err
	}
	m.mu.Lock()
	keepBehind(m.state, s)
	m.mu.Unlock()
	m.commit(s)
	return nil
}

func (m *Monitor) commit(next State) {
	m.mu.Lock()
	prev := m.state
	m.state = next
	m.mu.Unlock()
	ev, up := diff(prev, next)
	if len(ev) == 0 {
		return
	}
	m.events.Add(uint64(len(ev)))
	if m.cfg.Handler != nil {
		m.cfg.Handler.Changes(ev, up)
	}
}

// Dump reads links, addresses and main-table host routes of the namespace given by netnsFD
// (0 = current).
func Dump(netnsFD int) (State, error) {
	c, err := rtnetlink.Dial(&netlink.Config{NetNS: netnsFD})
	if err != nil {
		return State{}, fmt.Errorf("ifmon: dial rtnetlink for dump: %w", err)
	}
	defer c.Close()
	s := newState()
	links, err := c.Link.List()
	if err != nil {
		return State{}, fmt.Errorf("ifmon: dump links: %w", err)
	}
	for i := range links {
		setLink(s, &links[i])
	}
	addrs, err := c.Address.List()
	if err != nil {
		return State{}, fmt.Errorf("ifmon: dump addresses: %w", err)
	}
	for i := range addrs {
		if k, ok := addrKey(&addrs[i]); ok {
			s.Addrs[k] = struct{}{}
		}
	}
	routes, err := c.Route.List()
	if err != nil {
		return State{}, fmt.Errorf("ifmon: dump routes: %w", err)
	}
	for i := range routes {
		if dst, idx, ok := hostRoute(&routes[i]); ok {
			s.Routes[dst] = idx
		}
	}
	return s, nil
}

// apply changes s by one message; it reports whether a full dump is needed to learn what the
// kernel changed without telling (a link with routes went down).
func apply(s State, msg netlink.Message) bool {
	switch t := msg.Header.Type; t {
	case unix.RTM_NEWLINK, unix.RTM_DELLINK:
		var lm rtnetlink.LinkMessage
		if lm.UnmarshalBinary(msg.Data) != nil {
			return false
		}
		if lm.Family == unix.AF_BRIDGE {
			// a bridge's report on one of its ports (port state, a port leaving the bridge):
			// partial, and an RTM_DELLINK of it does not delete the link
			return false
		}
		if t == unix.RTM_NEWLINK {
			prev, had := s.Links[lm.Index]
			setLink(s, &lm)
			if had && prev.Up && !s.Links[lm.Index].Up {
				for _, idx := range s.Routes {
					if idx == lm.Index {
						return true
					}
				}
			}
			return false
		}
		delete(s.Links, lm.Index)
		for dst, idx := range s.Behind {
			if idx == lm.Index {
				delete(s.Behind, dst)
			}
		}
		for k := range s.Addrs {
			if k.Index == lm.Index {
				delete(s.Addrs, k)
			}
		}
		for dst, idx := range s.Routes {
			if idx == lm.Index {
				delete(s.Routes, dst)
			}
		}
	case unix.RTM_NEWADDR, unix.RTM_DELADDR:
		var am rtnetlink.AddressMessage
		if am.UnmarshalBinary(msg.Data) != nil {
			return false
		}
		if k, ok := addrKey(&am); ok {
			if t == unix.RTM_NEWADDR {
				s.Addrs[k] = struct{}{}
			} else {
				delete(s.Addrs, k)
			}
		}
	case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
		var rm rtnetlink.RouteMessage
		if rm.UnmarshalBinary(msg.Data) != nil {
			return false
		}
		if dst, idx, ok := hostRoute(&rm); ok {
			if t == unix.RTM_NEWROUTE {
				s.Routes[dst] = idx
			} else if s.Routes[dst] == idx {
				delete(s.Routes, dst)
			}
		}
	}
	return false
}

func setLink(s State, lm *rtnetlink.LinkMessage) {
	if lm.Attributes == nil {
		return
	}
	l := Link{Index: lm.Index, Name: lm.Attributes.Name}
	op := lm.Attributes.OperationalState
	l.Up = lm.Flags&unix.IFF_UP != 0 && (op == rtnetlink.OperStateUp || op == rtnetlink.OperStateUnknown)
	if lm.Attributes.Info != nil {
		l.Kind = lm.Attributes.Info.Kind
	}
	if lm.Attributes.Master != nil {
		l.Master = *lm.Attributes.Master
	}
	s.Links[l.Index] = l
}

func addrKey(am *rtnetlink.AddressMessage) (AddrKey, bool) {
	ip := am.Attributes.Local
	if ip == nil {
		ip = am.Attributes.Address
	}
	a, ok := ipAddr(ip)
	if !ok {
		return AddrKey{}, false
	}
	p, err := a.Prefix(int(am.PrefixLength))
	if err != nil {
		return AddrKey{}, false
	}
	return AddrKey{Index: am.Index, Prefix: netip.PrefixFrom(a, p.Bits())}, true
}

func hostRoute(rm *rtnetlink.RouteMessage) (netip.Prefix, uint32, bool) {
	table := uint32(rm.Table)
	if rm.Attributes.Table != 0 {
		table = rm.Attributes.Table
	}
	if table != unix.RT_TABLE_MAIN || rm.Type != unix.RTN_UNICAST || rm.Attributes.OutIface == 0 {
		return netip.Prefix{}, 0, false
	}
	a, ok := ipAddr(rm.Attributes.Dst)
	if !ok || int(rm.DstLength) != a.BitLen() {
		return netip.Prefix{}, 0, false
	}
	return netip.PrefixFrom(a, a.BitLen()), rm.Attributes.OutIface, true
}

func ipAddr(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// diff returns the events turning prev into next and their translation into graph updates.
func diff(prev, next State) ([]Event, []model.Update) {
	var ev []Event
	var up []model.Update
	for _, idx := range slices.Sorted(maps.Keys(prev.Links)) {
		if _, ok := next.Links[idx]; !ok {
			ev = append(ev, LinkDeleted{Link: prev.Links[idx]})
		}
	}
	for _, idx := range slices.Sorted(maps.Keys(next.Links)) {
		if l, ok := prev.Links[idx]; !ok || l != next.Links[idx] {
			ev = append(ev, LinkSet{Link: next.Links[idx]})
		}
	}
	for k := range prev.Addrs {
		if _, ok := next.Addrs[k]; !ok {
			ev = append(ev, AddrDeleted{Addr: k})
		}
	}
	for k := range next.Addrs {
		if _, ok := prev.Addrs[k]; !ok {
			ev = append(ev, AddrSet{Addr: k})
		}
	}
	pa, na := hostAddrs(prev), hostAddrs(next)
	for a := range pa {
		if _, ok := na[a]; !ok {
			up = append(up, model.HostAddrDeleted(a))
		}
	}
	for a := range na {
		if _, ok := pa[a]; !ok {
			up = append(up, a)
		}
	}
	for dst := range prev.Routes {
		if _, ok := next.Routes[dst]; !ok {
			ev = append(ev, RouteDeleted{Dst: dst})
			up = append(up, model.RouteDeleted{Dst: dst})
		}
	}
	for dst, idx := range next.Routes {
		name := next.Links[idx].Name
		pidx, had := prev.Routes[dst]
		if !had || pidx != idx || prev.Links[pidx].Name != name {
			ev = append(ev, RouteSet{Dst: dst, Index: idx, Interface: name})
		}
	}
	for dst := range prev.Behind {
		if _, ok := next.Behind[dst]; !ok {
			ev = append(ev, PortAddrDeleted{Dst: dst})
		}
	}
	for dst, idx := range next.Behind {
		name := next.Links[idx].Name
		pidx, had := prev.Behind[dst]
		if !had || pidx != idx || prev.Links[pidx].Name != name {
			ev = append(ev, PortAddrSet{Dst: dst, Index: idx, Interface: name})
		}
	}
	// the graph learns a pod's interface from either: its host route, else its bridge port
	pw, nw := podIfaces(prev), podIfaces(next)
	for dst := range pw {
		if _, ok := nw[dst]; !ok {
			up = append(up, model.RouteDeleted{Dst: dst})
		}
	}
	for dst, name := range nw {
		if pname, had := pw[dst]; !had || pname != name {
			up = append(up, model.RouteSet{Dst: dst, Interface: name})
		}
	}
	return ev, up
}

// podIfaces names the interface behind each pod address: its host route's, else its bridge
// port's.
func podIfaces(s State) map[netip.Prefix]string {
	out := make(map[netip.Prefix]string, len(s.Routes)+len(s.Behind))
	for dst, idx := range s.Behind {
		out[dst] = s.Links[idx].Name
	}
	for dst, idx := range s.Routes {
		out[dst] = s.Links[idx].Name
	}
	return out
}

// hostAddrs are the node's addresses with the name of the interface holding each (a renamed
// interface's addresses are deleted and set again under its new name).
func hostAddrs(s State) map[model.HostAddrSet]struct{} {
	out := make(map[model.HostAddrSet]struct{}, len(s.Addrs))
	for k := range s.Addrs {
		out[model.HostAddrSet{Addr: k.Prefix.Addr(), Interface: s.Links[k.Index].Name}] = struct{}{}
	}
	return out
}
