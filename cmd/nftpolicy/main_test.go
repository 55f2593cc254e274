package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsageErrors: every configuration mistake gives exit code 2 and one clear line on stderr.
func TestUsageErrors(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	withNode := env(map[string]string{"NODE_NAME": "node-a"})
	tests := []struct {
		name   string
		args   []string
		getenv func(string) string
		want   string // in the one stderr line
	}{
		{"missing NODE_NAME", []string{"run"}, env(nil), "node name is required"},
		{"missing NODE_NAME, default command", nil, env(nil), "node name is required"},
		{"unknown flag", []string{"run", "--no-such-flag"}, withNode, "no-such-flag"},
		{"bad duration", []string{"run", "--resync-interval", "soon"}, withNode, "resync-interval"},
		{"negative resync", []string{"run", "--resync-interval", "-1s"}, withNode, "must be positive"},
		{"negative watch staleness", []string{"run", "--watch-stale-after", "-1s"}, withNode, "--watch-stale-after"},
		{"zero CRD recheck", []string{"run", "--crd-recheck-interval", "0s"}, withNode, "--crd-recheck-interval"},
		{"bad log level", []string{"run", "--log-level", "loud"}, withNode, "--log-level"},
		{"bad log format", []string{"run", "--log-format", "xml"}, withNode, "--log-format"},
		{"stray argument", []string{"run", "extra"}, withNode, "unexpected arguments"},
		{"unknown command", []string{"frobnicate"}, withNode, "unknown command"},
		{"render without dir", []string{"render", "--node", "a"}, withNode, "-f DIR"},
		{"bad deny log rate", []string{"run", "--log-denied", "--log-denied-rate", "10/fortnight"}, withNode, "--log-denied-rate"},
		{"zero deny log burst", []string{"run", "--log-denied", "--log-denied-burst", "0"}, withNode, "--log-denied-burst"},
		{"explain without a flow", []string{"explain", "-f", "dir"}, withNode, "explain needs --from"},
		{"explain, bad port", []string{"explain", "-f", "dir", "--from", "x/a", "--to", "x/b", "--port", "http"}, withNode, "port of 1-65535"},
		{"explain, bad protocol", []string{"explain", "-f", "dir", "--from", "x/a", "--to", "x/b", "--port", "80/gre"}, withNode, "unknown protocol"},
		{"explain, bad output", []string{"explain", "-f", "dir", "--from", "x/a", "--to", "x/b", "--port", "80", "-o", "yaml"}, withNode, "want text or json"},
		{"explain, no such pod", []string{"explain", "-f", explainCluster, "--from", "x/zz", "--to", "x/b", "--port", "80"}, withNode, "pod x/zz is no endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, tt.getenv, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit code %d, want 2 (stderr %q)", code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "nftpolicy: ") || !strings.Contains(last, tt.want) {
				t.Errorf("stderr %q: want a line 'nftpolicy: …%s…'", stderr.String(), tt.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"version"}, func(string) string { return "" }, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !strings.HasPrefix(stdout.String(), "nftpolicy ") {
		t.Errorf("version printed %q", stdout.String())
	}
}

// explainCluster is internal/explain's cluster of manifests.
const explainCluster = "../../internal/explain/testdata/cluster"

// TestExplainCommand: `nftpolicy explain` on manifests prints a flow's verdict and what decided
// each side, as JSON and as text.
func TestExplainCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in the output
	}{
		{[]string{"--from", "y/a", "--to", "x/a", "--port", "80/tcp", "-o", "json"},
			[]string{`"allowed": true`, `"policy": "NetworkPolicy/x/allow-from-y"`, `"kind": "no policy"`}},
		{[]string{"--from", "y/b", "--to", "x/a", "--port", "80", "-6"},
			[]string{"y/b (fd00:10:244:1::11) → x/a (fd00:10:244::10) tcp/80: DENIED",
				"egress of y/b, on node node-b: deny", "decided by the default of tier default (deny)",
				"chain forward_egress, rule 3: ip6 saddr vmap @egress_v6"}},
		{[]string{"--from", "x/a", "--to", "10.9.9.9", "--port", "icmp"},
			[]string{"x/a (10.244.0.10) → 10.9.9.9 icmp: ALLOWED", "ingress: allow — no pod of the cluster holds 10.9.9.9"}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"explain", "-f", explainCluster}, tc.args...)
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit code %d: %s", args, code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", args, w, stdout.String())
			}
		}
	}
}

// TestOperatingDocExplain: every `nftpolicy explain -f …` example in docs/operating.md shows the
// output the command prints today, byte for byte.
func TestOperatingDocExplain(t *testing.T) {
	const root = "../.."
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operating.md"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, block := range strings.Split(string(doc), "```text\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		cmdline, want, _ := strings.Cut(block, "\n")
		args, ok := strings.CutPrefix(cmdline, "$ nftpolicy explain ")
		if !ok {
			continue
		}
		argv := append([]string{"explain"}, strings.Fields(args)...)
		for i := range argv {
			if i > 0 && argv[i-1] == "-f" {
				argv[i] = filepath.Join(root, argv[i])
			}
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), argv, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit code %d: %s", cmdline, code, stderr.String())
		}
		if stdout.String() != want {
			t.Errorf("%s: docs/operating.md shows\n%s\nthe command prints\n%s", cmdline, want, stdout.String())
		}
		n++
	}
	if n < 2 {
		t.Fatalf("docs/operating.md has %d explain examples, want a denied and an allowed flow", n)
	}
}
