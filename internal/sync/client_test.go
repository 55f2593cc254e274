package sync_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/sync"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestAPIDialerClosesDeadConnections connects with sync.APIDialer inside a node namespace, then
// drops every packet of the connection there (a peer gone without a word: its node down or cut
// off), and checks that the connection fails within 15 s — by its keepalive probes when it is
// idle (an open watch with no events), by its user timeout when data waits for an
// acknowledgement — a generous bound on the 11 s configured; the figure is logged. With
// client-go's own dialer (keepalive probes after 30 s) the connection outlives the bound, so the
// test tells them apart.
func TestAPIDialerClosesDeadConnections(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "nft")
	const bound = 15 * time.Second
	tests := []struct {
		name     string
		dialer   *net.Dialer
		write    bool // send data after the peer went silent
		wantDead bool
	}{
		{"idle connection", sync.APIDialer(), false, true},
		{"data waiting for an acknowledgement", sync.APIDialer(), true, true},
		{"idle, client-go's dialer", &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}, false, false},
	}
	c := netns.NewForTest(t, netns.Config{Nodes: []string{"a"}})
	ns := c.Node("a").NetNS
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l net.Listener
			if err := netns.Do(ns, func() (err error) { l, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			accepted := make(chan net.Conn, 1)
			go func() {
				if a, err := l.Accept(); err == nil {
					accepted <- a
				}
			}()
			var conn net.Conn
			if err := netns.Do(ns, func() (err error) {
				conn, err = tt.dialer.DialContext(context.Background(), "tcp", l.Addr().String())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			peer := <-accepted
			defer peer.Close()

			port := l.Addr().(*net.TCPAddr).Port
			table := fmt.Sprintf("nftp_silent%d", i)
			rules := fmt.Sprintf("add table inet %[1]s\nadd chain inet %[1]s out { type filter hook output priority 0; }\n"+
				"add rule inet %[1]s out tcp dport %[2]d drop\nadd rule inet %[1]s out tcp sport %[2]d drop\n", table, port)
			if out, err := netns.Exec(context.Background(), ns, "sh", "-c", "printf '"+rules+"' | nft -f -"); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			defer netns.Exec(context.Background(), ns, "nft", "delete", "table", "inet", table)

			start := time.Now()
			if tt.write {
				if _, err := conn.Write([]byte("GET / HTTP/1.1\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
			}
			_ = conn.SetReadDeadline(start.Add(bound))
			_, err := conn.Read(make([]byte, 1))
			took := time.Since(start)
			t.Logf("read returned after %.1f s: %v", took.Seconds(), err)
			if dead := err != nil && !errors.Is(err, os.ErrDeadlineExceeded); dead != tt.wantDead {
				t.Errorf("connection closed by the kernel within %v = %v, want %v (err %v)", bound, dead, tt.wantDead, err)
			}
		})
	}
}
