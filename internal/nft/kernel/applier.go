package kernel

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Committer writes tables into the kernel: ruleset.Conn, or a fake in tests.
type Committer interface {
	Commit(desired *ruleset.Table, changes *ruleset.Changes) error
	Replace(desired *ruleset.Table) error
	Verify() (drift bool, err error)
	DeleteTable(name string) error
	Close() error
}

// Applier keeps the kernel's table equal to its builder's desired table: it commits each
// apply's changes in one transaction, writes the table whole when it must, reads it back and
// repairs drift, and reads the kernel's counters of the committed table. Apply, Resync, Repair,
// Cleanup and Close are called from one goroutine; Packets and DenyChain from any, at any time.
type Applier struct {
	builder *nft.Builder
	conn    Committer
	log     *slog.Logger
	// netnsFD is the namespace programmed (< 0: the current one), for the counter reads.
	netnsFD int
	// counted is what the counter reads use, replaced after each commit: they never wait for
	// an apply, however long its compile.
	counted atomic.Pointer[nft.Counted]
	// tally keeps the desired table's Stats from each apply's changes (every chain put or dropped
	// is named by an Apply's changes, or followed by a replace, which counts anew)
	tally        ruleset.Tally
	committed    bool // the table has been written whole by this process and not failed since
	transactions uint64
	// bridge writes the bridge companion table (bridge.go) after each commit; nil without a
	// kernel connection of Open.
	bridge *bridgeCompanion
}

// Open opens the kernel connection to the network namespace netnsFD (< 0: the current one) and
// returns an applier of a builder configured by cfg. Nothing is written before the first
// in-sync apply; a table left by a previous run stays in force until then.
func Open(netnsFD int, cfg nft.Config) (*Applier, error) {
	conn, err := ruleset.Open(netnsFD)
	if err != nil {
		return nil, fmt.Errorf("opening nftables connection: %w", err)
	}
	a := NewApplier(nft.NewBuilder(cfg), conn, cfg.Logger)
	a.bridge = &bridgeCompanion{name: a.builder.Table().Name, netnsFD: -1}
	if netnsFD >= 0 {
		// a handle of our own: the counter reads may run after the caller closed its one
		if a.netnsFD, err = unix.FcntlInt(uintptr(netnsFD), unix.F_DUPFD_CLOEXEC, 0); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("duplicating netns handle %d: %w", netnsFD, err)
		}
		a.bridge.netnsFD = a.netnsFD
	}
	return a, nil
}

// NewApplier returns an applier of b committing through c (tests use a fake). log may be nil.
func NewApplier(b *nft.Builder, c Committer, log *slog.Logger) *Applier {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Applier{builder: b, conn: c, log: log, netnsFD: -1}
}

// Builder is the applier's builder: the desired table, its render and its decisions.
func (a *Applier) Builder() *nft.Builder { return a.builder }

// Table returns the desired table (read-only for the caller): after a successful apply, the
// committed one.
func (a *Applier) Table() *ruleset.Table { return a.builder.Table() }

// Render returns the desired table in `nft -f` syntax.
func (a *Applier) Render() string { return a.builder.Render() }

// Stats counts the desired (after a successful apply: committed) table's objects, and the
// transactions committed: the rules are tallied per apply from its changes (ruleset.Tally), so
// it costs O(sets), not a walk of every chain.
func (a *Applier) Stats() (ruleset.Stats, uint64) {
	return a.tally.Stats(a.builder.Table()), a.transactions
}

// Apply folds messages into the desired table and, once in sync, commits the difference in one
// transaction. On error the desired state is kept; Resync retries it. Apply consumes msgs
// (nft.Builder.Apply).
func (a *Applier) Apply(msgs []dataplane.Message) error {
	changes := a.builder.Apply(msgs)
	if changes == nil {
		return nil
	}
	a.tally.Update(a.builder.Table(), changes)
	if !a.committed {
		return a.replace()
	}
	for _, name := range a.builder.RegrowSets() {
		if changes.Sets == nil {
			changes.Sets = map[string]struct{}{}
		}
		changes.Sets[name] = struct{}{} // written anew with its new size, in this transaction
	}
	table := a.builder.Table()
	sourcesChanged := touches(table, changes, nft.SourcesV4) || touches(table, changes, nft.SourcesV6)
	if err := a.conn.Commit(table, changes); err != nil {
		a.committed = false // the next Resync replaces the whole table
		return fmt.Errorf("committing table %s: %w", table.Name, err)
	}
	a.transactions++
	a.counted.Store(a.builder.Counted())
	if w, ok := a.conn.(interface{ WholeWhy() string }); ok && w.WholeWhy() != "" {
		// O(table) in the kernel: worth a line when it happens under churn
		a.log.Info("a commit wrote the table whole", "table", table.Name, "why", w.WholeWhy())
	}
	return a.syncBridge(false, sourcesChanged)
}

