package ruleset

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Socket buffer sizes of the lasting netlink connection. The write buffer must hold a whole batch
// (netlink refuses a message larger than sndbuf); the read buffer holds one ack per message of a
// batch, and on failure the echo of the failing message. Set with SO_*BUFFORCE (CAP_NET_ADMIN), so
// rmem_max/wmem_max do not cap them; memory is charged only as used. A transaction is one
// sendmsg (the kernel ends a batch with its datagram), so the write buffer bounds the largest
// table a Replace can write: 512 MiB (the kernel doubles it to 1 GiB, SO_SNDBUFFORCE's ceiling)
// holds about 4 million elements with comments (a batch larger than the buffer fails with
// EMSGSIZE). Every message of a batch is acked and the kernel queues all acks before Flush reads
// one; each ack is charged as a whole small skb (~1 KiB), so 256 MiB (doubled) holds the acks of
// ~500,000 messages (a 10,000-policy table is ~60,000; a smaller buffer fails with ENOBUFS).
const (
	writeBuffer = 512 << 20
	readBuffer  = 256 << 20
)

// Element chunking: google/nftables v0.3.0 puts all elements of one SetAddElements call into one
// attribute whose length is 16 bits. Chunks stay well below that.
const (
	chunkElements = 1000
	chunkBytes    = 48 << 10
)

// Counter is a packet/byte counter read from the kernel.
type Counter struct {
	Packets, Bytes uint64
}

// Conn commits tables to the kernel of one network namespace and remembers what it committed
// (the mirror). It is not safe for concurrent use.
type Conn struct {
	netnsFD int            // our own dup of the caller's handle; -1 for the current namespace
	nft     *nftables.Conn // queries, on the lasting socket sock
	sock    *netlink.Conn  // batches are sent and acked here (wire.go)
	enc     *nftables.Conn // builds batches: its flushes write into out (wire.go)
	out     *wire          // the batch being built
	dump    *netlink.Conn  // Verify's element dumps (readback.go)
	acks    []byte         // a batch's acks are read into it (readAcks)
	mirror  *Table
	// name is the table last given to Commit or Replace, even if that failed: Delete removes it.
	name string
	// wholeWhy says why the last Commit wrote the table whole instead ("": it did not)
	wholeWhy string
	batchCounts
	// port is sock's netlink port id, which the kernel's events of its batches carry (Monitor
	// skips them); dial sets it, Monitors read it from their goroutines.
	port atomic.Uint32
	// timed names the timeout sets of the table last committed (Set.Timeout), whose element
	// events by others a Monitor does not report: their elements are another owner's.
	timed atomic.Pointer[map[string]bool]
	monitorList
}

// batchCounts count a Conn's batches.
type batchCounts struct {
	// batches counts the batches sent to the kernel (successful or not): one per Commit or
	// Replace that had anything to send, the test-visible proof of one transaction per call.
	batches uint64
	// replaces counts the batches that rebuilt the whole table (tests tell incremental commits
	// from fallbacks by it).
	replaces uint64
}

// monitorList holds the Monitors opened on a Conn: its large batches are sent with them out of
// the event group (sendWatched). quietHook, set by tests, runs while they are out.
type monitorList struct {
	monitorsMu sync.Mutex
	monitors   []*Monitor
	quietHook  func()
}

// Open opens a lasting nftables netlink connection in the network namespace netnsFD refers to
// (netnsFD < 0: the current one). The handle is duplicated; the caller may close its own.
func Open(netnsFD int) (*Conn, error) {
	c := &Conn{netnsFD: -1}
	if netnsFD >= 0 {
		fd, err := unix.FcntlInt(uintptr(netnsFD), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("duplicating netns handle %d: %w", netnsFD, err)
		}
		c.netnsFD = fd
	}
	if err := c.dial(); err != nil {
		if c.netnsFD >= 0 {
			_ = unix.Close(c.netnsFD)
		}
		return nil, err
	}
	if err := c.dialDump(); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) dial() error {
	var sock *netlink.Conn
	opts := []nftables.ConnOption{
		nftables.AsLasting(),
		nftables.WithSockOptions(func(nc *netlink.Conn) error {
			if err := nc.SetWriteBuffer(writeBuffer); err != nil {
				return fmt.Errorf("netlink write buffer: %w", err)
			}
			if err := nc.SetReadBuffer(readBuffer); err != nil {
				return fmt.Errorf("netlink read buffer: %w", err)
			}
			sock = nc
			return primeDumps(nc)
		}),
	}
	if c.netnsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(c.netnsFD))
	}
	nc, err := nftables.New(opts...)
	if err != nil {
		return fmt.Errorf("opening nftables netlink connection: %w", err)
	}
	enc, err := nftables.New(nftables.AsLasting(), nftables.WithTestDial(c.capture))
	if err != nil {
		_ = nc.CloseLasting()
		return fmt.Errorf("opening nftables encoder: %w", err)
	}
	c.closeConns()
	c.nft, c.sock, c.enc, c.out = nc, sock, enc, nil
	c.port.Store(sock.PID())
	return nil
}

