package ruleset

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Receive buffer of the event socket. The kernel queues the events of a whole transaction at
// once, one message per element, rule, set and chain; the Conn's own transactions are filtered
// out before they are queued (filterOwn). The kernel doubles the size asked for: 32 MiB holds the
// events of another process's flush of a 200,000-element set, read only after it committed
// (the queue grows by one event per element). Each ENOBUFS doubles it up to monitorBufferMax.
// Memory is charged only as events are queued.
const (
	monitorBuffer    = 32 << 20
	monitorBufferMax = 256 << 20
)

// drainIdle is how long the event socket must stay silent for its queue to count as empty after
// an overflow.
const drainIdle = 5 * time.Millisecond

// TableChange is one transaction committed by another netlink socket than the Conn's that changed
// the watched table, as the kernel's nftables events describe it; or, with Lost, a gap in those
// events (the socket's queue overflowed, or the Monitor was out of the event group during a
// large batch of the Conn's while another transaction committed): what changed is unknown.
type TableChange struct {
	// PID and Comm are the task that committed the transaction (NFTA_GEN_PROC_PID and
	// NFTA_GEN_PROC_NAME): its thread id as the initial PID namespace numbers it, and its
	// command name, at most 15 bytes.
	PID  uint32
	Comm string
	// Port is the netlink port id of the committing socket.
	Port uint32
	// Gen is the ruleset generation the transaction produced.
	Gen uint32
	// Objects counts the table's objects the transaction changed, in the order first seen.
	Objects []ObjectChange
	// Lost: changes by others may have gone unreported, for Reason (lostOverflow, lostQuiet);
	// the other fields are empty.
	Lost   bool
	Reason string
}

// Reasons of a Lost report.
const (
	lostOverflow = "the event socket overflowed"
	lostQuiet    = "another transaction committed while the Conn's own large batch went unwatched"
)

// ObjectChange counts the events of one kind for one object of a transaction: "delete rule" ×
// 3 in chain forward_egress, "delete element" × 10 in set ingress_v4.
type ObjectChange struct {
	Op    string // "add" or "delete" (NFT_MSG_NEW… or NFT_MSG_DEL…), "change" for other types
	Kind  string // table, chain, rule, set, element, object, flowtable
	Name  string // the chain of a rule, the set of an element, the object itself ("" for the table)
	Count int
}

// maxNames bounds the names String lists per kind of change.
const maxNames = 4

// String describes the change for a log line: who committed it and what it changed, by
// operation and kind of object (the table first, then chains, sets, rules, elements), with the
// chains and sets concerned.
func (c TableChange) String() string {
	if c.Lost {
		return "changes may have gone unreported: " + c.Reason
	}
	type group struct {
		op, kind string
		count    int
		names    []string
	}
	var groups []*group
	for _, o := range c.Objects {
		i := slices.IndexFunc(groups, func(g *group) bool { return g.op == o.Op && g.kind == o.Kind })
		if i < 0 {
			groups = append(groups, &group{op: o.Op, kind: o.Kind})
			i = len(groups) - 1
		}
		g := groups[i]
		g.count += o.Count
		if o.Name != "" && !slices.Contains(g.names, o.Name) {
			g.names = append(g.names, o.Name)
		}
	}
	rank := func(kind string) int {
		if i := slices.Index([]string{"table", "chain", "set", "rule", "element", "object", "flowtable"}, kind); i >= 0 {
			return i
		}
		return 7
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return rank(a.kind) - rank(b.kind) })
	var b strings.Builder
	fmt.Fprintf(&b, "pid %d (%s), generation %d:", c.PID, c.Comm, c.Gen)
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " %s %s", g.op, g.kind)
		if g.count > 1 {
			fmt.Fprintf(&b, " ×%d", g.count)
		}
		if len(g.names) == 0 {
			continue
		}
		in := map[string]string{"rule": " in chain", "element": " in set"}[g.kind]
		switch {
		case in == "":
			b.WriteString(": ")
		case len(g.names) > 1:
			b.WriteString(in + "s ")
		default:
			b.WriteString(in + " ")
		}
		b.WriteString(strings.Join(g.names[:min(len(g.names), maxNames)], ", "))
		if len(g.names) > maxNames {
			fmt.Fprintf(&b, ", … (%d)", len(g.names))
		}
	}
	return b.String()
}

