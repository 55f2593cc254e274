package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
)

// packetCollector exports what the kernel's counters say at scrape time, from one read of them
// (kernel.Applier.Packets): the packets dropped per deny reason, and the packets each policy (or
// tier default) allowed and denied — the deny chains always, the accepting rules and elements
// with RunConfig.CountAllowed.
type packetCollector struct {
	dp             *kernel.Applier
	denied, policy *prometheus.Desc
}

func newPacketCollector(dp *kernel.Applier) *packetCollector {
	return &packetCollector{dp: dp,
		denied: prometheus.NewDesc("nftpolicy_denied_packets_total",
			"Packets dropped by policy, per deny reason (the policy and rule, or the tier default that isolated the pod).",
			[]string{"reason"}, nil),
		policy: prometheus.NewDesc("nftpolicy_policy_packets_total",
			"First packets of connections each policy allowed or denied, by tier, policy and direction, as the kernel counted them "+
				"where they were decided; a tier's default has no policy and no direction. Allowed ones only with --count-allowed.",
			[]string{"tier", "policy", "direction", "verdict"}, nil)}
}

func (c *packetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.denied; ch <- c.policy }

func (c *packetCollector) Collect(ch chan<- prometheus.Metric) {
	p, err := c.dp.Packets()
	if err != nil {
		return
	}
	for reason, n := range p.Denied {
		ch <- prometheus.MustNewConstMetric(c.denied, prometheus.CounterValue, float64(n), reason)
	}
	for k, n := range p.Policies {
		ch <- prometheus.MustNewConstMetric(c.policy, prometheus.CounterValue, float64(n), k.Tier, k.Policy, k.Direction, k.Verdict)
	}
}