// primeDumps makes the kernel fill dump replies in 32 KiB datagrams instead of ~4 KiB ones.
// The kernel sizes each dump datagram by the largest buffer a recvmsg on the socket ever offered,
// and mdlayher/netlink reads with a buffer exactly as large as the datagram it peeked. Dumping a
// hash set resumes every datagram by walking the set from its start, so reading n elements back
// costs O(n²/d) for d elements a datagram. One GETGEN request read with a 32 KiB buffer raises
// the datagram size eightfold for the life of the socket.
func primeDumps(nc *netlink.Conn) error {
	req := netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	}
	if _, err := nc.Send(req); err != nil {
		return fmt.Errorf("priming dump size: %w", err)
	}
	raw, err := nc.SyscallConn()
	if err != nil {
		return fmt.Errorf("priming dump size: %w", err)
	}
	buf := make([]byte, 32<<10)
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		_, _, _, _, rerr = unix.Recvmsg(int(fd), buf, nil, 0)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	}); err != nil {
		return fmt.Errorf("priming dump size: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("priming dump size: %w", rerr)
	}
	return nil
}

// Close closes the connection. The table stays in the kernel.
func (c *Conn) Close() error {
	err := c.closeConns()
	if c.dump != nil {
		err = errors.Join(err, c.dump.Close())
		c.dump = nil
	}
	if c.netnsFD >= 0 {
		err = errors.Join(err, unix.Close(c.netnsFD))
		c.netnsFD = -1
	}
	return err
}

func (c *Conn) closeConns() error {
	var err error
	if c.nft != nil {
		err = c.nft.CloseLasting()
	}
	if c.enc != nil {
		err = errors.Join(err, c.enc.CloseLasting())
	}
	c.nft, c.sock, c.enc, c.out = nil, nil, nil, nil
	return err
}

// Committed returns the table as last committed (nil before the first commit): the mirror, with
// its sets' elements copied out of the shared storage (for tests and diagnostics; it costs a
// copy of every element). The caller must not modify its chains.
func (c *Conn) Committed() *Table {
	m := c.mirror
	if m == nil {
		return nil
	}
	t := &Table{Name: m.Name, Chains: m.Chains, Sets: make(map[string]*Set, len(m.Sets))}
	for n, ms := range m.Sets {
		s := *ms
		s.journal, s.addrs = nil, nil
		s.Elements = maps.Collect(ms.committedElements())
		t.Sets[n] = &s
	}
	return t
}

// forget drops the mirror. Its sets' owners may keep and change them: their journals end.
func (c *Conn) forget() {
	if c.mirror == nil {
		return
	}
	for _, ms := range c.mirror.Sets {
		ms.journal.end()
	}
	c.mirror = nil
}

// share makes the mirror of desired once committed: its chains copied, its sets sharing
// desired's elements (see shareSet).
func share(desired *Table) *Table {
	m := &Table{Name: desired.Name, Chains: make(map[string]*Chain, len(desired.Chains)),
		Sets: make(map[string]*Set, len(desired.Sets))}
	for n, ch := range desired.Chains {
		m.Chains[n] = ch.Clone()
	}
	for n, s := range desired.Sets {
		m.Sets[n] = shareSet(s)
	}
	return m
}

// shareSet starts a new journal on committed set s and returns the mirror's view of it: its
// properties as committed, its elements map and journal shared with s. The mirror's elements
// are s's with the journal's changes undone.
func shareSet(s *Set) *Set {
	s.journal = &journal{prior: map[ElementKey]prior{}}
	ms := *s
	return &ms
}

// Batches returns the number of batches (transactions) sent so far.
func (c *Conn) Batches() uint64 { return c.batches }

func nfTable(name string) *nftables.Table {
	return &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
}

// flush sends the batch: what the encoder still queues, then the wire. After a failure the
// netlink connections are replaced, so that a poisoned queue or unread acks never leak into the
// next batch.
func (c *Conn) flush() error {
	c.batches++
	err := c.enc.Flush()
	w := c.out
	c.out = nil
	if err == nil && w != nil && w.messages() {
		err = c.sendWatched(w)
	}
	if err == nil {
		return nil
	}
	if derr := c.dial(); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}

