// Package trace follows real packets of one flow through a node's nftables ruleset with the
// kernel's own tracing: `nftpolicy trace` on a node.
//
// How: a table of its own (inet nftpolicy_trace, never the agent's: the agent repairs any change
// to its table within milliseconds) holds base chains on the forward, input and output hooks
// (for the node's own traffic, Flow.FromNode or ToNode, only the output or prerouting one) at
// priority -350, before every standard priority (raw is -300) and so before the agent's chains
// (filter + 7 and + 8), each with policy accept and one rule that matches the flow and sets
// `meta nftrace set 1`, no verdict: it never changes what happens to a packet. The kernel then reports every rule a
// traced packet matches, in every table and chain it goes through on that hook and the later
// ones, as NFT_MSG_TRACE messages to the NFNLGRP_NFTRACE netlink group, which a socket of this
// package joins before the rule exists. The messages' NFTA_TRACE_* attributes are decoded here
// (google/nftables v0.3.0 has no decoder): table, chain, rule handle, event type (rule, return,
// chain policy), verdict, packet id, headers, interfaces. Rule handles are resolved to their
// comments by listing the chain's rules, again when the handle is unknown (the agent replaced its
// table meanwhile, with new handles). No `nft` executable is used.
//
// A packet is complete at a drop, or once its events have stopped for Quiet: its last verdict
// (the policy or an accept of the last base chain it met) is its fate. Run ends after MaxPackets
// complete packets, at Timeout, or when its context ends (SIGINT, SIGTERM), and then always
// deletes its table in one transaction, as it added it in one; a table left by a killed trace
// (SIGKILL) is replaced by the next trace, and `nftpolicy trace --cleanup` deletes it.
package trace

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Table is the name of the trace's own table.
const Table = "nftpolicy_trace"

// Priority of the trace's chains: before every standard priority (raw, -300).
const Priority = -350

// Quiet is how long a packet's events must stop before it counts as complete.
const Quiet = 200 * time.Millisecond

// Flow selects the packets to trace: every set field must match.
type Flow struct {
	Src, Dst netip.Addr // of one family when both are set
	Proto    uint8      // 0: any
	Dport    uint16     // 0: any; TCP, UDP and SCTP only
	// FromNode and ToNode select the node's own traffic: from it (its output hook) and to it
	// (from its prerouting hook, through the doNotTrack and preDNAT stages to the input hook),
	// where its host endpoints are judged. Neither: every packet the node
	// forwards, receives or sends.
	FromNode, ToNode bool
}

func (f Flow) String() string {
	any := func(a netip.Addr, node bool) string {
		switch {
		case node && a.IsValid():
			return "this node (" + a.String() + ")"
		case node:
			return "this node"
		case a.IsValid():
			return a.String()
		}
		return "any"
	}
	s := any(f.Src, f.FromNode) + " → " + any(f.Dst, f.ToNode)
	if f.Proto != 0 {
		s += " " + protoName(f.Proto)
	}
	if f.Dport != 0 {
		s += fmt.Sprintf("/%d", f.Dport)
	}
	return s
}

// Config configures a trace.
type Config struct {
	NetNSFD    int // the node's network namespace; < 0: the current one
	Flow       Flow
	MaxPackets int           // complete packets to trace; at least 1
	Timeout    time.Duration // 0: until ctx ends
}

// Step is one event of a traced packet: a rule it matched, a chain it returned from, or a base
// chain's policy.
type Step struct {
	Table, Chain string
	Kind         string // "rule", "return" or "policy"
	Handle       uint64 // the rule's handle (Kind "rule")
	Comment      string // the rule's comment, if it has one
	Verdict      string // accept, drop, continue, jump X, goto X, return
}

// Packet is one traced packet, complete.
type Packet struct {
	ID       uint32
	Src, Dst netip.Addr
	Proto    uint8
	Dport    uint16
	Iif, Oif string
	Steps    []Step
	// Verdict is the packet's fate: "drop", or "accept" when no rule dropped it.
	Verdict string
}

