package explain

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/nft"
)

// WriteText writes the explanation for a reader: the flow and its verdict, then each side's
// verdict, what decided it, the pod's tiers and policies, and the nftables rules and elements
// the packet meets on that side's node.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	verdict := "DENIED"
	if r.Allowed {
		verdict = "ALLOWED"
	}
	port := ""
	switch {
	case r.ICMP != nil:
		port = fmt.Sprintf(" type %d code %d", r.ICMP.Type, r.ICMP.Code)
	case r.SrcPort != 0:
		port = fmt.Sprintf(" %d→%d", r.SrcPort, r.Port)
	case r.Port != 0:
		port = fmt.Sprintf("/%d", r.Port)
	}
	fmt.Fprintf(&b, "%s → %s %s%s: %s\n", endName(r.From), endName(r.To), r.Protocol, port, verdict)
	for _, s := range []Side{r.Egress, r.Ingress} {
		b.WriteString("\n")
		writeSide(&b, s, r.To.Addr)
	}
	for _, s := range r.Forward {
		b.WriteString("\n")
		writeSide(&b, s, r.To.Addr)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func endName(e End) string {
	switch {
	case e.Host:
		return fmt.Sprintf("node %s (%s, %s)", e.Node, e.Addr, ifaceName(e.Interface))
	case e.Pod == "":
		return e.Addr.String()
	}
	return fmt.Sprintf("%s (%s)", e.Pod, e.Addr)
}

// ifaceName names a node's interface as a query's end has it.
func ifaceName(ifname string) string {
	if ifname == "" {
		return "an interface no host endpoint names"
	}
	return "interface " + ifname
}

// subject is what a judged side judges: a pod, or the node's traffic through an interface
// and its host endpoint.
func subject(s Side) string {
	switch {
	case s.Pod != "":
		return s.Pod
	case s.HostEndpoint != "":
		return fmt.Sprintf("host endpoint %s (%s)", s.HostEndpoint, ifaceName(s.Interface))
	}
	return "the node's own traffic (" + ifaceName(s.Interface) + ")"
}

// writeSide writes one side; peer is the flow's destination (marked in an egress side's
// domainNames sets).
func writeSide(b *strings.Builder, s Side, peer netip.Addr) {
	if !s.Judged {
		fmt.Fprintf(b, "%s: %s — %s\n", s.Direction, s.Verdict, s.Reason)
		return
	}
	fmt.Fprintf(b, "%s of %s, on node %s: %s\n", s.Direction, subject(s), s.Node, s.Verdict)
	switch {
	case s.Stage == stageForward:
		fmt.Fprintf(b, "  stage: %s, forwarded by node %s\n", s.Stage, s.Node)
	case s.Stage != "":
		note := ""
		if s.Stage == stageName(nft.StageUntracked) && s.Verdict == nft.Allow.String() {
			note = "; not tracked: its replies need an allow of their own"
		}
		fmt.Fprintf(b, "  stage: %s, before the node's own policy%s\n", s.Stage, note)
	}
	d := s.DecidedBy
	switch d.Kind {
	case "rule":
		fmt.Fprintf(b, "  decided by %s %s rule %d (%s) in tier %s\n", d.Policy, s.Direction, *d.Rule, d.Action, d.Tier)
		if d.Peer != "" {
			fmt.Fprintf(b, "    its peers: %s; its ports: %s\n", d.Peer, d.Ports)
		}
	case "tier default":
		fmt.Fprintf(b, "  decided by the default of tier %s (%s): no rule of its policies matched\n", d.Tier, d.Action)
	case "no policy":
		fmt.Fprintf(b, "  no policy selects %s for %s\n", subject(s), s.Direction)
	case "exception":
		b.WriteString("  accepted before any host endpoint's policy\n")
	default:
		fmt.Fprintf(b, "  decided by: %s\n", d.Kind)
	}
	fmt.Fprintf(b, "  reason: %s\n", s.Reason)
	if len(s.Tiers) > 0 {
		b.WriteString("  tiers, in order:\n")
		for _, t := range s.Tiers {
			policies := strings.Join(t.Policies, ", ")
			if policies == "" {
				policies = "no policy" // the host endpoint default tier
			}
			fmt.Fprintf(b, "    %-8s %-11s (default %s): %s\n", t.Tier, t.Outcome, t.DefaultAction, policies)
		}
	}
	writeDomains(b, s, peer)
	fmt.Fprintf(b, "  nftables on node %s:\n", s.Node)
	if len(s.NFTables) == 0 {
		if s.Pod != "" {
			fmt.Fprintf(b, "    no rule of forward_%s matches (no dispatch element for %s): the chain's policy accepts\n", s.Direction, s.Pod)
		} else {
			fmt.Fprintf(b, "    no rule matches (no dispatch element for %s): the chain's policy accepts\n", subject(s))
		}
	}
	for _, st := range s.NFTables {
		fmt.Fprintf(b, "    chain %s, rule %d: %s\n", st.Chain, st.Rule, st.Statement)
		for _, l := range st.Lookups {
			set := l.Set
			if l.SetComment != "" {
				set += fmt.Sprintf(" (%s)", l.SetComment)
			}
			if l.Element == "" {
				fmt.Fprintf(b, "      not in %s\n", set)
			} else {
				fmt.Fprintf(b, "      in %s: %s\n", set, l.Element)
			}
		}
	}
}