// batch queues operations on the google/nftables Conn as they are encoded, elements chunk by
// chunk, so that no encoded form of a whole table is held besides the batch's own bytes
// (collecting them first would hold every element twice more: as a value and encoded). An
// error part-way leaves a half-built batch: the caller abandons it (Conn.abandon), which also
// drops v0.3.0's sticky marshal error.
type batch struct {
	conn    *Conn
	nft     *nftables.Conn // conn.enc
	scratch []byte         // an element message being encoded
	// chunk and keys are the elements of a chunk being encoded and their keys, reused by every
	// chunk of the batch
	chunk []nftables.SetElement
	keys  keyArena
	table *nftables.Table
	setID uint32
	sets  map[string]*nftables.Set
	// carried are the elements of the timeout sets, as the kernel held them, that a Replace
	// adds again with the time each had left (Conn.timedElements).
	carried map[string][]nftables.SetElement
}

func newBatch(c *Conn, name string) *batch {
	return &batch{conn: c, nft: c.enc, table: nfTable(name), sets: map[string]*nftables.Set{}}
}

func (b *batch) nfSet(s *Set) (*nftables.Set, error) {
	if ns, ok := b.sets[s.Name]; ok {
		return ns, nil
	}
	ns, err := nfSet(b.table, s)
	if err != nil {
		return nil, err
	}
	b.setID++
	ns.ID = b.setID // unique within the batch; avoids v0.3.0's unsynchronised global counter
	b.sets[s.Name] = ns
	return ns, nil
}

// object marks the messages queued next as changes to one object: what the encoder queued so far
// is written first, under the object before.
func (b *batch) object(kind, name string) error {
	if err := b.nft.Flush(); err != nil {
		return err
	}
	b.conn.wire().mark(Object{Kind: kind, Name: name})
	return nil
}

func (b *batch) addChain(c *Chain) error {
	if err := b.object("chain", c.Name); err != nil {
		return err
	}
	nc, err := nfChain(b.table, c)
	if err != nil {
		return err
	}
	b.nft.AddChain(nc)
	if !addChainComment(b.nft, Comment(c.Comment)) {
		return fmt.Errorf("chain %s: cannot attach its comment (google/nftables layout changed)", c.Name)
	}
	return nil
}

func (b *batch) addRules(c *Chain) error {
	if err := b.object("chain", c.Name); err != nil {
		return err
	}
	nc := &nftables.Chain{Table: b.table, Name: c.Name}
	for i, r := range c.Rules {
		ex, err := ruleExprs(r)
		if err != nil {
			return fmt.Errorf("chain %s rule %d (%s): %w", c.Name, i, RenderRule(r), err)
		}
		b.nft.AddRule(&nftables.Rule{Table: b.table, Chain: nc, Exprs: ex, UserData: ruleUserData(r)})
	}
	return b.nft.Flush() // into the wire now: its messages need not wait for the batch's end
}

// put writes a message the batch encoded itself, after everything the encoder has queued: the
// encoder's messages go into the wire only when it is flushed, and the kernel needs them in
// order (a set before its elements).
func (b *batch) put(typ int, data []byte) error {
	if err := b.nft.Flush(); err != nil {
		return err
	}
	b.conn.wire().add(netlink.Message{Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | typ),
		Flags: netlink.Request | netlink.Acknowledge | netlink.Create}, Data: data})
	return nil
}

func (b *batch) flushChain(name string) error {
	if err := b.object("chain", name); err != nil {
		return err
	}
	b.nft.FlushChain(&nftables.Chain{Table: b.table, Name: name})
	return nil
}

func (b *batch) delChain(name string) error {
	if err := b.object("chain", name); err != nil {
		return err
	}
	b.nft.DelChain(&nftables.Chain{Table: b.table, Name: name})
	return nil
}

func (b *batch) addSet(s *Set) error {
	if err := b.object("set", s.Name); err != nil {
		return err
	}
	ns, err := b.nfSet(s)
	if err != nil {
		return err
	}
	return b.nft.AddSet(ns, nil)
}

func (b *batch) delSet(s *Set) error {
	if err := b.object("set", s.Name); err != nil {
		return err
	}
	// by name only: a resized set's committed object shares the elements it now outgrew
	b.nft.DelSet(&nftables.Set{Table: b.table, Name: s.Name})
	delete(b.sets, s.Name) // a set added anew under the name is another object
	return nil
}