// Run arms the trace, calls each for every complete packet, and removes the trace's table when
// MaxPackets packets are complete, Timeout passes or ctx ends, whatever else happened. It returns
// the number of complete packets.
func Run(ctx context.Context, cfg Config, each func(Packet)) (int, error) {
	if cfg.MaxPackets < 1 {
		return 0, errors.New("trace: MaxPackets must be at least 1")
	}
	if cfg.Flow.Src.IsValid() && cfg.Flow.Dst.IsValid() && cfg.Flow.Src.Is4() != cfg.Flow.Dst.Is4() {
		return 0, errors.New("trace: source and destination of different families")
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	nc := &netlink.Config{}
	var opts []nftables.ConnOption
	if cfg.NetNSFD >= 0 {
		nc.NetNS = cfg.NetNSFD
		opts = append(opts, nftables.WithNetNSFd(cfg.NetNSFD))
	}
	events, err := netlink.Dial(unix.NETLINK_NETFILTER, nc)
	if err != nil {
		return 0, fmt.Errorf("trace: opening the event socket: %w", err)
	}
	defer events.Close()
	if err := events.SetReadBuffer(8 << 20); err != nil {
		return 0, fmt.Errorf("trace: event socket buffer: %w", err)
	}
	if err := events.JoinGroup(unix.NFNLGRP_NFTRACE); err != nil {
		return 0, fmt.Errorf("trace: joining the trace group: %w", err)
	}
	conn, err := nftables.New(opts...)
	if err != nil {
		return 0, fmt.Errorf("trace: opening nftables: %w", err)
	}
	if err := arm(conn, cfg.Flow); err != nil {
		return 0, err
	}
	defer func() {
		if derr := Remove(cfg.NetNSFD); derr != nil && err == nil {
			err = derr
		}
	}()
	t := &tracer{conn: conn, each: each, max: cfg.MaxPackets, open: map[uint32]*open{},
		comments: map[[2]string]map[uint64]string{}, ifname: ifindexName}
	if cfg.NetNSFD < 0 {
		t.ifname = localIfname // this process sees the traced namespace's interfaces
	}
	err = t.read(ctx, events)
	return t.done, err
}

// arm adds the trace table in one transaction, replacing one a killed trace left.
func arm(c *nftables.Conn, f Flow) error {
	t := &nftables.Table{Family: nftables.TableFamilyINet, Name: Table}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	prio := nftables.ChainPriority(Priority)
	policy := nftables.ChainPolicyAccept
	for _, h := range f.hooks() {
		ch := c.AddChain(&nftables.Chain{Table: t, Name: h.chain, Type: nftables.ChainTypeFilter,
			Hooknum: h.hook, Priority: &prio, Policy: &policy})
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: flowExprs(f),
			UserData: userdata.AppendString(nil, userdata.TypeComment, "nftpolicy trace of "+f.String())})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("trace: adding table %s: %w", Table, err)
	}
	return nil
}

// traceHook is one base chain of the trace's table: its name and hook.
type traceHook struct {
	chain string
	hook  *nftables.ChainHook
}

// hooks are the hooks where f's packets are marked: forward, input and output, or for the
// node's own traffic only the hook of its direction (both for its traffic to itself): output
// for the node's traffic out, which its raw_out (doNotTrack) and output_host chains meet,
// prerouting for its traffic in, before the raw_in (doNotTrack) and prednat (preDNAT)
// chains and so through them to input_host.
func (f Flow) hooks() []traceHook {
	forward := traceHook{"trace_forward", nftables.ChainHookForward}
	input := traceHook{"trace_input", nftables.ChainHookInput}
	prerouting := traceHook{"trace_prerouting", nftables.ChainHookPrerouting}
	output := traceHook{"trace_output", nftables.ChainHookOutput}
	switch {
	case f.FromNode && f.ToNode:
		return []traceHook{prerouting, output}
	case f.FromNode:
		return []traceHook{output}
	case f.ToNode:
		return []traceHook{prerouting}
	}
	return []traceHook{forward, input, output}
}

