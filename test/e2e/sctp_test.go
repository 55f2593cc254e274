package e2e

// SCTP traffic without SCTP: this kernel has no CONFIG_IP_SCTP, so no SCTP socket can connect,
// but it has SCTP conntrack (CONFIG_NF_CT_PROTO_SCTP=y) and nftables matches SCTP headers. A raw
// IP socket (protocol 132) in the client's namespace sends a well-formed SCTP INIT (verification
// tag 0, CRC32c checksum, one chunk: the packet conntrack accepts as a new association); a raw
// socket in the server's namespace sees every protocol-132 packet delivered to it. An INIT that
// arrives is a connection the ruleset allowed; one that does not, a connection it dropped. The
// first packet of an association is exactly the packet policy judges, so this checks the SCTP
// cases on real packets through the real ruleset, not only the compiled rules.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

const protoSCTP = 132

// sctpEnd is one pod for the SCTP prober: its key, its network namespace (an open handle) and
// its address in the family probed.
type sctpEnd struct {
	Key   string
	NetNS int
	IP    netip.Addr
}

// sctpInit returns an SCTP packet holding one INIT chunk from srcPort to dstPort whose initiate
// tag is tag.
func sctpInit(srcPort, dstPort uint16, tag uint32) []byte {
	b := make([]byte, 12+20)
	be := binary.BigEndian
	be.PutUint16(b[0:], srcPort)
	be.PutUint16(b[2:], dstPort)
	// b[4:8] verification tag: 0 in an INIT; b[8:12] checksum, below.
	c := b[12:]
	c[0] = 1 // INIT
	be.PutUint16(c[2:], 20)
	be.PutUint32(c[4:], tag)   // initiate tag (non-zero)
	be.PutUint32(c[8:], 65535) // advertised receiver window
	be.PutUint16(c[12:], 1)    // outbound streams
	be.PutUint16(c[14:], 1)    // inbound streams
	be.PutUint32(c[16:], tag)  // initial TSN
	// RFC 9260 appendix A: CRC32c over the packet with a zero checksum field, stored so that
	// the least significant byte comes first (Linux: cpu_to_le32).
	binary.LittleEndian.PutUint32(b[8:], crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// parseSCTPInit returns the destination port and initiate tag of an SCTP INIT packet, or ok
// false.
func parseSCTPInit(b []byte) (dstPort uint16, tag uint32, ok bool) {
	if len(b) < 32 || b[12] != 1 {
		return 0, 0, false
	}
	be := binary.BigEndian
	return be.Uint16(b[2:]), be.Uint32(b[16:]), true
}

// rawSocketIn opens a raw protocol-132 socket inside the network namespace netnsFD. The socket
// stays in that namespace whatever thread later uses it.
//
// The thread is switched back to its namespace and unlocked afterwards rather than left to die
// locked: a thread that exits delivers the parent-death signal (Pdeathsig) to every child it
// forked, and the package's etcd and kube-apiserver were forked by some thread of this process.
// Only when switching back fails is the thread left locked, so it dies instead of serving other
// goroutines in the wrong namespace.
func rawSocketIn(netnsFD int, is6 bool) (int, error) {
	family := unix.AF_INET
	if is6 {
		family = unix.AF_INET6
	}
	fd := -1
	err := netns.DoFD(netnsFD, func() (err error) {
		if fd, err = unix.Socket(family, unix.SOCK_RAW|unix.SOCK_CLOEXEC, protoSCTP); err != nil {
			return fmt.Errorf("raw SCTP socket: %w", err)
		}
		return nil
	})
	return fd, err
}

func sockaddr(ip netip.Addr) unix.Sockaddr {
	if ip.Is4() {
		return &unix.SockaddrInet4{Addr: ip.As4()}
	}
	return &unix.SockaddrInet6{Addr: ip.As16()}
}

// probeSCTPMatrix sends one SCTP INIT from every end to every other end (not to itself) on
// port, and reports which arrived within timeout, keyed {from, to}. All ends must have
// addresses of one family.
func probeSCTPMatrix(ctx context.Context, ends []sctpEnd, port uint16, timeout time.Duration) (map[[2]string]bool, error) {
	if len(ends) == 0 {
		return map[[2]string]bool{}, nil
	}
	is6 := ends[0].IP.Is6()
	// One receiving socket per end, opened before anything is sent.
	recv := make([]int, len(ends))
	defer func() {
		for _, fd := range recv {
			if fd > 0 {
				unix.Close(fd)
			}
		}
	}()
	for i, e := range ends {
		fd, err := rawSocketIn(e.NetNS, is6)
		if err != nil {
			return nil, fmt.Errorf("receiver in %s: %w", e.Key, err)
		}
		recv[i] = fd
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return nil, fmt.Errorf("receiver in %s: %w", e.Key, err)
		}
	}
	// Tags identify the pair: tag = 1 + from*n + to, unique within one matrix; a fresh base
	// per call keeps late packets of an earlier matrix from counting.
	n := len(ends)
	base := uint32(time.Now().UnixNano()&0x3fff) << 16
	tagOf := func(from, to int) uint32 { return base + 1 + uint32(from*n+to) }
	out := map[[2]string]bool{}
	for i := range ends {
		for j := range ends {
			if i != j {
				out[[2]string{ends[i].Key, ends[j].Key}] = false
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(timeout)
	for j := range ends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				nr, _, err := unix.Recvfrom(recv[j], buf, 0)
				if err != nil {
					continue // timeout tick or EINTR
				}
				pkt := buf[:nr]
				if !is6 { // IPv4 raw sockets receive the IP header too
					if nr < 20 {
						continue
					}
					pkt = pkt[int(buf[0]&0x0f)*4:]
				}
				dport, tag, ok := parseSCTPInit(pkt)
				if !ok || dport != port || tag <= base || tag > base+uint32(n*n) {
					continue
				}
				k := int(tag - base - 1)
				from, to := k/n, k%n
				if to != j || from == j {
					continue
				}
				mu.Lock()
				out[[2]string{ends[from].Key, ends[to].Key}] = true
				mu.Unlock()
			}
		}()
	}
	var errs []error
	for i, e := range ends {
		fd, err := rawSocketIn(e.NetNS, is6)
		if err != nil {
			errs = append(errs, fmt.Errorf("sender in %s: %w", e.Key, err))
			continue
		}
		for j, d := range ends {
			if i == j {
				continue
			}
			pkt := sctpInit(uint16(30000+i*n+j), port, tagOf(i, j))
			if err := unix.Sendto(fd, pkt, 0, sockaddr(d.IP)); err != nil && !errors.Is(err, unix.EPERM) {
				// EPERM is a local nftables drop of the output packet: a blocked cell.
				errs = append(errs, fmt.Errorf("sending %s -> %s: %w", e.Key, d.Key, err))
			}
		}
		unix.Close(fd)
	}
	wg.Wait()
	return out, errors.Join(errs...)
}