// elements queues adds (del=false) or deletes of the n elements es of s, in chunks.
func (b *batch) elements(s *Set, es iter.Seq[Element], n int, del bool) error {
	if n == 0 {
		return nil
	}
	if err := b.object("set", s.Name); err != nil {
		return err
	}
	ns, err := b.nfSet(s)
	if err != nil {
		return err
	}
	// marshalled by each call, then reused; an interval element is two
	chunk := b.chunk[:0]
	if c := min(2*n, chunkElements+1); cap(chunk) < c {
		chunk = make([]nftables.SetElement, 0, c)
	}
	defer func() { b.chunk = chunk[:0] }()
	size := 0
	send := func() error {
		if len(chunk) == 0 {
			return nil
		}
		var err error
		if b.scratch, err = elementMessage(b.scratch, b.table.Name, ns, chunk); err != nil {
			return err
		}
		typ := unix.NFT_MSG_NEWSETELEM
		if del {
			typ = unix.NFT_MSG_DELSETELEM
		}
		clear(chunk)
		chunk, size = chunk[:0], 0
		b.keys.reset()
		return b.put(typ, b.scratch)
	}
	for e := range es {
		first := len(chunk)
		if chunk, err = encodeElements(s, e, chunk, &b.keys); err != nil {
			return err
		}
		for i := first; i < len(chunk); i++ {
			el := &chunk[i]
			if del { // a delete names keys only
				el.VerdictData, el.Comment = nil, ""
			}
			size += 64 + len(el.Key) + len(el.KeyEnd) + len(el.Comment)
			if el.VerdictData != nil {
				size += len(el.VerdictData.Chain)
			}
		}
		if len(chunk) >= chunkElements || size >= chunkBytes {
			if err := send(); err != nil {
				return err
			}
		}
	}
	return send()
}

// abandon drops a batch that could not be completed: the netlink connection is replaced, so
// that neither its queued messages nor v0.3.0's sticky marshal error reach the next batch.
func (c *Conn) abandon() { _ = c.dial() }

// Replace replaces the table with desired in one batch: add table (so the delete cannot fail),
// delete table, add table, then chains, sets, elements and rules. A table of that name stays in
// force until the new one replaces it atomically.
func (c *Conn) Replace(desired *Table) error {
	if desired == nil || desired.Name == "" {
		return errors.New("replace: no table")
	}
	c.name = desired.Name
	carried, err := c.timedElements(desired)
	if err != nil {
		return fmt.Errorf("replace table %s: %w", desired.Name, err)
	}
	b := newBatch(c, desired.Name)
	b.carried = carried
	c.wire().mark(Object{Kind: "table", Name: desired.Name})
	c.enc.AddTable(b.table)
	c.enc.DelTable(b.table)
	c.enc.AddTable(b.table)
	if err := b.replace(desired); err != nil {
		c.abandon()
		return fmt.Errorf("replace table %s: %w", desired.Name, err)
	}
	if err := c.flush(); err != nil {
		return fmt.Errorf("replace table %s: netlink batch: %w", desired.Name, err)
	}
	c.forget() // sets that stay get new journals from share
	c.mirror = share(desired)
	c.noteTimed(desired)
	c.replaces++
	return nil
}

// replace queues desired's chains, sets, elements and rules into a batch that starts with the
// table's deletion.
func (b *batch) replace(desired *Table) error {
	chains, sets := desired.sortedChains(), desired.sortedSets()
	for _, ch := range chains {
		if err := b.addChain(ch); err != nil {
			return err
		}
	}
	for _, s := range sets {
		if err := b.addSet(s); err != nil {
			return err
		}
		// in map order: the kernel needs none, and sorting would cost O(n log n) per set; but an
		// interval set is sent sorted, since the kernel lists a concatenated one in the order its
		// elements were added, and `nft list` should read the same from every write
		elems := s.All()
		if s.Interval {
			elems = slices.Values(s.SortedElements())
		}
		if err := b.elements(s, elems, s.Len(), false); err != nil {
			return err
		}
		if err := b.timed(s, b.carried[s.Name]); err != nil {
			return err
		}
	}
	for _, ch := range chains {
		if err := b.addRules(ch); err != nil {
			return err
		}
	}
	return nil
}

// setDiff is the element work on one set of the desired table.
type setDiff struct {
	set        *Set
	adds, dels []Element
}

