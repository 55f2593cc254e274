package fqdn

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// HoldSet is the set of the heartbeat (`type inet_service; flags timeout`): while it holds the
// element 53, the hold rule `udp sport @fqdn_hold meta length <= 1280 log group N drop` takes DNS
// answers from the path and copies them to the agent, which sends them on once their addresses
// are committed; a longer answer is copied and passes (`udp sport @fqdn_hold log group N`), racing
// its commit. When the agent stops refreshing it, the element times out and answers pass
// unheld and unseen.
const HoldSet = "fqdn_hold"

// HoldMaxLength is the longest packet the hold rule holds: an Injector sends a packet whole and
// cannot fragment it, and 1,280 bytes, IPv6's minimum MTU, pass every pod's link. It is the size
// resolvers keep UDP answers to (an EDNS buffer of 1,232 bytes, DNS flag day 2020).
const HoldMaxLength = 1280

// Heartbeat timing: the element lives HeartbeatTimeout and is refreshed every HeartbeatPeriod,
// so answers wait at most HeartbeatTimeout for an agent that died before they pass again.
const (
	HeartbeatPeriod  = 500 * time.Millisecond
	HeartbeatTimeout = 2 * time.Second
)

// Beat refreshes the heartbeat: HoldSet's element 53 with the timeout.
func (w *SetWriter) Beat(timeout time.Duration) error {
	set := &nftables.Set{Table: w.table, Name: HoldSet, HasTimeout: true, KeyType: nftables.TypeInetService}
	if err := w.conn.SetAddElements(set, []nftables.SetElement{{Key: binary.BigEndian.AppendUint16(nil, 53), Timeout: timeout}}); err != nil {
		return fmt.Errorf("fqdn: encoding the heartbeat: %w", err)
	}
	if err := w.conn.Flush(); err != nil {
		return fmt.Errorf("fqdn: writing the heartbeat to table %s: %w", w.table.Name, err)
	}
	return nil
}

// EndHold removes the heartbeat's element: answers pass unheld from now on.
func (w *SetWriter) EndHold() error {
	set := &nftables.Set{Table: w.table, Name: HoldSet, HasTimeout: true, KeyType: nftables.TypeInetService}
	if err := w.conn.SetDeleteElements(set, []nftables.SetElement{{Key: binary.BigEndian.AppendUint16(nil, 53)}}); err != nil {
		return fmt.Errorf("fqdn: encoding the end of the hold: %w", err)
	}
	if err := w.conn.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("fqdn: ending the hold in table %s: %w", w.table.Name, err)
	}
	return nil
}

// Heartbeat beats every HeartbeatPeriod with HeartbeatTimeout until ctx ends, skipping the beats
// while stalled reports true (nil: never), and ends the hold at once when it returns (EndHold),
// so that answers never wait for an agent that has stopped. It returns nil when ctx ends, or the
// first error. w must not be the Observer's Writer (each batch is its connection's own).
func Heartbeat(ctx context.Context, w *SetWriter, stalled func() bool) (err error) {
	tick := time.NewTicker(HeartbeatPeriod)
	defer tick.Stop()
	defer func() { err = errors.Join(err, w.EndHold()) }()
	for {
		if stalled == nil || !stalled() {
			if err := w.Beat(HeartbeatTimeout); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// InjectUID is the user the Injector's sockets belong to (`meta skuid`), which no process of a
// node runs as: the output hold chain leaves the packets it sends on alone, so that an answer a
// resolver on the node sends is held once. Nothing on the wire carries it.
const InjectUID = 0x7ffffffd

// Injector sends held packets on, whole, through raw sockets (IPPROTO_RAW: the packet brings its
// own IP header) of the network namespace it was made in; they leave through its output path,
// as InjectUID's.
type Injector struct{ fd4, fd6 int }

// NewInjector opens the raw sockets in the calling thread's network namespace, as InjectUID's:
// the thread's filesystem user is InjectUID while it opens them (setfsuid, which needs
// CAP_SETUID), its own again after.
func NewInjector() (inj *Injector, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, _ := unix.SetfsuidRetUid(InjectUID)
	defer unix.SetfsuidRetUid(prev)
	if cur, _ := unix.SetfsuidRetUid(-1); cur != InjectUID {
		return nil, fmt.Errorf("fqdn: sockets of user %d: setfsuid refused (CAP_SETUID)", InjectUID)
	}
	fd4, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		return nil, fmt.Errorf("fqdn: raw IPv4 socket: %w", err)
	}
	fd6, err := unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
	if err != nil {
		unix.Close(fd4)
		return nil, fmt.Errorf("fqdn: raw IPv6 socket: %w", err)
	}
	return &Injector{fd4: fd4, fd6: fd6}, nil
}

// ErrTruncated says that a held packet's copy is shorter than the packet: it cannot be sent on.
var ErrTruncated = errors.New("packet copy truncated")

// Inject sends the packet raw (from its IP header) to its destination. A UDP packet's checksum
// is computed afresh first: a packet copied on its way may carry only the partial checksum its
// sender's device was left to complete (checksum offload), which its receiver would refuse.
func (i *Injector) Inject(raw []byte) error {
	if len(raw) == 0 {
		return fmt.Errorf("fqdn: injecting: %w", ErrTruncated)
	}
	switch raw[0] >> 4 {
	case 4:
		if len(raw) < 20 || int(binary.BigEndian.Uint16(raw[2:])) != len(raw) {
			return fmt.Errorf("fqdn: injecting %d bytes: %w", len(raw), ErrTruncated)
		}
		dst := netip.AddrFrom4([4]byte(raw[16:20]))
		if ihl := int(raw[0]&0x0f) * 4; raw[9] == unix.IPPROTO_UDP && ihl >= 20 && len(raw) >= ihl+8 {
			setUDPChecksum(raw[12:20], raw[ihl:])
		}
		if err := unix.Sendto(i.fd4, raw, 0, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
			return fmt.Errorf("fqdn: injecting to %s: %w", dst, err)
		}
	case 6:
		if len(raw) < 40 || int(binary.BigEndian.Uint16(raw[4:]))+40 != len(raw) {
			return fmt.Errorf("fqdn: injecting %d bytes: %w", len(raw), ErrTruncated)
		}
		dst := netip.AddrFrom16([16]byte(raw[24:40]))
		if raw[6] == unix.IPPROTO_UDP && len(raw) >= 48 {
			setUDPChecksum(raw[8:40], raw[40:])
		}
		if err := unix.Sendto(i.fd6, raw, 0, &unix.SockaddrInet6{Addr: dst.As16()}); err != nil {
			return fmt.Errorf("fqdn: injecting to %s: %w", dst, err)
		}
	default:
		return fmt.Errorf("fqdn: injecting: IP version %d", raw[0]>>4)
	}
	return nil
}

// setUDPChecksum writes the checksum of the UDP datagram udp (RFC 768; RFC 8200 §8.1) whose
// source and destination addresses are addrs, one after the other.
func setUDPChecksum(addrs, udp []byte) {
	udp[6], udp[7] = 0, 0
	sum := uint32(unix.IPPROTO_UDP) + uint32(len(udp))
	for _, b := range [][]byte{addrs, udp} {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
}

// Close closes the sockets.
func (i *Injector) Close() error { return errors.Join(unix.Close(i.fd4), unix.Close(i.fd6)) }
