package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"
)

// Protocol is a transport protocol as Kubernetes spells it.
type Protocol string

// The protocols of NetworkPolicy ports.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// ErrNoSCTP is returned for SCTP servers and probes: this kernel is built without SCTP
// (CONFIG_IP_SCTP unset), so SCTP rules can be checked in the ruleset but not with traffic.
var ErrNoSCTP = errors.New("the kernel has no SCTP (CONFIG_IP_SCTP unset): SCTP traffic cannot be checked")

// reply is what the TCP servers send on accept.
var reply = []byte("nftp\n")

type serviceKey struct {
	netns string
	proto Protocol
	port  uint16
}

// service is a set of listeners with their accept/read loops and live connections.
type service struct {
	ctx     context.Context // done when the service stops
	cancel  context.CancelFunc
	mu      sync.Mutex
	closers []io.Closer
	conns   map[net.Conn]bool
	stopped bool
	wg      sync.WaitGroup
}

func newService() *service {
	ctx, cancel := context.WithCancel(context.Background())
	return &service{ctx: ctx, cancel: cancel, conns: map[net.Conn]bool{}}
}

func (s *service) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		c.Close()
		return false
	}
	s.conns[c] = true
	return true
}

func (s *service) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *service) stop() {
	s.cancel()
	s.mu.Lock()
	s.stopped = true
	for _, c := range s.closers {
		c.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Serve starts a server in the namespace on port: TCP accepts and sends a short reply, UDP
// echoes each datagram. Without addrs it listens on every address of both families (one
// dual-stack socket); with addrs, on those only. It is idempotent per (namespace, protocol,
// port) and the server runs until DeletePod of its pod or Close.
//
// A UDP server on the wildcard address answers from the address the kernel picks for the reply;
// in a namespace with several addresses of a family (a node) pass the addresses explicitly.
func (c *Cluster) Serve(netnsName string, proto Protocol, port uint16, addrs ...netip.Addr) error {
	key := serviceKey{netnsName, proto, port}
	switch proto {
	case TCP, UDP:
	case SCTP:
		return fmt.Errorf("serving %s/%d in %s: %w", proto, port, netnsName, ErrNoSCTP)
	default:
		return fmt.Errorf("serving in %s: unknown protocol %q", netnsName, proto)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("serving %s/%d in %s: cluster closed", proto, port, netnsName)
	}
	if c.services[key] != nil {
		return nil
	}
	s := newService()
	listen := []string{net.JoinHostPort("", strconv.Itoa(int(port)))}
	if len(addrs) > 0 {
		listen = listen[:0]
		for _, a := range addrs {
			listen = append(listen, netip.AddrPortFrom(a, port).String())
		}
	}
	err := Do(netnsName, func() error {
		for _, l := range listen {
			if proto == TCP {
				ln, err := net.Listen("tcp", l)
				if err != nil {
					return err
				}
				s.closers = append(s.closers, ln)
			} else {
				pc, err := net.ListenPacket("udp", l)
				if err != nil {
					return err
				}
				s.closers = append(s.closers, pc)
			}
		}
		return nil
	})
	if err != nil {
		s.stop()
		return fmt.Errorf("serving %s/%d in %s: %w", proto, port, netnsName, err)
	}
	for _, cl := range s.closers {
		s.wg.Add(1)
		switch l := cl.(type) {
		case net.Listener:
			go s.acceptLoop(l, func(conn net.Conn) {
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				conn.Write(reply)
			})
		case net.PacketConn:
			go s.echoLoop(l)
		}
	}
	c.services[key] = s
	return nil
}

func (s *service) acceptLoop(ln net.Listener, handle func(net.Conn)) {
	defer s.wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // e.g. EMFILE: back off, keep serving
			continue
		}
		if !s.track(conn) {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.untrack(conn)
			handle(conn)
		}()
	}
}

