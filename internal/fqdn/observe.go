package fqdn

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/nflog"
)

// AnswerCopyRange is the copy range of the NFLOG group of DNS answers (nflog.OpenRange): every
// UDP datagram whole, so that a held answer can be sent on as it came. The kernel copies what
// a packet has, not the range.
const AnswerCopyRange = 0xffff

// Writer writes the Cache's changes to the kernel (SetWriter).
type Writer interface {
	Write([]Change) error
}

// Stats counts what an Observer has seen.
type Stats struct {
	// Answers were parsed and given to the Cache; Ignored were not A or AAAA answers;
	// Malformed did not parse; WriteErrors failed to reach the kernel; ReleaseErrors were held
	// packets that could not be sent on. TCPPartial were TCP segments from port 53 that held
	// data but not exactly one whole length-prefixed message (not parsed: their answers are
	// not seen).
	Answers, Ignored, Malformed, WriteErrors, ReleaseErrors, TCPPartial uint64
}

// Observer feeds the DNS answers the kernel logs (to the group of an nflog.Reader) to a Cache
// and writes what changes. One goroutine runs it; Cache and Writer are its own while it runs,
// and other goroutines reach the Cache through SetPatterns, Entries and Evictions only.
type Observer struct {
	Cache  *Cache
	Writer Writer
	// Now is the clock, time.Now when nil.
	Now func() time.Time
	// Release, when not nil, is given every held packet (one of at most HoldMaxLength bytes)
	// whole once what its answer changes is committed — or failed, or it carried no answer: the
	// hold rule dropped it after logging it, and Release sends it on (Injector.Inject).
	Release                                                             func(raw []byte) error
	answers, ignored, malformed, writeErrors, releaseErrors, tcpPartial atomic.Uint64
	// busySince is when the packet in hand arrived (UnixNano), 0 between packets.
	busySince atomic.Int64
	// mu guards Cache: an answer's observation and write, against the other goroutines' calls.
	mu sync.Mutex
}

// SetPatterns gives the Cache the patterns whose sets the table declares (Cache.SetPatterns).
func (o *Observer) SetPatterns(patterns []Pattern) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Cache.SetPatterns(patterns)
}

// Entries is the Cache's addresses of pattern with their expiry (Cache.Entries), now.
func (o *Observer) Entries(pattern string) []Entry {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Cache.Entries(pattern, o.now())
}

// Evictions is what the Cache's bounds evicted so far.
func (o *Observer) Evictions() Evictions {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.Cache.Evictions()
}

func (o *Observer) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// Run reads the answers r receives until ctx ends (then it returns nil) or r fails; the
// destination of a logged packet is the client. An answer is the payload of a UDP packet, which
// is released when held (at most HoldMaxLength bytes); or the payload of a TCP segment that is
// one whole message behind its 2-byte length (RFC 1035 §4.2.2), which is never held: the hold
// rules copy TCP segments without dropping them. A TCP answer split over segments, or sharing
// one with another, is counted (Stats.TCPPartial) and not seen; a segment without data is
// skipped.
func (o *Observer) Run(ctx context.Context, r *nflog.Reader) error {
	return r.RunCopy(ctx, func(p nflog.Packet, c nflog.Copy) {
		o.busySince.Store(time.Now().UnixNano())
		defer o.busySince.Store(0)
		if p.Proto == unix.IPPROTO_TCP {
			switch msg, whole := tcpMessage(c.Raw); {
			case whole:
				o.Observe(p.Dst, msg)
			case msg != nil:
				o.tcpPartial.Add(1)
			}
			return
		}
		o.Observe(p.Dst, c.UDPPayload)
		if o.Release != nil && len(c.Raw) <= HoldMaxLength {
			if err := o.Release(c.Raw); err != nil {
				o.releaseErrors.Add(1)
			}
		}
	})
}

// tcpMessage is the DNS message a TCP segment (raw, from its IP header) carries whole after its
// 2-byte length, whole true; or the segment's data when it is not one whole message (nil when
// it has none).
func tcpMessage(raw []byte) (msg []byte, whole bool) {
	var l4 []byte
	switch {
	case len(raw) >= 20 && raw[0]>>4 == 4 && int(raw[0]&0x0f)*4 <= len(raw):
		end := min(len(raw), int(binary.BigEndian.Uint16(raw[2:])))
		l4 = raw[int(raw[0]&0x0f)*4 : end]
	case len(raw) >= 40 && raw[0]>>4 == 6 && raw[6] == unix.IPPROTO_TCP: // no extension header
		l4 = raw[40:min(len(raw), 40+int(binary.BigEndian.Uint16(raw[4:])))]
	default:
		return nil, false
	}
	if len(l4) < 20 || int(l4[12]>>4)*4 < 20 || int(l4[12]>>4)*4 > len(l4) {
		return nil, false
	}
	data := l4[int(l4[12]>>4)*4:]
	if len(data) == 0 {
		return nil, false
	}
	if len(data) < 2 || int(binary.BigEndian.Uint16(data)) != len(data)-2 {
		return data, false
	}
	return data[2:], true
}

// Stalled reports whether a packet has been in hand for longer than d: the Heartbeat stops then,
// so that answers pass unheld rather than wait for an Observer that does not return.
func (o *Observer) Stalled(d time.Duration) bool {
	since := o.busySince.Load()
	return since != 0 && time.Since(time.Unix(0, since)) > d
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
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.Writer.Write(o.Cache.Observe(client.Unmap(), a, o.now())); err != nil {
		o.writeErrors.Add(1)
	}
}

// Stats returns the counts so far; any goroutine may call it.
func (o *Observer) Stats() Stats {
	return Stats{Answers: o.answers.Load(), Ignored: o.ignored.Load(), Malformed: o.malformed.Load(),
		WriteErrors: o.writeErrors.Load(), ReleaseErrors: o.releaseErrors.Load(), TCPPartial: o.tcpPartial.Load()}
}