// Commit sends the difference between the mirror and desired for the objects changes names
// (nil: all objects of both tables) as one batch. See the package documentation for the order.
// Changed set or chain properties (key, flags, hook, priority, comment), which the kernel cannot
// update in place, make it a Replace. On failure the mirror is unchanged.
func (c *Conn) Commit(desired *Table, changes *Changes) error {
	if desired == nil || desired.Name == "" {
		return errors.New("commit: no table")
	}
	c.name, c.wholeWhy = desired.Name, ""
	m := c.mirror
	if m == nil || m.Name != desired.Name {
		c.wholeWhy = "nothing committed yet"
		return c.Replace(desired)
	}
	setNames, chainNames := changedNames(m, desired, changes)
	var p commitPlan
	if !p.addSets(m, desired, setNames) {
		c.wholeWhy = "set " + p.whole + ": " + p.whyWhole
		return c.Replace(desired)
	}
	// the chains that look up a resized set are flushed before it goes and refilled after
	chainNames = p.addReferrers(m, chainNames)
	if !p.addChains(m, desired, chainNames) {
		c.wholeWhy = "chain " + p.whole + ": " + p.whyWhole
		return c.Replace(desired)
	}
	if p.empty() {
		// nothing to send, but a named set may be another object of equal elements (a set
		// rebuilt as it was): the mirror takes it, so that its journal records what changes next
		m.advance(desired, chainNames, setNames)
		return nil
	}

	wrap := func(err error) error { return fmt.Errorf("commit table %s: %w", desired.Name, err) }
	if err := p.queue(newBatch(c, desired.Name)); err != nil {
		c.abandon()
		return wrap(err)
	}
	if err := c.flush(); err != nil {
		return wrap(fmt.Errorf("netlink batch: %w", err))
	}
	m.advance(desired, chainNames, setNames)
	if len(p.newSets)+len(p.goneSets) > 0 {
		c.noteTimed(desired) // only an added or dropped set changes which sets are timed
	}
	return nil
}

// WholeWhy says why the last Commit wrote the table whole (a property the kernel cannot change
// in place, or a set's storage swapped behind its journal), "" when it did not.
func (c *Conn) WholeWhy() string { return c.wholeWhy }

// noteTimed records the timeout sets of the table just committed, for the Monitors.
func (c *Conn) noteTimed(t *Table) {
	timed := map[string]bool{}
	for name, s := range t.Sets {
		if s.Timeout {
			timed[name] = true
		}
	}
	if old := c.timed.Load(); old != nil && maps.Equal(*old, timed) {
		return
	}
	c.timed.Store(&timed)
}

// addChains plans the chains named chainNames from the mirror m to desired. It reports false
// when a chain's properties changed: only a replace changes those.
func (p *commitPlan) addChains(m, desired *Table, chainNames []string) bool {
	for _, n := range chainNames {
		old, cur := m.Chains[n], desired.Chains[n]
		switch {
		case old == nil && cur == nil:
		case old == nil:
			p.newChains = append(p.newChains, cur)
		case cur == nil:
			p.goneChains = append(p.goneChains, old)
		case !old.sameProps(cur):
			p.whole, p.whyWhole = n, "its properties changed"
			return false
		case slices.Contains(p.referrers, n) || !slices.EqualFunc(old.Rules, cur.Rules, Rule.Equal):
			p.changedChains = append(p.changedChains, cur)
		}
	}
	return true
}

// addSets plans the sets named setNames from the mirror m to desired. It reports false when a
// set's properties changed, or its elements' storage was swapped behind its journal: only a
// replace changes those.
func (p *commitPlan) addSets(m, desired *Table, setNames []string) bool {
	for _, n := range setNames {
		old, cur := m.Sets[n], desired.Sets[n]
		switch {
		case old == nil && cur == nil:
			continue
		case old == nil:
			p.newSets = append(p.newSets, cur)
		case cur == nil:
			p.goneSets = append(p.goneSets, old)
			continue
		case old.sameSizeless(cur) && !cur.Timeout:
			// only its size changed, which the kernel keeps for a set's life: the set alone is
			// deleted and added anew with every element
			p.resized = append(p.resized, old)
			p.newSets = append(p.newSets, cur)
			old = nil
		case !old.sameProps(cur):
			p.whole, p.whyWhole = n, "its properties changed"
			return false
		}
		d, ok := diffElements(old, cur)
		if !ok {
			p.whole, p.whyWhole = n, "its elements' storage was swapped behind its journal"
			return false
		}
		if len(d.adds)+len(d.dels) > 0 {
			p.diffs = append(p.diffs, d)
		}
	}
	return true
}