func (s *service) echoLoop(pc net.PacketConn) {
	defer s.wg.Done()
	buf := make([]byte, 65536)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED left by an earlier reply's ICMP
		}
		pc.WriteTo(buf[:n], from)
	}
}

// Forward listens on listen inside the namespace and proxies every connection to target, dialled
// from the root namespace (e.g. an API server on the root namespace's loopback). It runs until
// Close.
func (c *Cluster) Forward(netnsName string, listen netip.AddrPort, target string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("forwarding %s in %s: cluster closed", listen, netnsName)
	}
	s, err := forward(netnsName, listen, target)
	if err != nil {
		return err
	}
	c.forwards = append(c.forwards, s)
	return nil
}

// Forward is Cluster.Forward for a namespace of no Cluster: it runs until the Forwarder is
// closed.
func Forward(netnsName string, listen netip.AddrPort, target string) (*Forwarder, error) {
	s, err := forward(netnsName, listen, target)
	if err != nil {
		return nil, err
	}
	return &Forwarder{s}, nil
}

// Forwarder is a running Forward.
type Forwarder struct{ s *service }

// Close stops listening and ends the connections it forwards.
func (f *Forwarder) Close() error {
	f.s.stop()
	return nil
}

func forward(netnsName string, listen netip.AddrPort, target string) (*service, error) {
	var ln net.Listener
	err := Do(netnsName, func() error {
		var err error
		ln, err = net.Listen("tcp", listen.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("forwarding %s in %s to %s: %w", listen, netnsName, target, err)
	}
	s := newService()
	s.closers = append(s.closers, ln)
	s.wg.Add(1)
	go s.acceptLoop(ln, func(in net.Conn) {
		d := net.Dialer{Timeout: 10 * time.Second}
		out, err := d.DialContext(s.ctx, "tcp", target)
		if err != nil {
			return
		}
		if !s.track(out) {
			return
		}
		defer s.untrack(out)
		done := make(chan struct{}, 2)
		pipe := func(dst, src net.Conn) {
			io.Copy(dst, src)
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			done <- struct{}{}
		}
		go pipe(out, in)
		go pipe(in, out)
		<-done
		<-done
	})
	return s, nil
}

// Probe connects from the namespace to to:port: TCP connects and reads the server's reply, UDP
// sends a token and awaits its echo. It reports false when the traffic is blocked (timeout,
// refused, unreachable, dropped locally) and an error only when the probe itself cannot be made
// (no such namespace, no socket; SCTP: ErrNoSCTP). The destination must be a Serve server: a
// TCP probe counts only when the server's reply arrives.
func Probe(ctx context.Context, fromNetNS string, to netip.Addr, proto Protocol, port uint16, timeout time.Duration) (bool, error) {
	dst := netip.AddrPortFrom(to, port).String()
	switch proto {
	case TCP, UDP:
	case SCTP:
		return false, fmt.Errorf("probing %s %s/%s: %w", fromNetNS, dst, proto, ErrNoSCTP)
	default:
		return false, fmt.Errorf("probing %s %s: unknown protocol %q", fromNetNS, dst, proto)
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	var ok bool
	err := Do(fromNetNS, func() error {
		var err error
		if proto == TCP {
			ok, err = probeTCP(ctx, dst)
		} else {
			ok, err = probeUDP(ctx, dst)
		}
		return err
	})
	if err == nil && parent.Err() != nil {
		err = parent.Err() // not a verdict: the caller gave up
	}
	if err != nil {
		return false, fmt.Errorf("probing %s %s/%s: %w", fromNetNS, dst, proto, err)
	}
	return ok, nil
}

// harnessErr tells a failure of the probe itself (creating the socket) from blocked traffic.
func harnessErr(err error) error {
	var se *os.SyscallError
	if errors.As(err, &se) && se.Syscall == "socket" {
		return err
	}
	return nil
}

func probeTCP(ctx context.Context, dst string) (bool, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return false, harnessErr(err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	buf := make([]byte, len(reply))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return false, nil
	}
	return bytes.Equal(buf, reply), nil
}

func probeUDP(ctx context.Context, dst string) (bool, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", dst)
	if err != nil {
		return false, harnessErr(err)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	token := make([]byte, 16)
	rand.Read(token)
	buf := make([]byte, 64)
	// Resend every 100 ms until the deadline: a first datagram may be lost while a neighbour
	// entry is resolved, and a refusal or a local drop may be transient.
	for ctx.Err() == nil {
		_, err := conn.Write(token)
		if err == nil {
			conn.SetReadDeadline(minTime(time.Now().Add(100*time.Millisecond), ctx))
			var n int
			n, err = conn.Read(buf)
			if err == nil && bytes.Equal(buf[:n], token) {
				return true, nil
			}
		}
		if err != nil && !isTimeout(err) {
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return false, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func minTime(t time.Time, ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok && dl.Before(t) {
		return dl
	}
	return t
}

// ProbeSpec is one probe: from a pod (or a namespace) to a pod.
type ProbeSpec struct {
	From      *Pod
	FromNetNS string // used when From is nil (a node or the external host)
	To        *Pod
	Proto     Protocol
	Port      uint16
	IPv6      bool
}

// Run performs the probe.
func (s ProbeSpec) Run(ctx context.Context, timeout time.Duration) (bool, error) {
	from := s.FromNetNS
	if s.From != nil {
		from = s.From.NetNS
	}
	if s.To == nil {
		return false, errors.New("probe without a destination pod")
	}
	to := s.To.IP(s.IPv6)
	if !to.IsValid() {
		return false, fmt.Errorf("pod %s has no address of this family (IPv6=%v)", s.To.Key(), s.IPv6)
	}
	return Probe(ctx, from, to, s.Proto, s.Port, timeout)
}

// ProbeMatrix probes every ordered pair of pods (self included) at most 32 at a time, keyed by
// {from.Key(), to.Key()}.
func (c *Cluster) ProbeMatrix(ctx context.Context, pods []*Pod, proto Protocol, port uint16, is6 bool, timeout time.Duration) (map[[2]string]bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		out      = make(map[[2]string]bool, len(pods)*len(pods))
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, 32)
	)
	for _, from := range pods {
		for _, to := range pods {
			spec := ProbeSpec{From: from, To: to, Proto: proto, Port: port, IPv6: is6}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ok, err := spec.Run(ctx, timeout)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					return
				}
				out[[2]string{spec.From.Key(), spec.To.Key()}] = ok
			}()
		}
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	if firstErr != nil {
		return nil, fmt.Errorf("probe matrix %s/%d IPv6=%v: %w", proto, port, is6, firstErr)
	}
	return out, nil
}

// SendUDP sends n datagrams to dst from the calling thread's network namespace (run it inside
// Do), without waiting for an answer.
func SendUDP(dst netip.AddrPort, n int) error {
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return fmt.Errorf("send UDP to %s: %w", dst, err)
	}
	defer conn.Close()
	for range n {
		if _, err := conn.Write([]byte("flood")); err != nil {
			return fmt.Errorf("send UDP to %s: %w", dst, err)
		}
	}
	return nil
}

// ExchangeUDP sends req to dst from network namespace netnsName and returns the first datagram
// that answers it, waiting at most timeout.
func ExchangeUDP(netnsName string, dst netip.AddrPort, req []byte, timeout time.Duration) ([]byte, error) {
	var resp []byte
	err := Do(netnsName, func() error {
		conn, err := net.Dial("udp", dst.String())
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		if _, err := conn.Write(req); err != nil {
			return err
		}
		buf := make([]byte, 1<<16)
		n, err := conn.Read(buf)
		resp = buf[:n]
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("UDP exchange with %s from %s: %w", dst, netnsName, err)
	}
	return resp, nil
}
