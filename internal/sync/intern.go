package sync

import (
	"strings"
	gosync "sync"
)

// internHeadroom is how many new strings an interner takes between two sweeps.
const internHeadroom = 4096

// interner hands out one copy of each string it is given. The protobuf decoder allocates every
// string of every pod anew, and a pod's record and endpoint keep some of those that repeat across
// pods (namespace, node, service account, container port names): interned, 100,000 pods share a
// few thousand strings instead of holding 100,000 copies of each.
//
// Its memory is bounded however many distinct strings pass over days of churn (nodes replaced,
// namespaces created and deleted): once internHeadroom new strings have come since the last
// sweep, it sweeps, keeping only the strings handed out since then. It holds at most the strings
// used while the last internHeadroom new ones came, plus internHeadroom. The headroom is fixed,
// not proportional to what a sweep keeps (say twice): a sweep keeps the new strings of its
// period, so short-lived strings used a few times each (namespaces of CI runs) would make each
// period longer than the one before, and the map would grow without end. Unlike emptying it, a
// sweep keeps the strings in use shared. A string dropped while records hold it stays valid;
// later records get a new copy.
//
// Safe for concurrent use: each informer runs its transform on its own goroutine.
type interner struct {
	mu    gosync.Mutex
	strs  map[string]internEntry
	limit int // sweep before adding a string beyond limit
}

type internEntry struct {
	s    string
	used bool // handed out since the last sweep
}

func newInterner() *interner {
	return &interner{strs: map[string]internEntry{}, limit: internHeadroom}
}

// intern returns the interner's copy of s.
func (in *interner) intern(s string) string {
	if s == "" {
		return ""
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	e, ok := in.strs[s]
	if !ok {
		if len(in.strs) >= in.limit {
			in.sweepLocked()
		}
		// a copy of its own: s may be part of a larger allocation the caller drops
		e.s = strings.Clone(s)
	}
	if !e.used { // new, or first use since the last sweep
		e.used = true
		in.strs[e.s] = e
	}
	return e.s
}

// sweepLocked keeps the strings handed out since the last sweep, in a new map (a Go map does not
// shrink when entries are deleted), and sets the next limit.
func (in *interner) sweepLocked() {
	kept := map[string]internEntry{}
	for s, e := range in.strs {
		if e.used {
			kept[s] = internEntry{s: e.s}
		}
	}
	in.strs = kept
	in.limit = len(kept) + internHeadroom
}
