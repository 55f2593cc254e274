package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeCommand: `nftpolicy probe` exits 0 with the answer when the socket's server answers
// 200, and 1 with its status and reason otherwise or when nobody listens.
func TestProbeCommand(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "health.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			http.Error(w, "not ready: no full apply yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	tests := []struct {
		name   string
		socket string
		what   string
		code   int
		want   string // in stdout (code 0) or stderr
	}{
		{"live", sock, "healthz", 0, "ok"},
		{"not ready", sock, "readyz", 1, "readyz: 503 Service Unavailable: not ready: no full apply yet"},
		{"nobody listens", filepath.Join(t.TempDir(), "none.sock"), "healthz", 1, "probing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"probe", "--socket", tt.socket, tt.what}, func(string) string { return "" }, &stdout, &stderr)
			out := stdout.String()
			if code != 0 {
				out = stderr.String()
			}
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Fatalf("exit %d, output %q; want %d and %q", code, out, tt.code, tt.want)
			}
		})
	}
}