// flowExprs match the flow, then set nftrace (`meta nftrace set 1`), with no verdict.
func flowExprs(f Flow) []expr.Any {
	var ex []expr.Any
	cmp := func(data []byte) expr.Any { return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data} }
	var fam byte
	switch {
	case f.Src.IsValid():
		fam = nfproto(f.Src)
	case f.Dst.IsValid():
		fam = nfproto(f.Dst)
	}
	if fam != 0 {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, cmp([]byte{fam}))
	}
	for _, a := range []struct {
		addr       netip.Addr
		off4, off6 uint32
	}{{f.Src, 12, 8}, {f.Dst, 16, 24}} {
		if !a.addr.IsValid() {
			continue
		}
		off := a.off4
		if a.addr.Is6() {
			off = a.off6
		}
		ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: uint32(a.addr.BitLen() / 8)},
			cmp(a.addr.AsSlice()))
	}
	if f.Proto != 0 {
		ex = append(ex, &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, cmp([]byte{f.Proto}))
	}
	if f.Dport != 0 {
		ex = append(ex, &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			cmp(binaryutil.BigEndian.PutUint16(f.Dport)))
	}
	return append(ex, &expr.Immediate{Register: 1, Data: []byte{1}},
		&expr.Meta{Key: expr.MetaKeyNFTRACE, SourceRegister: true, Register: 1})
}

func nfproto(a netip.Addr) byte {
	if a.Is4() {
		return unix.NFPROTO_IPV4
	}
	return unix.NFPROTO_IPV6
}

// Remove deletes the trace table from the network namespace netnsFD (< 0: the current one), if
// it is there.
func Remove(netnsFD int) error {
	var opts []nftables.ConnOption
	if netnsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(netnsFD))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("trace: opening nftables: %w", err)
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return fmt.Errorf("trace: listing tables: %w", err)
	}
	for _, t := range ts {
		if t.Name == Table {
			c.DelTable(t)
			if err := c.Flush(); err != nil {
				return fmt.Errorf("trace: deleting table %s: %w", Table, err)
			}
		}
	}
	return nil
}

// open is a packet whose events are still coming.
type open struct {
	p    Packet
	last time.Time
	seq  int    // order of arrival
	hdr  []byte // its network and transport headers, as the first event gave them
}

type tracer struct {
	conn     *nftables.Conn
	each     func(Packet)
	max      int
	done     int
	seq      int
	open     map[uint32]*open
	comments map[[2]string]map[uint64]string // table, chain → handle → comment
	ifname   func(uint32) string
}

// read receives trace events until max packets are complete or ctx ends.
func (t *tracer) read(ctx context.Context, events *netlink.Conn) error {
	for t.done < t.max {
		if err := ctx.Err(); err != nil {
			t.flush(time.Time{}) // what came is complete now
			return nil
		}
		_ = events.SetReadDeadline(time.Now().Add(Quiet / 2))
		msgs, err := events.Receive()
		if err != nil && !isTimeout(err) {
			if errors.Is(err, unix.ENOBUFS) {
				continue // some events were lost: those packets show fewer steps
			}
			return fmt.Errorf("trace: reading events: %w", err)
		}
		for _, m := range msgs {
			if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_TRACE) || len(m.Data) < 4 {
				continue
			}
			t.event(m.Data[4:])
		}
		t.flush(time.Now())
	}
	return nil
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// flush completes, in the order they came, the open packets whose events stopped for Quiet
// before now (every one, for the zero time).
func (t *tracer) flush(now time.Time) {
	var quiet []*open
	for _, o := range t.open {
		if now.IsZero() || now.Sub(o.last) >= Quiet {
			quiet = append(quiet, o)
		}
	}
	slices.SortFunc(quiet, func(a, b *open) int { return a.seq - b.seq })
	for _, o := range quiet {
		if t.done < t.max {
			t.complete(o)
		}
	}
}

func (t *tracer) complete(o *open) {
	delete(t.open, o.p.ID)
	o.p.Verdict = "accept"
	if n := len(o.p.Steps); n > 0 && o.p.Steps[n-1].Verdict == "drop" {
		o.p.Verdict = "drop"
	}
	t.done++
	t.each(o.p)
}

