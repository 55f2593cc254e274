package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	gosync "sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nflog"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
)

// Deny logging (RunConfig.DenyLog): the dataplane's deny chains log the packets they drop to an
// NFLOG group within a rate per deny reason (nft.DenyLog); the agent reads the group
// (internal/nflog) and writes one line per logged packet, naming the pods at both ends, the port,
// the reason and the policy or tier default that denied, and counts the lines. Log rules log to
// the same group, within the same rate per rule: their lines say "packet logged" and name the
// Log rule (they are not counted as denied). The pods are
// named from the API watcher's updates (podIndex), which pass through it on their way to the loop.

// podIndex names the pod holding an address, for log lines; safe for concurrent use. Of several
// pods listing one address it names the owner by the model's rule (model.AddrClaim.Before), as
// the graph judges a local address, so the name never depends on the order of updates. Memory
// and work follow the cluster's pods: an update costs its addresses times their holders (almost
// always one).
type podIndex struct {
	mu      gosync.RWMutex
	holders map[netip.Addr][]model.AddrClaim
	addrs   map[model.EndpointKey][]netip.Addr
}

func newPodIndex() *podIndex {
	return &podIndex{holders: map[netip.Addr][]model.AddrClaim{}, addrs: map[model.EndpointKey][]netip.Addr{}}
}

// observe takes the endpoints of a batch of updates.
func (ix *podIndex) observe(us []model.Update) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for _, u := range us {
		switch u := u.(type) {
		case model.EndpointSet:
			ix.remove(u.Endpoint.Key)
			c := u.Endpoint.Claim()
			addrs := make([]netip.Addr, 0, len(u.Endpoint.Addrs))
			for _, a := range u.Endpoint.Addrs {
				a = a.Unmap()
				addrs = append(addrs, a)
				ix.holders[a] = append(ix.holders[a], c)
			}
			ix.addrs[u.Endpoint.Key] = addrs
		case model.EndpointDeleted:
			ix.remove(u.Key)
		}
	}
}

func (ix *podIndex) remove(k model.EndpointKey) {
	for _, a := range ix.addrs[k] {
		hs := slices.DeleteFunc(ix.holders[a], func(c model.AddrClaim) bool { return c.Key == k })
		if len(hs) == 0 {
			delete(ix.holders, a)
		} else {
			ix.holders[a] = hs
		}
	}
	delete(ix.addrs, k)
}

// pod is the pod owning a, if any pod holds it.
func (ix *podIndex) pod(a netip.Addr) (model.EndpointKey, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	hs := ix.holders[a.Unmap()]
	if len(hs) == 0 {
		return model.EndpointKey{}, false
	}
	owner := hs[0]
	for _, c := range hs[1:] {
		if c.Before(owner) {
			owner = c
		}
	}
	return owner.Key, true
}

// forward passes every batch from in to out once the index has seen it, until ctx ends.
func (ix *podIndex) forward(ctx context.Context, in <-chan []model.Update, out chan<- []model.Update) {
	for {
		select {
		case us := <-in:
			ix.observe(us)
			select {
			case out <- us:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// denyLogger writes the log line of each logged packet.
type denyLogger struct {
	log   *slog.Logger
	dp    *kernel.Applier
	pods  *podIndex
	lines prometheus.Counter
}

func (l *denyLogger) packet(p nflog.Packet) {
	info, _ := l.dp.DenyChain(p.Prefix)
	attrs := []slog.Attr{slog.String("reason", info.Reason)}
	for _, end := range []struct {
		name string
		addr netip.Addr
	}{{"src", p.Src}, {"dst", p.Dst}} {
		attrs = append(attrs, slog.String(end.name, end.addr.String()))
		if k, ok := l.pods.pod(end.addr); ok {
			attrs = append(attrs, slog.String(end.name+"_namespace", k.Namespace), slog.String(end.name+"_pod", k.Name))
		}
	}
	attrs = append(attrs, slog.String("protocol", model.Protocol(p.Proto).String()))
	if p.Dport != 0 {
		attrs = append(attrs, slog.Int("port", int(p.Dport)))
	}
	o := info.Origin
	switch o.Kind {
	case nft.OriginRule, nft.OriginRejected:
		attrs = append(attrs, slog.String("tier", o.Tier), slog.String("policy", o.Policy.String()),
			slog.String("direction", o.Direction.String()))
		if o.Kind == nft.OriginRule {
			attrs = append(attrs, slog.Int("rule", o.Rule))
		}
	case nft.OriginTierDefault: // the reason names the tier's policies
		attrs = append(attrs, slog.String("tier", o.Tier), slog.String("tier_default", o.Action.String()))
	}
	attrs = append(attrs, slog.String("chain", p.Prefix))
	if info.Logged { // a Log rule's record: the packet went on to its verdict
		l.log.LogAttrs(context.Background(), slog.LevelInfo, "packet logged", attrs...)
		return
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, "packet denied", attrs...)
	l.lines.Inc()
}

// startDenyLog binds the NFLOG group of cfg.DenyLog in the agent's namespace and writes a line
// for each packet logged to it, until ctx ends. It returns the channel the API watcher sends to:
// the pod index sees each batch, then passes it on to updates. While another process binds the
// group — the agent this one replaces, in a rolling update (lock.go) — it binds it again every
// denyLogRebind until it can.
func startDenyLog(ctx context.Context, cfg RunConfig, dp *kernel.Applier, log *slog.Logger, reg prometheus.Registerer,
	updates chan<- []model.Update, errs chan<- error) (chan []model.Update, error) {
	r, err := nflog.Open(cfg.NetNSFD, cfg.DenyLog.Group)
	bound := err == nil
	if err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EBUSY) {
		return nil, err
	}
	var reader atomic.Pointer[nflog.Reader]
	lines := prometheus.NewCounter(prometheus.CounterOpts{Name: "nftpolicy_denied_logged_total",
		Help: "Denied packets logged, one log line each: the deny chains log within a rate per deny reason (--log-denied-rate)."})
	lost := prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nftpolicy_denied_log_overflows_total",
		Help: "Times the kernel dropped deny logs because the agent's NFLOG socket was full."}, func() float64 {
		if r := reader.Load(); r != nil {
			return float64(r.Lost())
		}
		return 0
	})
	reg.MustRegister(lines, lost)
	pods := newPodIndex()
	l := &denyLogger{log: log.With("stage", "denylog"), dp: dp, pods: pods, lines: lines}
	if !bound {
		log.Warn("the deny log's NFLOG group is bound by another process; binding it again every second", "nflog_group", cfg.DenyLog.Group, "err", err)
	}
	go func() {
		for ; !bound; bound = err == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(denyLogRebind):
			}
			if r, err = nflog.Open(cfg.NetNSFD, cfg.DenyLog.Group); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EBUSY) {
				errs <- err
				return
			}
		}
		reader.Store(r)
		defer r.Close()
		log.Info("logging denied packets", "nflog_group", cfg.DenyLog.Group, "rate", cfg.DenyLog.Limit.String())
		if err := r.Run(ctx, l.packet); err != nil && ctx.Err() == nil {
			errs <- err
		}
	}()
	in := make(chan []model.Update, 64)
	go pods.forward(ctx, in, updates)
	return in, nil
}

// denyLogRebind is how often the agent tries again to bind an NFLOG group another process binds.
const denyLogRebind = time.Second