// touches reports whether a commit of changes to table changes the set name: it names it, or the
// set holds changes not committed yet.
func touches(table *ruleset.Table, changes *ruleset.Changes, name string) bool {
	if _, ok := changes.Sets[name]; ok {
		return true
	}
	s := table.Sets[name]
	return s != nil && s.Uncommitted()
}

// syncBridge brings the bridge companion up to date with the committed table (bridgeCompanion.sync);
// on failure the next Resync replaces both.
func (a *Applier) syncBridge(force, sourcesChanged bool) error {
	if a.bridge == nil {
		return nil
	}
	if err := a.bridge.sync(a.builder, force, sourcesChanged); err != nil {
		a.committed = false
		return err
	}
	return nil
}

// replace writes the whole desired table in one transaction, every set sized anew. When the
// kernel refuses it and names the object it refused (ruleset.KernelError), the builder rejects
// the costliest policy of the groups that object belongs to (nft.Builder.Refused) and the table
// is written again: every other policy stays enforced. At most maxRefusals policies are
// rejected so per replace.
func (a *Applier) replace() error {
	table := a.builder.Table()
	defer a.tally.Reset(table) // Refused may have changed any chain
	for refusals := 0; ; refusals++ {
		a.builder.ResizeSets()
		err := a.conn.Replace(table)
		if err == nil {
			break
		}
		a.committed = false
		if refusals == maxRefusals || !a.builder.Refused(err) {
			return fmt.Errorf("replacing table %s: %w", table.Name, err)
		}
	}
	a.transactions++
	a.committed = true
	a.counted.Store(a.builder.Counted())
	return a.syncBridge(true, true)
}

// maxRefusals bounds the policies one replace rejects for objects the kernel refused.
const maxRefusals = 16

// Resync reads the table back and, on drift or after a failed apply, replaces it with the desired
// table in one transaction; first, without a read-back, it checks that the committer accounts for
// every object of the desired table (ruleset.Conn.Unjournaled: a change no commit sent would leave
// the kernel equal to the committed table, so no read-back sees it). It reports whether a repair
// was needed. Before in-sync it does nothing.
func (a *Applier) Resync() (bool, error) {
	if !a.builder.InSync() {
		return false, nil
	}
	if a.committed {
		if u, ok := a.conn.(interface{ Unjournaled(*ruleset.Table) string }); ok {
			if what := u.Unjournaled(a.builder.Table()); what != "" {
				a.log.Warn("a change of the desired table reached no commit; replacing the table", "table", a.builder.Table().Name, "what", what)
				return true, a.replace()
			}
		}
		drift, err := a.conn.Verify()
		if err == nil && !drift {
			return false, nil
		}
		if err != nil {
			a.log.Warn("reading back the table failed; replacing it", "table", a.builder.Table().Name, "error", err)
		}
	}
	return true, a.replace()
}

// Repair replaces the table with the desired one in one transaction without reading it back
// first: the answer to the kernel's report that another process changed it, which makes the
// read-back of Resync (seconds for hundreds of thousands of elements) needless. Before in-sync
// it does nothing: the first commit replaces the table.
func (a *Applier) Repair() error {
	if !a.builder.InSync() {
		return nil
	}
	return a.replace()
}

// Monitor subscribes to the kernel's reports of changes that other processes make to the
// table (ruleset.Monitor), delivered to out: the caller runs it and answers a reported change
// with Repair, a report that changes may have gone unreported with Resync. It needs the kernel
// connection of Open; the applier's own commits are not reported.
func (a *Applier) Monitor(out chan<- ruleset.TableChange) (*ruleset.Monitor, error) {
	c, ok := a.conn.(*ruleset.Conn)
	if !ok {
		return nil, errors.New("monitoring the table: the applier has no kernel connection")
	}
	return c.Monitor(a.builder.Table().Name, out)
}

// Cleanup removes the table, and its bridge companion, from the kernel.
func (a *Applier) Cleanup() error {
	a.committed = false
	a.counted.Store(nil)
	err := a.conn.DeleteTable(a.builder.Table().Name)
	if a.bridge != nil {
		err = errors.Join(err, a.bridge.delete())
	}
	return err
}

// Close releases the netlink connection; the table stays in force.
func (a *Applier) Close() error {
	err := a.conn.Close()
	if a.netnsFD >= 0 {
		err = errors.Join(err, unix.Close(a.netnsFD))
		a.netnsFD = -1
	}
	return err
}
