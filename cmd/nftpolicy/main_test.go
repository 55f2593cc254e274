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
		{"run's flag, default command", []string{"--resync-interval", "soon"}, withNode, "resync-interval"},
		{"help for an unknown command", []string{"help", "frobnicate"}, withNode, `unknown command "frobnicate"`},
		{"help for two commands", []string{"help", "run", "render"}, withNode, "help takes one command"},
		{"probe without a socket", []string{"probe", "readyz"}, withNode, "--socket is required"},
		{"probe, unknown endpoint", []string{"probe", "--socket", "s", "metrics"}, withNode, "healthz or readyz"},
		{"version with an argument", []string{"version", "extra"}, withNode, "unexpected arguments"},
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
			[]string{"x/a (10.244.0.10) → 10.9.9.9 icmp type 8 code 0: ALLOWED", "ingress: allow — no pod of the cluster holds 10.9.9.9"}},
		{[]string{"--from", "y/a", "--to", "x/a", "--port", "icmp", "--icmp-type", "13", "--icmp-code", "0"},
			[]string{"y/a (10.244.0.11) → x/a (10.244.0.10) icmp type 13 code 0: DENIED"}},
		{[]string{"--from", "y/a", "--to", "x/a", "--port", "80/tcp", "--sport", "4000"},
			[]string{"y/a (10.244.0.11) → x/a (10.244.0.10) tcp 4000→80: ALLOWED"}},
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

// TestExplainNodeCommand: `nftpolicy explain` takes a node as either end, --to node/NODE:PORT
// as the port too, and --interface.
func TestExplainNodeCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string // in the output
	}{
		{[]string{"--from", "172.31.0.200", "--to", "node/node-a:8080"},
			[]string{"172.31.0.200 → node node-a (172.31.0.1, interface eth0) tcp/8080: ALLOWED",
				"ingress of host endpoint node-a-eth0 (interface eth0), on node node-a: allow",
				`in host_in_if_v4 (node address → its host endpoint's decision chain): "eth0" . 172.31.0.1 comment "host endpoint node-a-eth0 (eth0)"`}},
		{[]string{"--from", "172.31.0.200", "--to", "node/node-a:53", "--port", "udp"},
			[]string{"172.31.0.200 → node node-a (172.31.0.1, interface eth0) udp/53: DENIED"}},
		{[]string{"--from", "node/node-a", "--to", "10.9.9.9", "--port", "443", "-o", "json"},
			[]string{`"allowed": false`, `"host_endpoint": "node-a-eth0"`, `"tier": "host-endpoint-default"`}},
		{[]string{"--from", "172.31.0.200", "--to", "node/node-a", "--port", "8080", "--interface", "eth1"},
			[]string{"no host endpoint of node node-a covers its interface: not policed"}},
		{[]string{"--from", "172.31.0.200", "--to", "node/node-a:22", "--failsafe-inbound-host-ports", "none"},
			[]string{"172.31.0.200 → node node-a (172.31.0.1, interface eth0) tcp/22: DENIED"}},
		{[]string{"--from", "172.31.0.200", "--to", "node/node-a:2222", "--failsafe-inbound-host-ports", "tcp:2222"},
			[]string{"tcp/2222: ALLOWED", "reason: failsafe port: never blocked by a host endpoint's policy"}},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"explain", "-f", "../../internal/explain/testdata/hosts"}, tc.args...)
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit code %d: %s", args, code, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", args, w, stdout.String())
			}
		}
	}
	var stdout, stderr bytes.Buffer
	args := []string{"explain", "-f", "../../internal/explain/testdata/hosts", "--from", "x/a", "--to", "node/node-a:80", "--port", "80/tcp"}
	if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "give the port once") {
		t.Errorf("%v: exit code %d, stderr %q; want a usage error", args, code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	args = []string{"explain", "-f", "../../internal/explain/testdata/hosts", "--from", "x/a", "--to", "node/node-a:80", "--failsafe-outbound-host-ports", "tcp:99999"}
	if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "--failsafe-outbound-host-ports") {
		t.Errorf("%v: exit code %d, stderr %q; want a usage error", args, code, stderr.String())
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

// commandNames are the commands the help lists, in its order.
var commandNames = []string{"run", "render", "explain", "trace", "cleanup", "probe", "version", "help"}

// TestHelpListsCommands: --help, -h and help list every command with one line each and say how
// to get a command's flags, on stdout with exit code 0.
func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"-help"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit code %d, want 0 (stderr %q)", args, code, stderr.String())
		}
		if stderr.Len() != 0 {
			t.Errorf("%v: stderr %q, want nothing", args, stderr.String())
		}
		checkCommandList(t, strings.Join(args, " "), stdout.String())
	}
}