// event decodes one trace message and adds it to its packet.
func (t *tracer) event(b []byte) {
	ev, ok := decodeEvent(b)
	if !ok {
		return
	}
	o := t.packet(ev)
	o.last = time.Now()
	st := ev.step
	switch {
	case st.Table == Table:
		return // the trace's own chain, which only sets nftrace
	case ev.typ == unix.NFT_TRACETYPE_RULE && st.Handle == 0:
		return // the end of a chain's rules: its return or policy event follows
	case ev.typ == unix.NFT_TRACETYPE_RULE:
		st.Kind = "rule"
		st.Comment = t.comment(st.Table, st.Chain, st.Handle)
	case ev.typ == unix.NFT_TRACETYPE_RETURN:
		st.Kind = "return"
	case ev.typ == unix.NFT_TRACETYPE_POLICY:
		st.Kind, ev.verdictCode, ev.hasVerdict = "policy", int32(ev.policy), true
	default:
		return
	}
	if ev.hasVerdict {
		st.Verdict = verdictString(ev.verdictCode, ev.verdictChain)
	}
	o.p.Steps = append(o.p.Steps, st)
	if st.Verdict == "drop" && t.done < t.max {
		t.complete(o)
	}
}

// packet is the open packet ev belongs to, opened for it when there is none. The kernel gives a
// packet's headers with its first event in each base chain. The id is a hash of the packet's
// buffer and flow, which the next packet of the flow may share: other headers under an open id
// are the next packet, and complete the one before.
func (t *tracer) packet(ev traceEvent) *open {
	hdr := slices.Concat(ev.network, ev.l4)
	o := t.open[ev.id]
	if o != nil && len(hdr) > 0 && !bytes.Equal(hdr, o.hdr) {
		if t.done < t.max {
			t.complete(o)
		}
		o = nil
	}
	if o == nil {
		t.seq++
		o = &open{p: Packet{ID: ev.id}, seq: t.seq, hdr: hdr}
		decodeHeaders(&o.p, ev.network, ev.l4)
		o.p.Iif, o.p.Oif = t.ifname(ev.iif), t.ifname(ev.oif)
		t.open[ev.id] = o
	}
	return o
}

// traceEvent is one NFT_MSG_TRACE message's attributes.
type traceEvent struct {
	step         Step // table, chain and rule handle
	id           uint32
	typ          uint32
	policy       uint32
	network, l4  []byte
	iif, oif     uint32
	verdictCode  int32
	verdictChain string
	hasVerdict   bool
}

// decodeEvent reads the NFTA_TRACE_* attributes of one trace message; ok is false when the
// message does not parse.
func decodeEvent(b []byte) (ev traceEvent, ok bool) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return ev, false
	}
	ad.ByteOrder = binary.BigEndian
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_TRACE_TABLE:
			ev.step.Table = ad.String()
		case unix.NFTA_TRACE_CHAIN:
			ev.step.Chain = ad.String()
		case unix.NFTA_TRACE_RULE_HANDLE:
			ev.step.Handle = ad.Uint64()
		case unix.NFTA_TRACE_TYPE:
			ev.typ = ad.Uint32()
		case unix.NFTA_TRACE_ID:
			ev.id = ad.Uint32()
		case unix.NFTA_TRACE_POLICY:
			ev.policy = ad.Uint32()
		case unix.NFTA_TRACE_NETWORK_HEADER:
			ev.network = ad.Bytes()
		case unix.NFTA_TRACE_TRANSPORT_HEADER:
			ev.l4 = ad.Bytes()
		case unix.NFTA_TRACE_IIF:
			ev.iif = ad.Uint32()
		case unix.NFTA_TRACE_OIF:
			ev.oif = ad.Uint32()
		case unix.NFTA_TRACE_VERDICT:
			ev.hasVerdict = true
			ad.Nested(func(v *netlink.AttributeDecoder) error {
				v.ByteOrder = binary.BigEndian
				for v.Next() {
					switch v.Type() {
					case unix.NFTA_VERDICT_CODE:
						ev.verdictCode = int32(v.Uint32())
					case unix.NFTA_VERDICT_CHAIN:
						ev.verdictChain = v.String()
					}
				}
				return nil
			})
		}
	}
	return ev, ad.Err() == nil
}