// Monitor reports the transactions of other netlink sockets that change one inet table, from the
// kernel's nftables events in the Conn's network namespace; see the package documentation
// ("Monitor") for the events, how the Conn's own are told and kept out, overflows and quiet
// batches.
type Monitor struct {
	sock  *netlink.Conn
	table string
	own   *atomic.Uint32 // the Conn's port: its batches' events are skipped
	// timed names the Conn's timeout sets: others' element events in them are not reported
	timed *atomic.Pointer[map[string]bool]
	out   chan<- TableChange
	// filtered is the port whose datagrams the socket's filter drops (filterOwn)
	filtered uint32
	rbuf     int
	// failed is set when the Monitor could not rejoin the event group after a quiet batch: its
	// socket is closed, and Run returns this error.
	failed atomic.Pointer[error]
	// read counts the messages read, sent the changes handed to out, dropped those not handed
	// because it was full, lost the Lost reports (tests and diagnostics).
	read, sent, dropped, lost atomic.Uint64
}

// Monitor subscribes to the nftables events of the Conn's network namespace, for the inet table
// named table; Run reads them and hands the changes to out. The Monitor runs in a goroutine of
// its own; the Conn takes it out of the event group during its large batches (quiet batches,
// above), which may report to out too.
func (c *Conn) Monitor(table string, out chan<- TableChange) (*Monitor, error) {
	cfg := &netlink.Config{}
	if c.netnsFD >= 0 {
		cfg.NetNS = c.netnsFD
	}
	sock, err := netlink.Dial(unix.NETLINK_NETFILTER, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening the nftables event socket: %w", err)
	}
	if err := sock.SetReadBuffer(monitorBuffer); err != nil {
		sock.Close()
		return nil, fmt.Errorf("nftables event socket read buffer: %w", err)
	}
	if err := sock.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil {
		sock.Close()
		return nil, fmt.Errorf("joining the nftables event group: %w", err)
	}
	m := &Monitor{sock: sock, table: table, own: &c.port, timed: &c.timed, out: out, rbuf: monitorBuffer}
	if err := m.filterOwn(); err != nil {
		sock.Close()
		return nil, err
	}
	c.monitorsMu.Lock()
	c.monitors = append(c.monitors, m)
	c.monitorsMu.Unlock()
	return m, nil
}

// quietBatch is the size from which a batch is sent with the Conn's Monitors out of the event
// group: ≈ 250 elements with a verdict and a comment (68 bytes each in a batch) or ≈ 1,000 plain
// IPv4 ones (16 bytes), whose events would cost the commit ≈ 0.5-2 ms, against four system calls
// for leaving, joining and reading the generation twice.
const quietBatch = 16 << 10

// sendWatched sends the batch w. A batch of quietBatch bytes or more, while Monitors are open,
// is sent with them out of the event group, and any other transaction committed meanwhile is
// reported Lost (see Monitor).
func (c *Conn) sendWatched(w *wire) error {
	c.monitorsMu.Lock()
	ms := slices.Clone(c.monitors)
	c.monitorsMu.Unlock()
	if len(ms) == 0 || w.size() < quietBatch {
		return c.send(w)
	}
	before, gerr := c.generation()
	for _, m := range ms {
		m.leave()
	}
	err := c.send(w)
	if c.quietHook != nil {
		c.quietHook()
	}
	for _, m := range ms {
		m.join()
	}
	after, aerr := c.generation()
	want := before
	if err == nil {
		want++
	}
	if gerr != nil || aerr != nil || after != want {
		for _, m := range ms {
			m.report(TableChange{Lost: true, Reason: lostQuiet})
		}
	}
	return err
}

// generation reads the ruleset generation of the Conn's namespace (NFT_MSG_GETGEN).
func (c *Conn) generation() (uint32, error) {
	msgs, err := c.sock.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("reading the ruleset generation: %w", err)
	}
	if len(msgs) != 1 || len(msgs[0].Data) < 4 {
		return 0, errors.New("reading the ruleset generation: unexpected reply")
	}
	gen, _, _ := decodeGen(msgs[0].Data[4:])
	return gen, nil
}

// leave takes the Monitor out of the event group (errors once Run has closed the socket are
// of no account: nothing listens any more).
func (m *Monitor) leave() { _ = m.sock.LeaveGroup(unix.NFNLGRP_NFTABLES) }

// join puts the Monitor back into the event group. If that fails the Monitor could no longer
// hear anything: its socket is closed so that Run returns the error.
func (m *Monitor) join() {
	if err := m.sock.JoinGroup(unix.NFNLGRP_NFTABLES); err != nil && m.failed.Load() == nil {
		err = fmt.Errorf("rejoining the nftables event group: %w", err)
		m.failed.Store(&err)
		m.sock.Close()
	}
}

