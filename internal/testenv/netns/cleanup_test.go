package netns

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

const childEnv = "NFTP_NETNS_CLEANUP_CHILD"

// TestCleanupOnFailure runs a child test process that builds a cluster with a pod and then fails
// or panics, and checks that none of its namespaces is left.
func TestCleanupOnFailure(t *testing.T) {
	if mode := os.Getenv(childEnv); mode != "" {
		c := NewForTest(t, Config{Nodes: []string{"a"}, External: true})
		p, err := c.AddPod("a", "x", "doomed")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Serve(p.NetNS, TCP, 80); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("NAMES " + strings.Join([]string{c.underlay, c.Node("a").NetNS, c.External().NetNS, p.NetNS}, " ") + "\n")
		if mode == "panic" {
			panic("the test panics with the cluster up")
		}
		t.Fatal("the test fails with the cluster up")
	}
	t.Parallel()
	testenv.RequireRoot(t)
	for _, mode := range []string{"fatal", "panic"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCleanupOnFailure$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+mode)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the child test passed:\n%s", out)
			}
			var names []string
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if f, ok := strings.CutPrefix(sc.Text(), "NAMES "); ok {
					names = strings.Fields(f)
				}
			}
			if len(names) != 4 {
				t.Fatalf("the child printed no namespace names:\n%s", out)
			}
			list := netnsList(t)
			for _, n := range names {
				if list[n] {
					t.Errorf("namespace %s left by the %s child:\n%s", n, mode, out)
				}
			}
		})
	}
}