// checkCommandList asserts that out lists each command on a line of its own, in order, with a
// summary, and names both ways to get a command's flags.
func checkCommandList(t *testing.T, what, out string) {
	t.Helper()
	var listed []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") {
			listed = append(listed, f[0])
		}
	}
	if strings.Join(listed, " ") != strings.Join(commandNames, " ") {
		t.Errorf("%s lists the commands %v, want %v:\n%s", what, listed, commandNames, out)
	}
	for _, want := range []string{"usage: nftpolicy [COMMAND] [flags]", "nftpolicy help COMMAND", "nftpolicy COMMAND --help",
		"nftpolicy --node-name=NODE is\nnftpolicy run --node-name=NODE"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: output lacks %q:\n%s", what, want, out)
		}
	}
}

// TestHelpCommand: help COMMAND prints that command's synopsis, what it does and its flags, the
// same text as COMMAND --help, on stdout with exit code 0.
func TestHelpCommand(t *testing.T) {
	for _, tc := range []struct {
		command string
		want    []string // in the output, after the synopsis
	}{
		{"run", []string{"Run the agent", "flags:", "-node-name string", "-resync-interval duration", "(default 1m30s)", "-log-denied"}},
		{"render", []string{"Print, offline,", "flags:", "-f string", "-node string", `-table string`}},
		{"explain", []string{"Explain one flow", "-from string", "-to string", "-port string", "-6"}},
		{"trace", []string{"Trace real packets", "-packets int", "-timeout duration", "-cleanup"}},
		{"cleanup", []string{"Remove the agent's table", "-table string"}},
		{"version", []string{"Print the version."}},
		{"help", []string{"List the commands"}},
	} {
		c, ok := lookup(tc.command)
		if !ok {
			t.Fatalf("no command %q", tc.command)
		}
		var outputs []string
		for _, args := range [][]string{{"help", tc.command}, {tc.command, "--help"}, {tc.command, "-h"}} {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 0 {
				t.Fatalf("%v: exit code %d, want 0 (stderr %q)", args, code, stderr.String())
			}
			out := stdout.String()
			if !strings.HasPrefix(out, "usage: "+c.synopsis+"\n") {
				t.Errorf("%v: output does not begin with %q:\n%s", args, "usage: "+c.synopsis, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%v: output lacks %q:\n%s", args, w, out)
				}
			}
			if tc.command == "version" || tc.command == "help" {
				if strings.Contains(out, "flags:") {
					t.Errorf("%v: a command without flags lists flags:\n%s", args, out)
				}
			}
			outputs = append(outputs, out)
		}
		if outputs[0] != outputs[1] || outputs[1] != outputs[2] {
			t.Errorf("help %s, %s --help and %s -h differ:\n%s\n---\n%s\n---\n%s", tc.command, tc.command, tc.command,
				outputs[0], outputs[1], outputs[2])
		}
	}
	if len(commands()) != len(commandNames) {
		t.Errorf("%d commands, the test covers %d", len(commands()), len(commandNames))
	}
}

// TestUnknownCommandListsCommands: an unknown command prints the command list, then one line
// naming it, on stderr, and exits with code 2.
func TestUnknownCommandListsCommands(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"help", "frobnicate"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr); code != 2 {
			t.Fatalf("%v: exit code %d, want 2", args, code)
		}
		if stdout.Len() != 0 {
			t.Errorf("%v: stdout %q, want nothing", args, stdout.String())
		}
		out := stderr.String()
		checkCommandList(t, strings.Join(args, " "), out)
		if !strings.HasSuffix(out, "nftpolicy: usage: unknown command \"frobnicate\"\n") {
			t.Errorf("%v: stderr does not end with the unknown command:\n%s", args, out)
		}
	}
}