// filterOwn makes the kernel drop, before they are queued, the event datagrams of the Conn's
// own batches, so that a Replace of a large table (one event per element) costs the Monitor
// nothing and cannot overflow its queue. The kernel packs the events of one transaction into
// datagrams of their own and ends it with a NEWGEN datagram, all carrying the committing
// socket's port id in their headers; the filter compares the first header's (nlmsg_pid, at
// offset 12, in host byte order, which a BPF word load reads as big-endian). After the Conn
// re-dials, Run moves the filter to the new port; until then event skips its events.
func (m *Monitor) filterOwn() error {
	port := m.own.Load()
	if port == m.filtered {
		return nil
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 12, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, port)), SkipFalse: 1},
		bpf.RetConstant{Val: 0},
		bpf.RetConstant{Val: 0xffffffff},
	})
	if err != nil {
		return fmt.Errorf("assembling the nftables event filter: %w", err)
	}
	if err := m.sock.SetBPF(prog); err != nil {
		return fmt.Errorf("filtering the nftables event socket: %w", err)
	}
	m.filtered = port
	return nil
}

// Read counts the event messages read; Sent, Dropped and Lost count the changes handed to the
// channel, those not handed because it was full, and the Lost reports.
func (m *Monitor) Read() uint64    { return m.read.Load() }
func (m *Monitor) Sent() uint64    { return m.sent.Load() }
func (m *Monitor) Dropped() uint64 { return m.dropped.Load() }
func (m *Monitor) Lost() uint64    { return m.lost.Load() }

// Run reads events until ctx is done, then closes the socket and returns nil; it returns an
// error only if the socket fails otherwise. Each change is handed to out without blocking: when
// out is full the change is dropped, which loses no repair — a change already waiting in out
// was reported after this one was committed, so the read-back it leads to, which starts later,
// sees this one too. Only its description is lost (Dropped counts them).
func (m *Monitor) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { m.sock.Close() })
	defer func() {
		if stop() {
			m.sock.Close()
		}
	}()
	pending := map[uint32]*TableChange{} // by port: events of the table awaiting their NEWGEN
	for {
		msgs, err := m.sock.Receive()
		if ctx.Err() != nil {
			return nil
		}
		if failed := m.failed.Load(); failed != nil {
			return *failed
		}
		if errors.Is(err, unix.ENOBUFS) {
			if err := m.overflowed(); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			clear(pending)
			m.report(TableChange{Lost: true, Reason: lostOverflow})
			continue
		}
		if err != nil {
			return fmt.Errorf("reading nftables events: %w", err)
		}
		if err := m.filterOwn(); err != nil {
			return err
		}
		m.read.Add(uint64(len(msgs)))
		for _, msg := range msgs {
			if c := m.event(msg, pending); c != nil {
				m.report(*c)
			}
		}
	}
}

// report hands c to out without blocking (see Run); it is called from Run and from the Conn's
// quiet batches.
func (m *Monitor) report(c TableChange) {
	if c.Lost {
		m.lost.Add(1)
	}
	select {
	case m.out <- c:
		m.sent.Add(1)
	default:
		m.dropped.Add(1)
	}
}

// overflowed doubles the socket's buffer and reads its queue empty: the kernel resumes
// delivering events only then.
func (m *Monitor) overflowed() error {
	if m.rbuf < monitorBufferMax {
		m.rbuf *= 2
		if err := m.sock.SetReadBuffer(m.rbuf); err != nil {
			return fmt.Errorf("enlarging the nftables event socket's buffer to %d: %w", m.rbuf, err)
		}
	}
	defer m.sock.SetReadDeadline(time.Time{})
	for {
		if err := m.sock.SetReadDeadline(time.Now().Add(drainIdle)); err != nil {
			return fmt.Errorf("draining nftables events: %w", err)
		}
		_, err := m.sock.Receive()
		switch {
		case err == nil, errors.Is(err, unix.ENOBUFS):
		case errors.Is(err, os.ErrDeadlineExceeded):
			return nil
		default:
			return fmt.Errorf("draining nftables events: %w", err)
		}
	}
}

