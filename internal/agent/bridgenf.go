package agent

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// Bridged pods are judged in the inet table only when br_netfilter hands bridged IPv4 and IPv6
// to the inet hooks: net.bridge.bridge-nf-call-iptables and -ip6tables, per network namespace
// (1 by default in a new namespace; kube-proxy needs them on bridge CNIs too). The agent never
// writes them: it reads them once pods are seen behind bridge ports and says loudly when one is
// off — a log error and nftpolicy_bridge_netfilter{family} at 0 — since same-node bridged traffic
// then passes unjudged.

// bridgeNetfilterSysctls are the sysctls read, per family.
var bridgeNetfilterSysctls = [][2]string{
	{"ipv4", "/proc/sys/net/bridge/bridge-nf-call-iptables"},
	{"ipv6", "/proc/sys/net/bridge/bridge-nf-call-ip6tables"},
}

// bridgeNetfilter watches the sysctls for one namespace.
type bridgeNetfilter struct {
	netnsFD int // < 0: the current namespace
	log     *slog.Logger
	gauge   *prometheus.GaugeVec
	last    map[string]bool // what was last reported per family
}

func newBridgeNetfilter(netnsFD int, log *slog.Logger, reg prometheus.Registerer) *bridgeNetfilter {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nftpolicy_bridge_netfilter",
		Help: "1 when bridged traffic of the family passes the inet hooks (net.bridge.bridge-nf-call-iptables / -ip6tables), 0 when not: pods behind bridge ports are then not policed between themselves. Exported once pods are seen behind bridge ports."},
		[]string{"family"})
	if reg != nil {
		reg.MustRegister(g)
	}
	return &bridgeNetfilter{netnsFD: netnsFD, log: log, gauge: g, last: map[string]bool{}}
}

// check reads the sysctls and reports them; called from one goroutine.
func (b *bridgeNetfilter) check() {
	vals, err := readSysctls(b.netnsFD)
	if err != nil {
		b.log.Error("pods are behind bridge ports, but br_netfilter's sysctls cannot be read: same-node bridged traffic may pass unjudged", "error", err)
		for _, f := range bridgeNetfilterSysctls {
			b.gauge.WithLabelValues(f[0]).Set(0)
		}
		return
	}
	for i, f := range bridgeNetfilterSysctls {
		on := vals[i]
		if on {
			b.gauge.WithLabelValues(f[0]).Set(1)
		} else {
			b.gauge.WithLabelValues(f[0]).Set(0)
		}
		if prev, seen := b.last[f[0]]; seen && prev == on {
			continue
		}
		b.last[f[0]] = on
		if on {
			b.log.Info("bridged traffic passes the inet hooks", "family", f[0], "sysctl", f[1])
		} else {
			b.log.Error("pods are behind bridge ports but bridged traffic skips the inet hooks: traffic between pods of this node's bridge is NOT policed; set the sysctl to 1 (kube-proxy needs it too)", "family", f[0], "sysctl", f[1])
		}
	}
}

// readSysctls reads the family sysctls in the namespace netnsFD (< 0: the current one). A
// sysctl that does not exist (no br_netfilter) reads as off.
func readSysctls(netnsFD int) ([]bool, error) {
	read := func() ([]bool, error) {
		out := make([]bool, len(bridgeNetfilterSysctls))
		for i, f := range bridgeNetfilterSysctls {
			v, err := os.ReadFile(f[1])
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[i] = string(bytes.TrimSpace(v)) == "1"
		}
		return out, nil
	}
	if netnsFD < 0 {
		return read()
	}
	var out []bool
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, whatever its namespace
		if err = unix.Setns(netnsFD, unix.CLONE_NEWNET); err != nil {
			err = fmt.Errorf("entering the network namespace: %w", err)
			return
		}
		out, err = read()
	}()
	<-done
	return out, err
}
