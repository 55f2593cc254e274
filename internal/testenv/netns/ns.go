package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runDir is where `ip netns add` bind-mounts named network namespaces.
const runDir = "/run/netns"

func nsPath(name string) string { return filepath.Join(runDir, name) }

// Do runs f in the named network namespace (DoFD). Sockets f creates belong to the namespace for
// their whole life, wherever they are used afterwards. Goroutines f starts run on other threads,
// in the root namespace.
func Do(netnsName string, f func() error) error {
	fd, err := unix.Open(nsPath(netnsName), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", netnsName, err)
	}
	defer unix.Close(fd)
	return DoFD(fd, f)
}

// DoFD runs f on a goroutine of its own, locked to its OS thread while that thread is in the
// network namespace fd refers to, and switches the thread back before unlocking it. Threads are
// not thrown away: a child process started with Pdeathsig (the API server's) dies with the thread
// that forked it, whichever goroutine later ran there. If switching back fails, the thread stays
// locked and ends with the goroutine — only then — rather than serve other goroutines in the
// wrong namespace; the caller's goroutine never runs in the namespace either way.
func DoFD(fd int, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("opening the current network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering network namespace: %w", err)
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Exec runs `ip netns exec NS argv...` and returns its combined output; the error carries the
// output too.
func Exec(ctx context.Context, netnsName string, argv ...string) ([]byte, error) {
	args := append([]string{"netns", "exec", netnsName}, argv...)
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// ipBatch runs the lines as one `ip -batch -` inside netnsName ("" = no namespace switch, used
// only for `netns add|del`, which do not change the root network namespace).
func ipBatch(ctx context.Context, netnsName string, force bool, lines ...string) error {
	var args []string
	if netnsName != "" {
		args = append(args, "-n", netnsName)
	}
	if force {
		args = append(args, "-force")
	}
	args = append(args, "-batch", "-")
	cmd := exec.CommandContext(ctx, "ip", args...)
	script := strings.Join(lines, "\n") + "\n"
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s\nscript:\n%s", strings.Join(args, " "), err, bytes.TrimSpace(out), script)
	}
	return nil
}

// sysctls writes /proc/sys values inside the namespace (the net subtree of /proc/sys belongs to
// the namespace of the thread that opens it).
func sysctls(netnsName string, kv ...[2]string) error {
	return Do(netnsName, func() error {
		for _, p := range kv {
			path := "/proc/sys/" + strings.ReplaceAll(p[0], ".", "/")
			if err := os.WriteFile(path, []byte(p[1]), 0o644); err != nil {
				return fmt.Errorf("sysctl %s=%s in %s: %w", p[0], p[1], netnsName, err)
			}
		}
		return nil
	})
}

// baseSysctls apply to every namespace before its links exist: no DAD (addresses usable at once),
// no reverse-path filter (IPv4 settings of a new namespace are inherited from the root one).
var baseSysctls = [][2]string{
	{"net.ipv6.conf.default.accept_dad", "0"},
	{"net.ipv6.conf.all.accept_dad", "0"},
	{"net.ipv4.conf.default.rp_filter", "0"},
	{"net.ipv4.conf.all.rp_filter", "0"},
}

// routerSysctls make a node forward both families.
var routerSysctls = [][2]string{
	{"net.ipv4.ip_forward", "1"},
	{"net.ipv6.conf.all.forwarding", "1"},
}

// bridgeSysctls make a node's bridged IPv4 and IPv6 traffic pass its inet hooks (br_netfilter).
var bridgeSysctls = [][2]string{
	{"net.bridge.bridge-nf-call-iptables", "1"},
	{"net.bridge.bridge-nf-call-ip6tables", "1"},
}

// waitRunning polls until every named link of the namespace is running (operstate up): a new veth
// passes no traffic before the kernel has finished bringing it up.
func waitRunning(ctx context.Context, netnsName string, links ...string) error {
	deadline := time.Now().Add(10 * time.Second)
	delay := time.Millisecond
	for {
		var pending []string
		err := Do(netnsName, func() error {
			for _, l := range links {
				ifi, err := net.InterfaceByName(l)
				if err != nil {
					return fmt.Errorf("link %s in %s: %w", l, netnsName, err)
				}
				if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagRunning == 0 {
					pending = append(pending, l)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("links %v in %s not running after 10s", pending, netnsName)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for links %v in %s: %w", pending, netnsName, ctx.Err())
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// deleteNamespaces removes the named namespaces; already missing ones are not an error.
func deleteNamespaces(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	lines := make([]string, len(names))
	for i, n := range names {
		lines[i] = "netns del " + n
	}
	batchErr := ipBatch(ctx, "", true, lines...)
	var left []string
	for _, n := range names {
		if _, err := os.Stat(nsPath(n)); !errors.Is(err, os.ErrNotExist) {
			left = append(left, n)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("network namespaces %v still present: %v", left, batchErr)
	}
	return nil
}

// HTTPClient returns an HTTP client whose connections are made inside the namespace (to reach
// an agent's /metrics or /readyz listening on the namespace's loopback).
func HTTPClient(netnsName string, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var conn net.Conn
			err := Do(netnsName, func() error {
				var err error
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		},
	}}
}
