package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/fqdn"
	"github.com/nftpolicy/nftpolicy/internal/nflog"
)

// Domain names (RunConfig.DNSGroup): the agent enforces ClusterNetworkPolicy domainNames peers
// by learning their addresses from the DNS answers its node's pods receive (internal/fqdn).
// It writes the hold's table (fqdn.InstallHold: copy every UDP answer from port 53 that crosses
// the node's forward path, or leaves a resolver on its host network, to the NFLOG group, and
// drop those it will send on; copy TCP segments from port 53 without holding them), reads the group with an fqdn.Observer that writes the
// answered addresses into the patterns' timed sets of the policy table (which the dataplane
// declares for the rules that use them) before sending each held answer on through raw sockets
// (fqdn.Injector), and keeps the hold's heartbeat (fqdn.Heartbeat). After each apply the loop
// gives the Observer the patterns whose sets the table declares (domainNames.sync).
//
// It runs whenever it is configured, whether or not a policy names a domain: a pattern learns
// only answers seen while it exists, so an observer started with the first such policy would
// miss the answers pods cached before; the cost without patterns is an answer's parse and
// re-send (≈ 0.15 ms) and a heartbeat write every 0.5 s.

// holdTableSuffix names the hold's table after the policy table's.
const holdTableSuffix = "_dns"

// domainNames is the running observer (nil: DNS answers are not observed) and the patterns it
// was last given.
type domainNames struct {
	observer *fqdn.Observer
	patterns []string
	log      *slog.Logger
}

// startDomainNames installs the hold and starts the observer and the heartbeat until ctx ends
// (the heartbeat's end releases the hold; the hold's table is removed then); a failure is sent
// to errs.
func startDomainNames(ctx context.Context, cfg RunConfig, log *slog.Logger, reg prometheus.Registerer, errs chan<- error) (*domainNames, error) {
	holdTable := cfg.Table + holdTableSuffix
	if err := fqdn.InstallHold(cfg.NetNSFD, holdTable, cfg.DNSGroup); err != nil {
		return nil, err
	}
	fd := cfg.NetNSFD
	reader, err := nflog.OpenRange(fd, cfg.DNSGroup, fqdn.AnswerCopyRange)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("reading DNS answers: %w", err), fqdn.RemoveHold(fd, holdTable))
	}
	writer, err := fqdn.NewSetWriter(fd, cfg.Table)
	if err != nil {
		return nil, errors.Join(err, reader.Close(), fqdn.RemoveHold(fd, holdTable))
	}
	beats, err := fqdn.NewSetWriter(fd, holdTable)
	if err != nil {
		return nil, errors.Join(err, reader.Close(), writer.Close(), fqdn.RemoveHold(fd, holdTable))
	}
	var inj *fqdn.Injector
	err = inNetNS(fd, func() (err error) { inj, err = fqdn.NewInjector(); return err })
	if err != nil {
		return nil, errors.Join(err, reader.Close(), writer.Close(), beats.Close(), fqdn.RemoveHold(fd, holdTable))
	}
	limits := fqdn.DefaultLimits
	if cfg.DNSLimits != nil {
		limits = *cfg.DNSLimits
	}
	o := &fqdn.Observer{Cache: fqdn.NewCache(limits), Writer: writer, Release: inj.Inject}
	reg.MustRegister(newDomainCollector(o, reader))
	d := &domainNames{observer: o, log: log.With("stage", "fqdn")}
	observed, beating := make(chan error, 1), make(chan error, 1)
	go func() { observed <- o.Run(ctx, reader) }()
	go func() {
		beating <- fqdn.Heartbeat(ctx, beats, func() bool { return o.Stalled(fqdn.HeartbeatTimeout / 2) })
	}()
	go func() {
		var err error
		select {
		case err = <-observed:
			if err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("observing DNS answers: %w", err)
			}
			err = <-beating
		case err = <-beating:
			if err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("the DNS hold's heartbeat: %w", err)
			}
			<-observed
		}
		// the heartbeat has ended the hold: answers pass unseen from here on
		err = errors.Join(err, fqdn.RemoveHold(fd, holdTable), reader.Close(), writer.Close(), beats.Close(), inj.Close())
		if err != nil && ctx.Err() != nil {
			log.Warn("stopping the DNS observer", "err", err)
		}
	}()
	return d, nil
}