// event folds one message into pending and returns the change it completes, if any.
func (m *Monitor) event(msg netlink.Message, pending map[uint32]*TableChange) *TableChange {
	if msg.Header.Type>>8 != unix.NFNL_SUBSYS_NFTABLES || len(msg.Data) < 4 {
		return nil
	}
	port := msg.Header.PID
	if port == m.own.Load() {
		return nil
	}
	typ := int(msg.Header.Type & 0xff)
	if typ == unix.NFT_MSG_NEWGEN {
		c := pending[port]
		if c == nil {
			return nil
		}
		delete(pending, port)
		c.Gen, c.PID, c.Comm = decodeGen(msg.Data[4:])
		return c
	}
	if msg.Data[0] != unix.NFPROTO_INET {
		return nil
	}
	table, name, count := decodeObject(typ, msg.Data[4:])
	if table != m.table {
		return nil
	}
	if typ == unix.NFT_MSG_NEWSETELEM || typ == unix.NFT_MSG_DELSETELEM {
		if timed := m.timed.Load(); timed != nil && (*timed)[name] {
			return nil // an element of a timeout set: its owner's to write
		}
	}
	op, kind := describe(typ)
	c := pending[port]
	if c == nil {
		c = &TableChange{Port: port}
		pending[port] = c
	}
	i := slices.IndexFunc(c.Objects, func(o ObjectChange) bool { return o.Op == op && o.Kind == kind && o.Name == name })
	if i < 0 {
		c.Objects = append(c.Objects, ObjectChange{Op: op, Kind: kind, Name: name})
		i = len(c.Objects) - 1
	}
	c.Objects[i].Count += count
	return nil
}

// decodeObject reads the table, the object's name (a rule's chain, an element's set) and the
// number of objects (elements in the message, else 1) of an event's attributes. Every object
// message of nf_tables names its table in attribute 1.
func decodeObject(typ int, attrs []byte) (table, name string, count int) {
	nameAttr := uint16(2) // NFTA_RULE_CHAIN, NFTA_SET_NAME, NFTA_SET_ELEM_LIST_SET, NFTA_OBJ_NAME, …
	switch typ {
	case unix.NFT_MSG_NEWTABLE, unix.NFT_MSG_DELTABLE:
		nameAttr = 0 // the table is the object
	case unix.NFT_MSG_NEWCHAIN, unix.NFT_MSG_DELCHAIN:
		nameAttr = unix.NFTA_CHAIN_NAME
	}
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return "", "", 0
	}
	count = 1
	for ad.Next() {
		switch {
		case ad.Type() == 1:
			table = ad.String()
		case ad.Type() == nameAttr:
			name = ad.String()
		case ad.Type() == unix.NFTA_SET_ELEM_LIST_ELEMENTS && (typ == unix.NFT_MSG_NEWSETELEM || typ == unix.NFT_MSG_DELSETELEM):
			count = 0
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					count++
				}
				return nil
			})
		}
	}
	if ad.Err() != nil {
		return "", "", 0
	}
	return table, name, count
}

// decodeGen reads NFT_MSG_NEWGEN's generation, pid and command name.
func decodeGen(attrs []byte) (gen, pid uint32, comm string) {
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return 0, 0, ""
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_GEN_ID:
			gen = ad.Uint32()
		case unix.NFTA_GEN_PROC_PID:
			pid = ad.Uint32()
		case unix.NFTA_GEN_PROC_NAME:
			comm = ad.String()
		}
	}
	return gen, pid, comm
}

// describe names an event type: its operation and the kind of object.
func describe(typ int) (op, kind string) {
	switch typ {
	case unix.NFT_MSG_NEWTABLE:
		return "add", "table"
	case unix.NFT_MSG_DELTABLE:
		return "delete", "table"
	case unix.NFT_MSG_NEWCHAIN:
		return "add", "chain"
	case unix.NFT_MSG_DELCHAIN:
		return "delete", "chain"
	case unix.NFT_MSG_NEWRULE:
		return "add", "rule"
	case unix.NFT_MSG_DELRULE:
		return "delete", "rule"
	case unix.NFT_MSG_NEWSET:
		return "add", "set"
	case unix.NFT_MSG_DELSET:
		return "delete", "set"
	case unix.NFT_MSG_NEWSETELEM:
		return "add", "element"
	case unix.NFT_MSG_DELSETELEM:
		return "delete", "element"
	case unix.NFT_MSG_NEWOBJ:
		return "add", "object"
	case unix.NFT_MSG_DELOBJ:
		return "delete", "object"
	case unix.NFT_MSG_NEWFLOWTABLE:
		return "add", "flowtable"
	case unix.NFT_MSG_DELFLOWTABLE:
		return "delete", "flowtable"
	}
	return "change", fmt.Sprintf("message type %d", typ)
}