// addReferrers returns chainNames with the committed chains that look up a set of p.resized
// added, sorted: such a chain holds a reference the set's deletion needs gone, so it is flushed
// first and refilled (as a changed chain) after the set is back. It costs a walk of the
// mirror's rules, only in a commit that resizes a set.
func (p *commitPlan) addReferrers(m *Table, chainNames []string) []string {
	if len(p.resized) == 0 {
		return chainNames
	}
	resized := map[string]bool{}
	for _, s := range p.resized {
		resized[s.Name] = true
	}
	names := map[string]struct{}{}
	for _, n := range chainNames {
		names[n] = struct{}{}
	}
	for _, n := range slices.Sorted(maps.Keys(m.Chains)) {
		if !chainLooksUp(m.Chains[n], resized) {
			continue
		}
		p.referrers = append(p.referrers, n)
		names[n] = struct{}{}
	}
	return slices.Sorted(maps.Keys(names))
}

// chainLooksUp reports whether a rule of ch looks up a set named in sets.
func chainLooksUp(ch *Chain, sets map[string]bool) bool {
	for _, r := range ch.Rules {
		for _, l := range r.Lookups {
			if sets[l.Set] {
				return true
			}
		}
	}
	return false
}

func (p *commitPlan) empty() bool {
	return len(p.newChains)+len(p.changedChains)+len(p.goneChains)+len(p.newSets)+len(p.goneSets)+len(p.diffs) == 0
}

// diffElements is the element difference from the committed set old (nil: a new set) to cur: a
// set changed in place by only what its journal recorded, another object compared whole. It
// reports false when cur shares old's journal but not its storage.
func diffElements(old, cur *Set) (setDiff, bool) {
	d := setDiff{set: cur}
	if cur.Timeout {
		return d, true // its elements are another owner's
	}
	add := func(k ElementKey, v Value) { d.adds = append(d.adds, Element{k, v}) }
	del := func(k ElementKey, v Value) { d.dels = append(d.dels, Element{k, v}) }
	switch {
	case old == nil:
		for k, v := range cur.Entries() {
			add(k, v)
		}
	case old.journal != nil && old.journal == cur.journal:
		// changed in place: only what the journal recorded
		if !old.sameStorage(cur) {
			return d, false // its elements' maps were swapped behind the journal
		}
		for k, p := range cur.journal.prior {
			e, inCur := cur.Get(k)
			switch {
			case p.present && inCur && p.v == e:
			case p.present && inCur:
				del(k, p.v)
				add(k, e)
			case p.present:
				del(k, p.v)
			case inCur:
				add(k, e)
			}
		}
	default: // another object: compared whole
		for k, e := range cur.Entries() {
			if o, ok := old.committedElement(k); !ok {
				add(k, e)
			} else if o != e {
				del(k, o)
				add(k, e)
			}
		}
		for k, o := range old.committedElements() {
			if _, ok := cur.Get(k); !ok {
				del(k, o)
			}
		}
	}
	if cur.Interval { // added in key order, as Replace does: the kernel lists them as added
		slices.SortFunc(d.adds, func(a, b Element) int { return compareKeys(a.ElementKey, b.ElementKey) })
	}
	return d, true
}

// advance brings the mirror m to desired for the named objects, once the kernel took them.
func (m *Table) advance(desired *Table, chainNames, setNames []string) {
	for _, n := range chainNames {
		if cur := desired.Chains[n]; cur != nil {
			m.Chains[n] = cur.Clone()
		} else {
			delete(m.Chains, n)
		}
	}
	for _, n := range setNames {
		if old := m.Sets[n]; old != nil {
			old.journal.end() // a set that stays gets a new journal from shareSet
		}
		if cur := desired.Sets[n]; cur != nil {
			m.Sets[n] = shareSet(cur)
		} else {
			delete(m.Sets, n)
		}
	}
}

// commitPlan is what a Commit sends.
type commitPlan struct {
	newChains, changedChains, goneChains []*Chain
	newSets, goneSets                    []*Set
	diffs                                []setDiff
	// resized are the committed sets that only their size changed: deleted, then added anew
	// (in newSets) with every element; referrers are the committed chains that look them up.
	resized   []*Set
	referrers []string
	// whole names the object that makes the commit a Replace, and why
	whole, whyWhole string
}

