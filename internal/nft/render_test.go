package nft_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestRenderGolden builds each scenario's table for node "a", without a kernel, and compares its
// `nft -f` text with testdata/render. internal/nft/kernel's TestGolden commits the same tables
// and checks that this text, loaded with `nft -f`, lists as the kernel lists them
// (testdata/golden).
func TestRenderGolden(t *testing.T) {
	for _, sc := range nfttest.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			b := nft.NewBuilder(nft.Config{})
			if b.Apply(nfttest.MessagesFor("a", nfttest.FixedAddrs(), sc)) == nil {
				t.Fatal("no changes after the in-sync apply")
			}
			checkRender(t, filepath.Join("testdata", "render", sc.Name+".nft"), []byte(b.Render()))
		})
	}
}

// checkRender compares a rendered table with its golden file (rewrites it with -update).
func checkRender(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// TestRenderLogGolden: the scenarios with Log rules, built with a deny log (so Log rules log),
// compared with testdata/render/log.
func TestRenderLogGolden(t *testing.T) {
	for _, sc := range nfttest.Scenarios {
		if sc.Name != "log-then-allow-tcp-80" {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			b := nft.NewBuilder(nft.Config{DenyLog: &nft.DenyLog{Group: 9, Limit: nft.DefaultDenyLogLimit}})
			if b.Apply(nfttest.MessagesFor("a", nfttest.FixedAddrs(), sc)) == nil {
				t.Fatal("no changes after the in-sync apply")
			}
			checkRender(t, filepath.Join("testdata", "render", "log", sc.Name+".nft"), []byte(b.Render()))
		})
	}
}
