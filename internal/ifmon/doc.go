// Package ifmon is the agent's sense of the host network: it watches links, host addresses and
// host routes of one network namespace over rtnetlink and reports their changes.
//
// Place in the data flow (docs/design.md §2): beside internal/graph. Its events translate
// (ToUpdates) into model.RouteSet / RouteDeleted (a local pod's host route /32 or /128 and the
// host interface it leaves through) and model.HostAddrSet / HostAddrDeleted (addresses of the
// node itself, each with the interface holding it: host endpoints without interfaceName apply to
// the interfaces holding their expected IPs). The graph gives each local endpoint the interface of its host route, which is
// how internal/nft knows the interface behind each pod (its sources sets) and fails closed on
// workload interfaces whose pod it has not programmed, through prefix rules of its own. A pod on
// a bridge has no host route: the monitor finds its addresses on the peer of the bridge's veth
// port, in the pod's namespace (bridge.go), and reports them as RouteSet of the port too
// (events PortAddrSet / PortAddrDeleted); a host route wins over a port for one address. A
// bridge's own reports on its ports (link messages of family AF_BRIDGE) are not link changes and
// are ignored.
// WorkloadInterfaces and IsWorkload (interface names matching Config.WorkloadPrefixes, such as
// "veth" or "cali") are not on that path.
//
// Design: one NETLINK_ROUTE socket, bound to the namespace given by its fd (0 = current), joins
// the link, IPv4/IPv6 address and IPv4/IPv6 route multicast groups (by group number with
// JoinGroup); then a full dump (links, addresses, main-table unicast routes) is taken on a second
// socket and reconciled against the state (Config.Synced is called once it has been handed over).
// Events follow; nothing is polled but a new bridge port (bridge.go: every 250 ms, at most 30 s,
// as the pod's namespace sends no events). Each received batch is applied to the state and the
// differences are delivered as one []Event to the Handler, in the goroutine running Run.
//
// Routes are kept by destination with the interface index they go out of; the interface name is
// resolved through the link table, so a rename emits RouteSet with the new name and a link
// deletion drops its routes (the kernel flushes routes of a deleted device without always sending
// RTM_DELROUTE for each, so ifmon does it itself). A link that goes down while routes use it
// triggers a full dump too (IPv4 flushes such routes without notification).
//
// Invariants:
//   - after every processed batch, the state equals what the kernel reported;
//   - on ENOBUFS (the kernel dropped multicast events because the socket buffer was full) the
//     receive buffer is doubled (SO_RCVBUFFORCE through SetReadBuffer), the queued events are
//     drained (after one ENOBUFS the kernel drops further events silently until the queue has
//     been emptied once), and only then is the whole state dumped again and the differences
//     emitted as events: the state never silently diverges from the kernel. Resyncs counts these.
//   - Run returns when its context is done, after closing its sockets.
package ifmon