// queue queues the plan into b in the order the kernel needs (see the package documentation).
func (p commitPlan) queue(b *batch) error {
	// 1. new chains, empty (elements and rules may jump to them)
	for _, ch := range p.newChains {
		if err := b.addChain(ch); err != nil {
			return err
		}
	}
	// 2. resized sets deleted, once the chains that look them up are flushed; then new sets,
	// empty (rules may look them up), the resized ones among them
	for _, n := range p.referrers {
		if err := b.flushChain(n); err != nil {
			return err
		}
	}
	for _, s := range p.resized {
		if err := b.delSet(s); err != nil {
			return err
		}
	}
	for _, s := range p.newSets {
		if err := b.addSet(s); err != nil {
			return err
		}
	}
	// 3. elements: per set, deletes (removed and changed) before adds, so a re-partitioned
	// interval set never overlaps its old self
	for _, d := range p.diffs {
		if err := b.elements(d.set, slices.Values(d.dels), len(d.dels), true); err != nil {
			return err
		}
		if err := b.elements(d.set, slices.Values(d.adds), len(d.adds), false); err != nil {
			return err
		}
	}
	// 4. rules of new chains; changed chains are flushed and refilled
	for _, ch := range p.newChains {
		if err := b.addRules(ch); err != nil {
			return err
		}
	}
	for _, ch := range p.changedChains {
		if err := b.flushChain(ch.Name); err != nil {
			return err
		}
		if err := b.addRules(ch); err != nil {
			return err
		}
	}
	// 5. removed objects: every removed chain flushed before any is deleted (jumps between
	// them), removed sets deleted (the kernel drops their elements' references to chains as it
	// deletes them), then the chains deleted
	for _, ch := range p.goneChains {
		if err := b.flushChain(ch.Name); err != nil {
			return err
		}
	}
	for _, s := range p.goneSets {
		if err := b.delSet(s); err != nil {
			return err
		}
	}
	for _, ch := range p.goneChains {
		if err := b.delChain(ch.Name); err != nil {
			return err
		}
	}
	return nil
}

// changedNames returns the set and chain names a commit looks at, sorted.
func changedNames(m, desired *Table, changes *Changes) (sets, chains []string) {
	setNames, chainNames := map[string]struct{}{}, map[string]struct{}{}
	if changes != nil {
		maps.Copy(setNames, changes.Sets)
		maps.Copy(chainNames, changes.Chains)
	} else {
		for _, t := range []*Table{m, desired} {
			for n := range t.Sets {
				setNames[n] = struct{}{}
			}
			for n := range t.Chains {
				chainNames[n] = struct{}{}
			}
		}
	}
	// committed sets changed in place, named or not
	for n, ms := range m.Sets {
		if ms.journal != nil && len(ms.journal.prior) > 0 {
			setNames[n] = struct{}{}
		}
	}
	return slices.Sorted(maps.Keys(setNames)), slices.Sorted(maps.Keys(chainNames))
}

// Delete removes the table last given to Commit or Replace from the kernel, if it is there, and
// forgets the mirror. Without any commit it has no name and does nothing: use DeleteTable.
func (c *Conn) Delete() error {
	if c.name == "" {
		return nil
	}
	if err := c.DeleteTable(c.name); err != nil {
		return err
	}
	c.forget()
	return nil
}

// DeleteTable removes the inet table name from the kernel if it exists (for clean-up without a
// prior commit). The mirror is forgotten if it is that table.
func (c *Conn) DeleteTable(name string) error {
	ok, err := c.tableExists(name)
	if err != nil {
		return fmt.Errorf("delete table %s: %w", name, err)
	}
	if ok {
		c.enc.DelTable(nfTable(name))
		if err := c.flush(); err != nil {
			return fmt.Errorf("delete table %s: %w", name, err)
		}
	}
	if c.mirror != nil && c.mirror.Name == name {
		c.forget()
	}
	return nil
}

