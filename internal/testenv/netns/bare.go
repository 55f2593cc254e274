package netns

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// Bare is a network namespace of one test with no link but its loopback: for tests of one
// package's kernel objects (a table, link events) and for topologies a test lays out itself.
type Bare struct {
	Name string // as `ip netns` names it: testenv.UniqueName of the tag
	FD   int    // an open handle of it (kernel.Open, DoFD)
}

// Loopback says whether NewBare brings the namespace's loopback up.
type Loopback bool

const (
	LoopbackUp   Loopback = true
	LoopbackDown Loopback = false // as the kernel makes it
)

// NewBare creates a network namespace named testenv.UniqueName(tag), its loopback up or down as
// lo says, and removes it when tb ends (tb.Cleanup; a namespace that stays fails tb). It fails tb
// unless run as root with `ip` on PATH.
func NewBare(tb testing.TB, tag string, lo Loopback) Bare {
	tb.Helper()
	testenv.RequireRoot(tb)
	testenv.RequireCommand(tb, "ip")
	b := Bare{Name: testenv.UniqueName(tag)}
	ctx := context.Background()
	if err := ipBatch(ctx, "", false, "netns add "+b.Name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := deleteNamespaces(ctx, []string{b.Name}); err != nil {
			tb.Errorf("removing the test's network namespace: %v", err)
		}
	})
	fd, err := unix.Open(nsPath(b.Name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		tb.Fatalf("opening network namespace %s: %v", b.Name, err)
	}
	tb.Cleanup(func() { unix.Close(fd) })
	b.FD = fd
	if lo == LoopbackUp {
		if err := ipBatch(ctx, b.Name, false, "link set lo up"); err != nil {
			tb.Fatal(err)
		}
	}
	return b
}

// Nft runs `nft args...` inside the named network namespace, with stdin as its input when not
// empty, and returns its combined output; it fails tb when nft fails or runs for 5 minutes,
// with the output and the start of stdin. Tests read and load tables this way; the product
// never runs nft.
func Nft(tb testing.TB, netnsName, stdin string, args ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", netnsName, "nft"}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		head := stdin
		if len(head) > 2000 {
			head = head[:2000] + "…"
		}
		if head != "" {
			head = "\ninput:\n" + head
		}
		tb.Fatalf("nft %s in %s: %v\n%s%s", strings.Join(args, " "), netnsName, err, out, head)
	}
	return string(out)
}
