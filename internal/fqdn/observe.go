package fqdn

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/nflog"
)

// AnswerCopyRange is the copy range the NFLOG group of DNS answers needs (nflog.OpenRange): an
// IPv6 and a UDP header and a 4,096-byte DNS message (EDNS0's common buffer size). A longer
// answer is cut, fails to parse and is counted as Malformed.
const AnswerCopyRange = 40 + 8 + 4096

// Writer writes the Cache's changes to the kernel (SetWriter).
type Writer interface {
	Write([]Change) error
}

// Stats counts what an Observer has seen.
type Stats struct {
	// Answers were parsed and given to the Cache; Ignored were not A or AAAA answers;
	// Malformed did not parse; WriteErrors failed to reach the kernel.
	Answers, Ignored, Malformed, WriteErrors uint64
}

// Observer feeds the DNS answers the kernel logs (to the group of an nflog.Reader) to a Cache
// and writes what changes. One goroutine runs it; Cache and Writer are its own while it runs.
type Observer struct {
	Cache  *Cache
	Writer Writer
	// Now is the clock, time.Now when nil.
	Now func() time.Time
	// Written, when not nil, is called after each answer's changes are committed, with the
	// answer's client and the error of the write: the hook where a held answer is released.
	Written                                  func(client netip.Addr, err error)
	answers, ignored, malformed, writeErrors atomic.Uint64
}

// Run reads the answers r receives until ctx ends (then it returns nil) or r fails. An answer
// is the payload of a logged UDP packet; its destination is the client.
func (o *Observer) Run(ctx context.Context, r *nflog.Reader) error {
	return r.RunPayload(ctx, func(p nflog.Packet, payload []byte) { o.Observe(p.Dst, payload) })
}

// Observe handles one DNS message sent to client.
func (o *Observer) Observe(client netip.Addr, msg []byte) {
	a, err := ParseAnswer(msg)
	switch {
	case errors.Is(err, ErrNotAnswer):
		o.ignored.Add(1)
		return
	case err != nil:
		o.malformed.Add(1)
		return
	}
	o.answers.Add(1)
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	err = o.Writer.Write(o.Cache.Observe(client.Unmap(), a, now()))
	if err != nil {
		o.writeErrors.Add(1)
	}
	if o.Written != nil {
		o.Written(client, err)
	}
}

// Stats returns the counts so far; any goroutine may call it.
func (o *Observer) Stats() Stats {
	return Stats{Answers: o.answers.Load(), Ignored: o.ignored.Load(), Malformed: o.malformed.Load(), WriteErrors: o.writeErrors.Load()}
}