// The netfilter verdicts (linux/netfilter.h), absent from x/sys/unix.
const (
	nfDrop   = 0
	nfAccept = 1
)

// verdictString names a verdict as nft does.
func verdictString(code int32, chain string) string {
	switch code {
	case nfAccept:
		return "accept"
	case nfDrop:
		return "drop"
	case unix.NFT_CONTINUE:
		return "continue"
	case unix.NFT_RETURN:
		return "return"
	case unix.NFT_JUMP:
		return "jump " + chain
	case unix.NFT_GOTO:
		return "goto " + chain
	case unix.NFT_BREAK:
		return "break"
	}
	return fmt.Sprintf("verdict %d", code)
}

// comment is the comment of rule handle in table's chain, listing the chain's rules when the
// handle is not known yet (a new chain, or one the agent wrote again since).
func (t *tracer) comment(table, chain string, handle uint64) string {
	key := [2]string{table, chain}
	if c, ok := t.comments[key][handle]; ok {
		return c
	}
	tb := &nftables.Table{Family: nftables.TableFamilyINet, Name: table}
	rules, err := t.conn.GetRules(tb, &nftables.Chain{Table: tb, Name: chain})
	if err != nil {
		return ""
	}
	m := map[uint64]string{}
	for _, r := range rules {
		m[r.Handle], _ = userdata.GetString(r.UserData, userdata.TypeComment)
	}
	t.comments[key] = m
	return m[handle]
}

// decodeHeaders reads addresses, protocol and destination port from the traced packet's
// network and transport headers.
func decodeHeaders(p *Packet, network, l4 []byte) {
	switch {
	case len(network) >= 20 && network[0]>>4 == 4:
		p.Proto = network[9]
		p.Src, p.Dst = netip.AddrFrom4([4]byte(network[12:16])), netip.AddrFrom4([4]byte(network[16:20]))
	case len(network) >= 40 && network[0]>>4 == 6:
		p.Proto = network[6]
		p.Src, p.Dst = netip.AddrFrom16([16]byte(network[8:24])), netip.AddrFrom16([16]byte(network[24:40]))
	}
	switch p.Proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP, unix.IPPROTO_SCTP:
		if len(l4) >= 4 {
			p.Dport = binary.BigEndian.Uint16(l4[2:])
		}
	}
}

// ifindexName names an interface of another namespace by its index.
func ifindexName(index uint32) string {
	if index == 0 {
		return ""
	}
	return fmt.Sprintf("if%d", index)
}

// localIfname names an interface of this process's namespace.
func localIfname(index uint32) string {
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		return ifi.Name
	}
	return ifindexName(index)
}

func protoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_SCTP:
		return "sctp"
	case unix.IPPROTO_ICMP:
		return "icmp"
	case unix.IPPROTO_ICMPV6:
		return "icmpv6"
	}
	return fmt.Sprint(p)
}

// String prints the packet: its flow, then each step with its rule's comment, then its fate.
func (p Packet) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "packet %08x: %s", p.ID, Flow{Src: p.Src, Dst: p.Dst, Proto: p.Proto, Dport: p.Dport})
	if p.Iif != "" || p.Oif != "" {
		fmt.Fprintf(&b, " (in %s, out %s)", p.Iif, p.Oif)
	}
	b.WriteString("\n")
	for _, s := range p.Steps {
		switch s.Kind {
		case "rule":
			fmt.Fprintf(&b, "  inet %s %s rule %d: %s", s.Table, s.Chain, s.Handle, s.Verdict)
			if s.Comment != "" {
				fmt.Fprintf(&b, " (%s)", s.Comment)
			}
		case "return":
			fmt.Fprintf(&b, "  inet %s %s: end of chain, return", s.Table, s.Chain)
		case "policy":
			fmt.Fprintf(&b, "  inet %s %s: chain policy %s", s.Table, s.Chain, s.Verdict)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "  verdict: %s\n", p.Verdict)
	return b.String()
}