func (c *Conn) tableExists(name string) (bool, error) {
	ts, err := c.nft.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("listing tables: %w", err)
	}
	for _, t := range ts {
		if t.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// Unjournaled names an object of desired that the mirror does not account for, "" when there is
// none: a set the mirror does not share (another object than the one committed), a set whose
// journal holds changes no commit sent, a set or chain only one of them has, a chain whose rules
// differ. Right after a successful Commit or Replace of desired it is "" whatever happened; any
// other answer is a change the commits missed, which Verify cannot see (the kernel equals the
// mirror) and only a Replace repairs. Timeout sets are skipped (their elements are another
// owner's). O(sets + rules), no kernel round trip; before the first commit, "".
func (c *Conn) Unjournaled(desired *Table) string {
	m := c.mirror
	if m == nil || m.Name != desired.Name {
		return ""
	}
	for _, n := range slices.Sorted(maps.Keys(desired.Sets)) {
		s, ms := desired.Sets[n], m.Sets[n]
		switch {
		case ms == nil:
			return "set " + n + ": not committed"
		case s.Timeout:
		case s.journal == nil || ms.journal != s.journal || !ms.sameStorage(s):
			return "set " + n + ": another object than the one committed"
		case len(s.journal.prior) > 0:
			return "set " + n + ": changes no commit sent"
		}
	}
	for n := range m.Sets {
		if desired.Sets[n] == nil {
			return "set " + n + ": deleted, not committed"
		}
	}
	for _, n := range slices.Sorted(maps.Keys(desired.Chains)) {
		mc := m.Chains[n]
		if mc == nil || !mc.sameProps(desired.Chains[n]) || !slices.EqualFunc(mc.Rules, desired.Chains[n].Rules, Rule.Equal) {
			return "chain " + n + ": not as committed"
		}
	}
	if len(m.Chains) != len(desired.Chains) {
		return "a chain deleted, not committed"
	}
	return ""
}

// Verify reads the table back and compares it with the mirror: the table, chain names and base
// hooks/priorities, rule counts and comments per chain, set names, and element keys (interval
// elements sorted; verdicts are not compared, v0.3.0 cannot read them back). It reports drift
// and repairs nothing. Before the first commit there is nothing to compare: no drift.
func (c *Conn) Verify() (bool, error) {
	m := c.mirror
	if m == nil {
		return false, nil
	}
	t := nfTable(m.Name)
	ok, err := c.tableExists(m.Name)
	if err != nil || !ok {
		return !ok, err
	}
	chains, err := c.nft.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("verify: listing chains: %w", err)
	}
	n := 0
	for _, kc := range chains {
		if kc.Table.Name != m.Name {
			continue
		}
		n++
		mc, ok := m.Chains[kc.Name]
		if !ok || !sameBase(mc, kc) {
			return true, nil
		}
	}
	if n != len(m.Chains) {
		return true, nil
	}
	for _, mc := range m.Chains {
		rules, err := c.nft.GetRules(t, &nftables.Chain{Table: t, Name: mc.Name})
		if err != nil {
			return false, fmt.Errorf("verify: rules of chain %s: %w", mc.Name, err)
		}
		if len(rules) != len(mc.Rules) {
			return true, nil
		}
		for i, r := range rules {
			if !bytes.Equal(r.UserData, ruleUserData(mc.Rules[i])) || !sameExprs(r.Exprs, mc.Rules[i]) {
				return true, nil
			}
		}
	}
	sets, err := c.nft.GetSets(t)
	if err != nil {
		return false, fmt.Errorf("verify: listing sets: %w", err)
	}
	if len(sets) != len(m.Sets) {
		return true, nil
	}
	for _, ks := range sets {
		if ms, ok := m.Sets[ks.Name]; !ok || ks.Size != ms.Size {
			return true, nil
		}
	}
	for _, ms := range m.Sets {
		if ms.Timeout {
			continue // its elements are another owner's, expiring on their own
		}
		got, err := c.readElements(m.Name, ms.Name)
		if err != nil {
			return false, fmt.Errorf("verify: %w", err)
		}
		want, err := expectedElements(ms)
		if err != nil {
			return false, fmt.Errorf("verify: %w", err)
		}
		if !slices.Equal(want, got) {
			return true, nil
		}
	}
	return false, nil
}

// sameExprs reports whether expressions read back from the kernel are those of r: each
// re-encoded the way it was sent (counters compared by kind only: their values move). v0.3.0
// decodes every expression kind this package writes except byteorder, which it drops: byteorder
// is left out of the comparison.
func sameExprs(got []expr.Any, r Rule) bool {
	want, err := ruleExprs(r)
	if err != nil {
		return false
	}
	noByteorder := func(e expr.Any) bool { _, ok := e.(*expr.Byteorder); return ok }
	want = slices.DeleteFunc(want, noByteorder)
	got = slices.DeleteFunc(slices.Clone(got), noByteorder)
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if _, ok := want[i].(*expr.Counter); ok {
			if _, ok := got[i].(*expr.Counter); !ok {
				return false
			}
			continue
		}
		w, err1 := expr.Marshal(byte(nftables.TableFamilyINet), want[i])
		g, err2 := expr.Marshal(byte(nftables.TableFamilyINet), got[i])
		if err1 != nil || err2 != nil || !bytes.Equal(w, g) {
			return false
		}
	}
	return true
}

func sameBase(mc *Chain, kc *nftables.Chain) bool {
	if mc.Base == nil || kc.Hooknum == nil {
		return mc.Base == nil && kc.Hooknum == nil
	}
	want, err := nfChain(nil, mc)
	if err != nil {
		return false
	}
	return *want.Hooknum == *kc.Hooknum && kc.Priority != nil && *kc.Priority == *want.Priority
}
