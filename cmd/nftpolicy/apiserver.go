package main

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// apiServers are the addresses and port of the API server at host (a rest.Config's Host: a
// URL, or host:port), its name resolved once: host endpoints keep the agent's path to them
// open. A host that does not resolve is logged and kept open through the failsafe ports alone.
func apiServers(ctx context.Context, host string, log *slog.Logger) []netip.AddrPort {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		log.Warn("the API server's address does not parse; only the failsafe ports keep it open", "host", host, "err", err)
		return nil
	}
	port := uint16(443)
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			log.Warn("the API server's port does not parse; only the failsafe ports keep it open", "host", host, "err", err)
			return nil
		}
		port = uint16(n)
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", u.Hostname())
	if err != nil {
		log.Warn("the API server's name does not resolve; only the failsafe ports keep it open", "host", host, "err", err)
		return nil
	}
	var out []netip.AddrPort
	for _, a := range addrs {
		out = append(out, netip.AddrPortFrom(a.Unmap(), port))
	}
	return out
}
