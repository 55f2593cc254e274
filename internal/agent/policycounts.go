package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
)

// policyCollector exports the packets each policy (or tier default) allowed and denied, read from
// the kernel's counters at scrape time: the deny chains always, the accepting rules and elements
// with RunConfig.CountAllowed (kernel.Applier.PolicyPackets).
type policyCollector struct {
	dp   *kernel.Applier
	desc *prometheus.Desc
}

func newPolicyCollector(dp *kernel.Applier) *policyCollector {
	return &policyCollector{dp: dp, desc: prometheus.NewDesc("nftpolicy_policy_packets_total",
		"First packets of connections each policy allowed or denied, by tier, policy and direction, as the kernel counted them "+
			"where they were decided; a tier's default has no policy and no direction. Allowed ones only with --count-allowed.",
		[]string{"tier", "policy", "direction", "verdict"}, nil)}
}

func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.dp.PolicyPackets()
	if err != nil {
		return
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), k.Tier, k.Policy, k.Direction, k.Verdict)
	}
}
