package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestRenderLayers renders testdata/layers — ClusterNetworkPolicies of both tiers and
// NetworkPolicies over two namespaces — for node a with `nftpolicy render -f DIR` and compares
// the text with testdata/layers.node-a.nft (docs/operating.md quotes it). The comments name
// each ClusterNetworkPolicy with its tier, priority and rule, and each group chain lists its
// policies by layer. The kernel accepts the text: loaded with `nft -f` into a network namespace
// of the test's own, it lists the same table.
func TestRenderLayers(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"render", "-f", filepath.Join("testdata", "layers"), "--node", "a"},
		func(string) string { return "" }, &out, &errb); code != 0 {
		t.Fatalf("render: exit %d: %s", code, errb.String())
	}
	if errb.Len() > 0 {
		t.Errorf("render reported problems:\n%s", errb.String())
	}
	rendered := out.String()
	golden := filepath.Join("testdata", "layers.node-a.nft")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading the golden file (run with -update to create it): %v", err)
	}
	if string(want) != rendered {
		t.Errorf("%s differs (run with -update to accept):\n--- want\n%s\n--- got\n%s", golden, want, rendered)
	}
	for _, s := range []string{
		// x/a's group chain's last rule: the layers in order
		`comment "ingress: [admin] ClusterNetworkPolicy/admin-guard [default] NetworkPolicy/x/allow-from-y NetworkPolicy/x/default-deny-ingress"`,
		// y/a's: Baseline alone, no NetworkPolicy selects it
		`comment "ingress: [baseline] ClusterNetworkPolicy/baseline-isolate-y | `,
		// y/b is denied into x by the Admin rule, named with its tier, priority, index and name
		`10.244.2.3 comment "ClusterNetworkPolicy/admin-guard admin priority 10 ingress rule 0 (deny-y-b) (deny)"`,
		// y/a, passed on by the Admin tier, is allowed TCP 80 by x's NetworkPolicy
		`10.244.1.3 . tcp . 80 comment "NetworkPolicy/x/allow-from-y ingress rule 0 (allow)"`,
		`counter drop comment "ClusterNetworkPolicy/baseline-isolate-y baseline priority 100 ingress rule 0 (deny-all) (deny)"`,
	} {
		if !strings.Contains(rendered, s) {
			t.Errorf("the rendered table lacks %s", s)
		}
	}

	t.Run("kernel", func(t *testing.T) {
		testenv.RequireRoot(t)
		testenv.RequireCommand(t, "ip", "nft")
		ns := testenv.UniqueName("render")
		if b, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v: %s", ns, err, b)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		file := filepath.Join(t.TempDir(), "layers.nft")
		if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("ip", "netns", "exec", ns, "nft", "-f", file).CombinedOutput(); err != nil {
			t.Fatalf("nft -f of the rendered table: %v\n%s", err, b)
		}
		listed, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "inet", "nftpolicy").CombinedOutput()
		if err != nil {
			t.Fatalf("nft list table: %v\n%s", err, listed)
		}
		if got, want := testenv.NormalizeListing(string(listed)), testenv.NormalizeListing(rendered); got != want {
			t.Errorf("the kernel lists the table differently:\n--- rendered\n%s\n--- listed\n%s", rendered, listed)
		}
	})
}
