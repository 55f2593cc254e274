package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
)

// One agent programs a node's table at a time (RunConfig.LockFile): during a DaemonSet's rolling
// update with maxSurge 1 the new agent starts while the old one still runs, and two agents
// programming one table would each take the other's commits for tampering and replace the table
// whole, over and over. The agents exclude each other with an advisory lock (flock(2), exclusive)
// on a file of the host that both see (the DaemonSet mounts /run/nftpolicy from the host). An
// agent that finds the lock taken stands by (Config.Programming): it syncs, builds the graph and
// the table (Programmer.Build), reports ready — so that the DaemonSet controller deletes the old
// pod — and writes nothing to the kernel, until the old agent exits: the kernel releases a flock
// when its holder's last descriptor closes, so on a clean exit and on SIGKILL alike. Its first
// commit then replaces the old table in one transaction; the old table stays in force until then.

// lockPoll is how often a standing-by agent tries the lock again.
const lockPoll = 100 * time.Millisecond

// LockPath is the file that the agents of table lock, given RunConfig.LockFile: the table's name
// goes before the extension (/run/nftpolicy/agent.lock, table nftpolicy:
// /run/nftpolicy/agent.nftpolicy.lock), so that agents of different tables do not exclude each
// other. "" disables the lock.
func LockPath(file, table string) string {
	if file == "" {
		return ""
	}
	ext := filepath.Ext(file)
	return strings.TrimSuffix(file, ext) + "." + table + ext
}

// tableLock is the agent's hold on its table's lock file: an exclusive flock, taken at once or
// by a goroutine that tries again every lockPoll until it gets it or its context ends.
type tableLock struct {
	path string
	f    *os.File
	held atomic.Bool
	// waited is closed once the goroutine that waits for the lock has ended (at once when the
	// lock was free)
	waited chan struct{}
}

// takeLock opens the lock file (creating it and its directory) and takes the lock if it is free.
// Otherwise it logs that another agent holds it and waits for it in a goroutine until ctx ends;
// programming, closed once the lock is held, is then what the loop stands by on
// (Config.Programming); it is nil when the lock was free. The gauges nftpolicy_lock_held and
// nftpolicy_lock_wait_seconds follow it.
func takeLock(ctx context.Context, path string, log *slog.Logger, m *Metrics) (l *tableLock, programming <-chan struct{}, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("creating the lock's directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the lock file: %w", err)
	}
	l = &tableLock{path: path, f: f, waited: make(chan struct{})}
	ok, err := l.try()
	if err != nil {
		_ = f.Close()
		return nil, nil, err
	}
	if ok {
		close(l.waited)
		l.took(log, m, 0)
		return l, nil, nil
	}
	log.Info("waiting for the lock held by another agent; standing by: syncing, not writing the table", "lock", path)
	ch := make(chan struct{})
	go func() {
		defer close(l.waited)
		start := time.Now()
		if err := l.wait(ctx); err != nil {
			return
		}
		l.took(log, m, time.Since(start))
		close(ch)
	}()
	return l, ch, nil
}

// try takes the lock if it is free.
func (l *tableLock) try() (bool, error) {
	err := unix.Flock(int(l.f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		l.held.Store(true)
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	default:
		return false, fmt.Errorf("locking %s: %w", l.path, err)
	}
}

// wait tries the lock every lockPoll until it is held (nil), ctx ends or locking fails.
func (l *tableLock) wait(ctx context.Context) error {
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if ok, err := l.try(); ok || err != nil {
			return err
		}
	}
}

func (l *tableLock) took(log *slog.Logger, m *Metrics, waited time.Duration) {
	m.LockHeld.Set(1)
	m.LockWait.Set(waited.Seconds())
	if waited > 0 {
		log.Info("took the lock after "+waited.Round(time.Millisecond).String()+"; programming the table", "lock", l.path, "waited", waited)
	}
}

// Held reports whether this agent holds the lock (a nil tableLock: no lock, so yes).
func (l *tableLock) Held() bool { return l == nil || l.held.Load() }

// release ends the wait, if any (its context must be done), and releases the lock by closing the
// file. The caller releases it only once nothing of it writes the table any more.
func (l *tableLock) release() error {
	if l == nil {
		return nil
	}
	<-l.waited
	l.held.Store(false)
	return l.f.Close()
}

// lockTable takes the lock of lockFile for the table (takeLock); without a lock file the agent
// programs at once.
func lockTable(ctx context.Context, lockFile, table string, log *slog.Logger, m *Metrics) (*tableLock, <-chan struct{}, error) {
	path := LockPath(lockFile, table)
	if path == "" {
		m.LockHeld.Set(1)
		return nil, nil, nil
	}
	return takeLock(ctx, path, log, m)
}

// listenShared listens on addr with SO_REUSEPORT: the agents of a node share its network
// namespace (hostNetwork), and during a rolling update the new agent serves /metrics, /healthz
// and /readyz on the same addresses as the old one, which still runs. The kernel spreads the
// connections over both until the old one exits; a probe answered by the old agent is as true of
// the node (its table is the one in force).
func listenShared(ctx context.Context, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(ctx, "tcp", addr)
}

// Build folds messages into the builder's table and computes it, without writing the kernel
// (Programmer.Build): the first commit writes the table whole, so the changes are not kept.
func (a nftAdapter) Build(msgs []dataplane.Message) { a.Applier.Builder().Apply(msgs) }
