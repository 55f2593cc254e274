package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// probe asks the agent behind a health socket (the agent's --health-socket) for /healthz or
// /readyz: the kubelet's exec probe. The socket is the agent's own, unlike its health address,
// which a standing-by agent shares during a rolling update. A 200 answer ends with nil; any other,
// or no answer within the timeout, with an error carrying the agent's reason.
func probe(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy probe", flag.ContinueOnError)
	socket := fs.String("socket", "", "the agent's health socket (its --health-socket)")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	if *socket == "" {
		return usageErrorf("--socket is required")
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "healthz" && fs.Arg(0) != "readyz") {
		return usageErrorf("probe takes healthz or readyz, got %q", strings.Join(fs.Args(), " "))
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", *socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/"+fs.Arg(0), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("probing %s: %w", *socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("reading the answer of %s: %w", *socket, err)
	}
	answer := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", fs.Arg(0), resp.Status, answer)
	}
	fmt.Fprintln(e.stdout, answer)
	return nil
}
