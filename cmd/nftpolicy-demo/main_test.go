package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
	"github.com/nftpolicy/nftpolicy/internal/testenv/agentproc"
	"github.com/nftpolicy/nftpolicy/internal/testenv/kube"
)

// TestDemo runs `make demo` and requires each printed table to be the truth of the sample
// policies applied so far — probed after both agents committed the policy — so the README's
// main job cannot show a wrong or a lagging table.
func TestDemo(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "ip", "nft")
	if err := kube.CheckBinaries(kube.Config{}); err != nil {
		t.Fatal(err)
	}
	bin, err := agentproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := demo(t.Context(), bin, "../../examples", 30*time.Second, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	// rows are sources x/a, x/b, y/a, y/b; columns the same destinations
	want := []struct{ title, table string }{
		{"no policy", ". . . . | . . . . | . . . . | . . . ."},
		// x isolated for ingress: only a pod to itself gets into x
		{"after 01-default-deny-ingress-x.yaml", ". X . . | X . . . | X X . . | X X . ."},
		// y may reach x/a on its named port 80
		{"after 02-allow-y-to-x-a.yaml", ". X . . | X . . . | . X . . | . X . ."},
		// x talks to itself again
		{"after 03-allow-within-x.yaml", ". . . . | . . . . | . X . . | . X . ."},
		// y/b may only reach its own namespace
		{"after 04-deny-egress-y-b.yaml", ". . . . | . . . . | . X . . | X X . ."},
	}
	lines := strings.Split(out.String(), "\n")
	for _, w := range want {
		got := ""
		for i, l := range lines {
			if strings.Contains(l, w.title+" — TCP 80") && i+5 < len(lines) {
				var rows []string
				for _, r := range lines[i+2 : i+6] {
					rows = append(rows, strings.Join(strings.Fields(r)[1:], " "))
				}
				got = strings.Join(rows, " | ")
				break
			}
		}
		if got != w.table {
			t.Errorf("%s: table %q, want %q\n%s", w.title, got, w.table, out.String())
		}
	}
	if !strings.Contains(out.String(), "table inet nftpolicy {") {
		t.Errorf("no ruleset printed:\n%s", out.String())
	}
}