// sync gives the observer the patterns whose sets the table now declares, when they changed.
// A pattern that cannot be parsed (the API validates them) is logged and left out.
func (d *domainNames) sync(patterns []string) {
	if d == nil || slices.Equal(patterns, d.patterns) {
		return
	}
	d.patterns = patterns
	if d.observer == nil {
		if len(patterns) > 0 {
			d.log.Warn("domainNames peers match nothing: DNS answers are not observed (--dns-answers-group is 0)", "patterns", patterns)
		}
		return
	}
	ps := make([]fqdn.Pattern, 0, len(patterns))
	for _, s := range patterns {
		p, err := fqdn.ParsePattern(s)
		if err != nil {
			d.log.Warn("domain name not enforced", "pattern", s, "err", err)
			continue
		}
		ps = append(ps, p)
	}
	d.observer.SetPatterns(ps)
}

// inNetNS runs f on a thread in the network namespace fd (< 0: the current one), for sockets
// that must be made there.
func inNetNS(fd int, f func() error) error {
	if fd < 0 {
		return f()
	}
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("opening the current network namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the network namespace: %w", err)
	}
	ferr := f()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// the thread stays locked and ends with its goroutine: it is in the wrong namespace
		return errors.Join(ferr, fmt.Errorf("returning to the network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// domainCollector exports the observer's counts at scrape time.
type domainCollector struct {
	o                          *fqdn.Observer
	r                          *nflog.Reader
	answers, evictions, copies *prometheus.Desc
}

func newDomainCollector(o *fqdn.Observer, r *nflog.Reader) *domainCollector {
	return &domainCollector{o: o, r: r,
		answers: prometheus.NewDesc("nftpolicy_dns_answers_total",
			"DNS answers to the node's pods seen for domainNames peers, by result: observed (parsed and given to the cache), ignored (no A or AAAA answer), "+
				"malformed, write_error (its addresses did not reach the kernel), release_error (the held answer could not be sent on), "+
				"tcp_partial (a TCP segment from port 53 that is not one whole message: not parsed).", []string{"result"}, nil),
		evictions: prometheus.NewDesc("nftpolicy_dns_evictions_total",
			"Addresses of domainNames patterns evicted before their time because a bound was reached, by bound: per_name (256 addresses a pattern), per_client (1,024 a pod).", []string{"bound"}, nil),
		copies: prometheus.NewDesc("nftpolicy_dns_copies_lost_total",
			"Copies of DNS answers the kernel dropped because the agent's socket was full (those answers were neither seen nor held).", nil, nil),
	}
}

func (c *domainCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.answers
	ch <- c.evictions
	ch <- c.copies
}

func (c *domainCollector) Collect(ch chan<- prometheus.Metric) {
	s, e := c.o.Stats(), c.o.Evictions()
	for result, n := range map[string]uint64{"observed": s.Answers, "ignored": s.Ignored, "malformed": s.Malformed,
		"write_error": s.WriteErrors, "release_error": s.ReleaseErrors, "tcp_partial": s.TCPPartial} {
		ch <- prometheus.MustNewConstMetric(c.answers, prometheus.CounterValue, float64(n), result)
	}
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(e.PerName), "per_name")
	ch <- prometheus.MustNewConstMetric(c.evictions, prometheus.CounterValue, float64(e.PerClient), "per_client")
	ch <- prometheus.MustNewConstMetric(c.copies, prometheus.CounterValue, float64(c.r.Lost()))
}
