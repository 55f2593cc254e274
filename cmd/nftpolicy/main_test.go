package main

import (
	"bytes"
	"context"
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
