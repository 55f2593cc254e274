package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/testenv/netns"
)

// TestExplainNodeSets: `explain --node-sets NODE` on the node reads the addresses of a
// domainNames pattern from the kernel's sets (a test namespace whose table holds them with a
// timeout) and prints each with the time it has left, the flow's destination marked.
func TestExplainNodeSets(t *testing.T) {
	ns := netns.NewBare(t, "explainsets", netns.LoopbackDown)
	const table, pattern = "nftpolicy", "*.github.com"
	s4, s6 := fqdn.SetName(pattern, false), fqdn.SetName(pattern, true)
	netns.Nft(t, ns.Name, fmt.Sprintf("add table inet %[1]s\n"+
		"add set inet %[1]s %[2]s { type ipv4_addr; flags timeout; }\n"+
		"add set inet %[1]s %[3]s { type ipv6_addr; flags timeout; }\n"+
		"add element inet %[1]s %[2]s { 140.82.121.6 timeout 1m, 140.82.121.3 timeout 10m }\n"+
		"add element inet %[1]s %[3]s { 2606:50c0:8000::154 timeout 30s }\n", table, s4, s6), "-f", "-")
	var stdout, stderr bytes.Buffer
	args := []string{"explain", "-f", "../../internal/explain/testdata/domains", "--from", "build/a", "--to", "140.82.121.6",
		"--port", "443/tcp", "--node-sets", "node-a", "--table", table}
	var code int
	if err := netns.DoFD(ns.FD, func() error {
		code = run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	want := regexp.MustCompile(`(?m)^    \*\.github\.com \(ClusterNetworkPolicy/build-egress egress rule 1\): sets ` + s4 + `, ` + s6 + `
      140\.82\.121\.3 expires in (9m59s|10m0s)
      140\.82\.121\.6 expires in (59s|1m0s) ← this flow's destination
      2606:50c0:8000::154 expires in (29s|30s)
  nftables on node node-a:$`)
	if !want.MatchString(stdout.String()) {
		t.Errorf("explain --node-sets printed\n%s\nwant the kernel's addresses of %s with the time each has left", stdout.String(), pattern)
	}
}
