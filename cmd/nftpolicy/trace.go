package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nftpolicy/nftpolicy/internal/trace"
)

// traceFlow traces real packets of one flow through this node's nftables ruleset with the
// kernel's tracing (internal/trace), in a table of its own that it removes when it ends: after
// --packets packets, at --timeout, or at SIGINT or SIGTERM.
func traceFlow(ctx context.Context, args []string, e env) error {
	fs := flag.NewFlagSet("nftpolicy trace", flag.ContinueOnError)
	from := fs.String("from", "", "source address (a pod's IP), or node/NODE: this node's own traffic out; empty: any")
	to := fs.String("to", "", "destination address, or node/NODE[:PORT]: traffic to this node itself; empty: any")
	port := fs.String("port", "", "PORT/PROTOCOL (80/tcp, 53/udp) or a protocol without port (icmp); with --to node/NODE:PORT, the protocol alone or nothing (tcp); empty: any")
	packets := fs.Int("packets", 10, "packets to trace")
	timeout := fs.Duration("timeout", time.Minute, "how long to trace at most")
	output := fs.String("o", "text", "output: text, or json (one object per packet)")
	cleanup := fs.Bool("cleanup", false, "only remove the table of a trace that was killed ("+trace.Table+")")
	if err := parseFlags(fs, args, e.stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *cleanup {
		return trace.Remove(-1)
	}
	var f trace.Flow
	dst, err := nodePort(*to, port)
	if err != nil {
		return err
	}
	for _, a := range []struct {
		flag, value string
		to          *netip.Addr
		node        *bool
	}{{"--from", *from, &f.Src, &f.FromNode}, {"--to", dst, &f.Dst, &f.ToNode}} {
		if name, ok := strings.CutPrefix(a.value, "node/"); ok && name != "" {
			// the node the trace runs on, as NODE_NAME names it where it is set
			if here := e.getenv("NODE_NAME"); here != "" && here != name {
				return usageErrorf("%s %s: this is node %s (NODE_NAME); trace runs on the node it traces", a.flag, a.value, here)
			}
			*a.node = true
			continue
		}
		if a.value == "" {
			continue
		}
		addr, err := netip.ParseAddr(a.value)
		if err != nil {
			return usageErrorf("%s %q: want an IP address", a.flag, a.value)
		}
		*a.to = addr.Unmap()
	}
	if *port != "" {
		proto, n, err := parsePort(*port)
		if err != nil {
			return err
		}
		f.Proto, f.Dport = uint8(proto), n
	}
	if *packets < 1 || *timeout <= 0 || (*output != "text" && *output != "json") {
		return usageErrorf("trace needs --packets ≥ 1, a positive --timeout and -o text or json")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(e.stderr, "tracing %s: %d packets, at most %v\n", f, *packets, *timeout)
	enc := json.NewEncoder(e.stdout)
	n, err := trace.Run(ctx, trace.Config{NetNSFD: -1, Flow: f, MaxPackets: *packets, Timeout: *timeout}, func(p trace.Packet) {
		if *output == "json" {
			_ = enc.Encode(p)
			return
		}
		fmt.Fprintln(e.stdout, p)
	})
	fmt.Fprintf(e.stderr, "%d packets traced; table %s removed\n", n, trace.Table)
	return err
}
