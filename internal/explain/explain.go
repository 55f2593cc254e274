package explain

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
	"github.com/nftpolicy/nftpolicy/internal/sync"
)

// Cluster is the cluster as the agents see it — the model updates of a source up to in-sync —
// and the tables of the nodes explained so far.
type Cluster struct {
	updates   []model.Update
	endpoints map[model.EndpointKey]model.Endpoint
	policies  map[model.PolicyKey]model.Policy
	tables    map[string]*nft.Builder // by node
	// domainSets reads the kernel's domainNames sets of the node explain runs on (by node).
	domainSets map[string]DomainSets
	host       nft.HostConfig // the host part of every node's table
	// Problems are the graph's diagnostics (invalid selectors, unknown tiers) of the last node
	// built.
	Problems []graph.Problem
}

// New keeps the state that updates describe (a source's stream up to in-sync).
func New(updates []model.Update) *Cluster {
	c := &Cluster{endpoints: map[model.EndpointKey]model.Endpoint{}, policies: map[model.PolicyKey]model.Policy{},
		tables: map[string]*nft.Builder{}, host: defaultHostConfig()}
	for _, u := range updates {
		switch u := u.(type) {
		case model.EndpointSet:
			c.endpoints[u.Endpoint.Key] = u.Endpoint
		case model.EndpointDeleted:
			delete(c.endpoints, u.Key)
		case model.PolicySet:
			c.policies[u.Policy.Key] = u.Policy
		case model.PolicyDeleted:
			delete(c.policies, u.Key)
		case model.SourceVersion:
			continue // no state: the graph is not fed them either
		}
		c.updates = append(c.updates, u)
	}
	return c
}

// Load reads a directory of manifests as `nftpolicy render` does; the errors are the documents
// it skipped.
func Load(dir string) (*Cluster, []error) {
	updates, errs := sync.LoadDir(dir)
	return New(updates), errs
}

// Live lists the cluster through client as the agent's Watcher does, until every resource has
// delivered its initial list (in-sync), or ctx ends.
func Live(ctx context.Context, client sync.Client) (*Cluster, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := sync.New(sync.Config{Client: client, NodeName: "explain"})
	out := make(chan []model.Update, 16)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, out) }()
	var updates []model.Update
	for {
		select {
		case batch := <-out:
			for _, u := range batch {
				updates = append(updates, u)
				if s, ok := u.(model.SyncStatusUpdate); ok && s.Status == model.InSync {
					cancel()
					<-done
					return New(updates), nil
				}
			}
		case err := <-done:
			if err == nil {
				err = ctx.Err()
			}
			return nil, fmt.Errorf("listing the cluster: %w", err)
		case <-ctx.Done():
			<-done
			return nil, fmt.Errorf("listing the cluster: not in sync: %w", context.Cause(ctx))
		}
	}
}

// table is node's table, computed once: the graph of that node over the cluster's updates and
// the table an nft.Builder computes from its messages.
func (c *Cluster) table(node string) *nft.Builder {
	if b, ok := c.tables[node]; ok {
		return b
	}
	g := graph.New(graph.Config{NodeName: node})
	for _, u := range c.updates {
		g.OnUpdate(u)
	}
	b := nft.NewBuilder(nft.Config{Host: c.host})
	b.Apply(g.Flush())
	c.Problems = g.Problems()
	c.tables[node] = b
	return b
}

// Query is one flow to explain: the first packet of a connection from From (a pod "ns/name", a
// node "node/NAME" or an address) to To (a pod, a node or an address) on Proto and, for TCP, UDP and SCTP,
// Port (the destination port) and SrcPort; for ICMP and ICMPv6, ICMPType and ICMPCode. A key
// "node/NAME" is a pod when namespace "node" holds one of that name.
type Query struct {
	From, To           string
	Proto              model.Protocol
	Port               uint16
	SrcPort            uint16
	ICMPType, ICMPCode uint8
	// IPv6 picks the pods' and nodes' IPv6 addresses (when To is an address, its family decides).
	IPv6 bool
	// Interface is the interface of a node end the packet passes ("": the interface of the
	// node's host endpoint with the smallest interface name holding the node's address, else
	// any interface no host endpoint names). With Via, it is the interface of the forwarding
	// node the packet enters by (or leaves by, from a pod of that node).
	Interface string
	// Via is the node that forwards the flow, "node/NAME" (none when empty): its host
	// endpoints' applyOnForward policy judges the packet where it enters and leaves the node.
	Via string
}

// ICMP is an ICMP or ICMPv6 packet's type and code.
type ICMP struct {
	Type uint8 `json:"type"`
	Code uint8 `json:"code"`
}

// End is one end of the flow: a pod, a node (its own traffic, through Interface) or an
// address.
type End struct {
	Pod  string     `json:"pod,omitempty"`
	Addr netip.Addr `json:"address"`
	Node string     `json:"node,omitempty"`
	// Host is true for the node itself; Interface is the node's interface the packet passes
	// ("" for any one no host endpoint names).
	Host      bool   `json:"host,omitempty"`
	Interface string `json:"interface,omitempty"`
}

// Result is the explanation of a flow: allowed when both sides allow it.
type Result struct {
	From     End    `json:"from"`
	To       End    `json:"to"`
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port,omitempty"`
	SrcPort  uint16 `json:"source_port,omitempty"`
	// ICMP is the ICMP or ICMPv6 packet's type and code.
	ICMP    *ICMP `json:"icmp,omitempty"`
	Allowed bool  `json:"allowed"`
	Egress  Side  `json:"egress"`
	Ingress Side  `json:"ingress"`
	// Forward are the forward stage's sides on the node of the query's Via: ingress (fwd_in)
	// of the interface the packet enters by, egress (fwd_out) of the one it leaves by; a pod's
	// interface has none.
	Forward []Side `json:"forward,omitempty"`
}

// Side is the decision of one direction on one node.
type Side struct {
	Direction string `json:"direction"`
	// Judged is false for an end that is no pod of the cluster: no node judges its side.
	Judged bool   `json:"judged"`
	Node   string `json:"node,omitempty"`
	Pod    string `json:"pod,omitempty"`
	// HostEndpoint is the host endpoint that judged the node's own traffic through Interface.
	HostEndpoint string `json:"host_endpoint,omitempty"`
	// Stage is the host endpoint stage before the node's own policy that decided: "doNotTrack
	// (untracked)" or "preDNAT"; "applyOnForward" for a side of Result.Forward; empty for the
	// node's own (or a pod's) policy.
	Stage     string `json:"stage,omitempty"`
	Interface string `json:"interface,omitempty"`
	Verdict   string `json:"verdict"` // allow or deny
	// Reason is the compiler's reason for the verdict, as the deciding element's comment says it.
	Reason    string     `json:"reason"`
	DecidedBy DecidedBy  `json:"decided_by"`
	Tiers     []TierPath `json:"tiers,omitempty"`
	// Domains are the domainNames patterns of the policies of a pod's egress side.
	Domains  []Domain `json:"domains,omitempty"`
	NFTables []Step   `json:"nftables,omitempty"`
}

// DecidedBy is what decided a side.
type DecidedBy struct {
	// Kind: "rule", "tier default", "no policy", "no tier decided", "rejected policy", "unknown",
	// "not judged", "exception" (the node's traffic accepted before its host endpoints:
	// loopback, its pods, ICMPv6, a failsafe port) or "no host endpoint" (none covers the
	// node's interface).
	Kind   string `json:"kind"`
	Tier   string `json:"tier,omitempty"`
	Policy string `json:"policy,omitempty"` // Kind/namespace/name
	Rule   *int   `json:"rule,omitempty"`   // the rule's index in the policy's rules of the direction
	Action string `json:"action,omitempty"` // the rule's action, or the tier's default
	// Peer and Ports say what the deciding rule matches: its peer side and destination ports.
	Peer  string `json:"peer,omitempty"`
	Ports string `json:"ports,omitempty"`
}

// TierPath is one tier of the pod's policies for the direction, in evaluation order.
type TierPath struct {
	Tier          string   `json:"tier"`
	DefaultAction string   `json:"default_action"`
	Policies      []string `json:"policies"`
	// Outcome: "decided" (a rule or the default of this tier decided), "passed" (on to the next
	// tier) or "not reached".
	Outcome string `json:"outcome"`
}

// Step is one nftables rule the packet matches on the side's node, in order.
type Step struct {
	Chain        string `json:"chain"`
	ChainComment string `json:"chain_comment,omitempty"`
	Rule         int    `json:"rule"`
	Statement    string `json:"statement"`
	// Lookups are the rule's set and map lookups, the last one deciding.
	Lookups []Lookup `json:"lookups,omitempty"`
	Verdict string   `json:"verdict,omitempty"`
}

// Lookup is one set or map lookup of a rule: the element holding the packet's key, as nft lists
// it (with its comment, and in a map its verdict), or none when the rule matches the key's absence.
type Lookup struct {
	Set        string `json:"set"`
	SetComment string `json:"set_comment,omitempty"`
	Element    string `json:"element,omitempty"`
}

// Explain explains one flow.
func (c *Cluster) Explain(q Query) (*Result, error) {
	r := &Result{Protocol: q.Proto.String(), Port: q.Port, SrcPort: q.SrcPort}
	if !hasPorts(q.Proto) {
		r.Port, r.SrcPort = 0, 0
	}
	if isICMP(q.Proto) {
		r.ICMP = &ICMP{Type: q.ICMPType, Code: q.ICMPCode}
	}
	is6 := q.IPv6
	toAddr, err := netip.ParseAddr(q.To)
	if err == nil {
		toAddr = toAddr.Unmap()
		is6 = toAddr.Is6()
	}
	var from end
	if a, err := netip.ParseAddr(q.From); err == nil {
		if a = a.Unmap(); toAddr.IsValid() && a.Is6() != is6 {
			return nil, fmt.Errorf("--from %s and --to %s: addresses of two families", a, toAddr)
		}
		is6 = a.Is6()
		from = c.addrEnd(a, q.Interface)
	} else if from, err = c.end(q.From, is6, q.Interface); err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	var to end
	if toAddr.IsValid() {
		to = c.addrEnd(toAddr, q.Interface)
	} else if to, err = c.end(q.To, is6, q.Interface); err != nil {
		return nil, fmt.Errorf("--to: %w", err)
	}
	r.From, r.To = from.public(), to.public()
	pkt := ruleset.Packet{Src: from.addr, Dst: to.addr, Proto: uint8(q.Proto), Dport: r.Port, Sport: r.SrcPort}
	if r.ICMP != nil {
		pkt.ICMPType, pkt.ICMPCode = r.ICMP.Type, r.ICMP.Code
	}
	if r.Egress, err = c.egress(from, to, q, pkt); err != nil {
		return nil, err
	}
	if r.Ingress, err = c.ingress(from, to, q, pkt); err != nil {
		return nil, err
	}
	r.Allowed = r.Egress.Verdict == nft.Allow.String() && r.Ingress.Verdict == nft.Allow.String()
	if q.Via != "" {
		if r.Forward, err = c.forward(q.Via, from, to, q, pkt); err != nil {
			return nil, err
		}
		for _, s := range r.Forward {
			r.Allowed = r.Allowed && s.Verdict == nft.Allow.String()
		}
	}
	return r, nil
}

// egress explains the source's side: a pod's egress policy in the forward hook (in the input
// hook when it sends to its own node), a node's host endpoint in the output hook.
func (c *Cluster) egress(from, to end, q Query, pkt ruleset.Packet) (Side, error) {
	if from.pod == nil && !from.host {
		return Side{Direction: model.Egress.String(), Verdict: nft.Allow.String(), DecidedBy: DecidedBy{Kind: "not judged"},
			Reason: "no pod of the cluster holds " + from.addr.String() + ": no egress policy applies"}, nil
	}
	if from.host {
		pkt.Oifname = from.iface
		switch {
		case to.host && to.node == from.node:
			pkt.Oifname = loopback
		case to.pod != nil && to.node == from.node:
			pkt.Oifname = workloadIfname
		}
		return c.hostSide(model.Egress, from, to.addr, q, pkt, nft.ChainOutputHost)
	}
	chain := nft.ChainForwardEgress
	if to.host && to.node == from.node {
		chain, pkt.Iifname = nft.ChainInputHost, workloadIfname
	}
	return c.side(model.Egress, from.node, from.addr, to.addr, q, pkt, chain)
}

// ingress explains the destination's side: a pod's ingress policy in the forward hook, a
// node's host endpoint in the input hook; an address outside the cluster's pods and nodes, a
// pod its own node sends to (the output hook only) and a node its own pod sends to (the pod's
// egress alone) are not judged.
func (c *Cluster) ingress(from, to end, q Query, pkt ruleset.Packet) (Side, error) {
	notJudged := func(reason string) (Side, error) {
		return Side{Direction: model.Ingress.String(), Verdict: nft.Allow.String(), Reason: reason,
			DecidedBy: DecidedBy{Kind: "not judged"}}, nil
	}
	switch {
	case to.pod == nil && !to.host:
		return notJudged("no pod of the cluster holds " + to.addr.String() + ": no ingress policy applies")
	case to.pod != nil && from.host && from.node == to.node:
		return notJudged("from its own node: the node's traffic to its pods takes the output hook only and is not policed")
	case to.host && from.pod != nil && from.node == to.node:
		return notJudged("from a pod of the node: judged by the pod's egress policy alone")
	case to.host:
		pkt.Iifname = to.iface
		if from.host && from.node == to.node {
			pkt.Iifname = loopback
		}
		return c.hostSide(model.Ingress, to, from.addr, q, pkt, nft.ChainInputHost)
	}
	return c.side(model.Ingress, to.node, to.addr, from.addr, q, pkt, nft.ChainForwardIngress)
}

// side explains one direction of a pod on node, where local is the pod's address and peer the
// other end's, walking the node's table from chain.
func (c *Cluster) side(dir model.Direction, node string, local, peer netip.Addr, q Query, pkt ruleset.Packet, chain string) (Side, error) {
	s := Side{Direction: dir.String(), Judged: true, Node: node}
	builder := c.table(node)
	d, ok := builder.Decide(dir, local, peer, q.Proto, pkt.Sport, decidedPort(q, pkt))
	if !ok {
		return s, fmt.Errorf("node %s holds no endpoint with address %s", node, local)
	}
	s.Pod = d.Endpoint.String()
	if dir == model.Egress {
		s.Domains = c.domains(node, d)
	}
	return s, c.decided(&s, builder, d, chain, pkt)
}

// decided fills s with decision d and the walk of the node's table from chain, and fails when
// the two disagree.
func (c *Cluster) decided(s *Side, builder *nft.Builder, d nft.Decided, chain string, pkt ruleset.Packet) error {
	s.Verdict, s.Reason = d.Outcome.Verdict.String(), d.Outcome.Reason
	s.DecidedBy = c.decidedBy(d.Origin)
	s.Tiers = tierPaths(d)
	steps, v, err := builder.Table().Walk(chain, pkt)
	if err != nil {
		return fmt.Errorf("walking the table of node %s: %w", s.Node, err)
	}
	if (v.Kind == ruleset.Accept) != (d.Outcome.Verdict == nft.Allow) {
		return fmt.Errorf("node %s, %s of %s: the compiled decision says %s (%s) but the table's walk ends in %s",
			s.Node, s.Direction, d.Endpoint, d.Outcome.Verdict, d.Outcome.Reason, v)
	}
	s.NFTables = nftSteps(steps)
	return nil
}

// decidedPort is the port Decide takes: the destination port, or ICMP's type and code.
func decidedPort(q Query, pkt ruleset.Packet) uint16 {
	if isICMP(q.Proto) {
		return nft.ICMPKey(pkt.ICMPType, pkt.ICMPCode)
	}
	return pkt.Dport
}

func nftSteps(steps []ruleset.Step) []Step {
	var out []Step
	for _, st := range steps {
		step := Step{Chain: st.Chain, ChainComment: st.ChainComment, Rule: st.Rule, Statement: st.Text, Verdict: st.Verdict.String()}
		for _, f := range st.Found {
			step.Lookups = append(step.Lookups, Lookup{Set: f.Set, SetComment: f.SetComment, Element: f.ElementText})
		}
		out = append(out, step)
	}
	return out
}

// decidedBy describes an origin, with what its rule matches.
func (c *Cluster) decidedBy(o nft.Origin) DecidedBy {
	b := DecidedBy{Kind: o.Kind.String(), Tier: o.Tier}
	if o.Policy != (model.PolicyKey{}) {
		b.Policy = o.Policy.String()
	}
	if o.Action != 0 {
		b.Action = o.Action.String()
	}
	if o.Kind != nft.OriginRule {
		return b
	}
	b.Rule = &o.Rule
	p, ok := c.policies[o.Policy]
	rules := p.IngressRules
	if o.Direction == model.Egress {
		rules = p.EgressRules
	}
	if !ok || o.Rule >= len(rules) {
		return b
	}
	r := rules[o.Rule]
	peer := r.Source
	if o.Direction == model.Egress {
		peer = r.Destination
	}
	b.Peer, b.Ports = describePeer(peer, p.Namespace), describePorts(r)
	return b
}

// tierPaths marks each tier of a decision: the one that decided, those passed before it, those
// not reached after it.
func tierPaths(d nft.Decided) []TierPath {
	var out []TierPath
	outcome := "passed"
	for _, t := range d.Tiers {
		tp := TierPath{Tier: t.Tier, DefaultAction: t.DefaultAction.String(), Outcome: outcome}
		for _, p := range t.Policies {
			tp.Policies = append(tp.Policies, p.String())
		}
		if outcome == "passed" && t.Tier == d.Origin.Tier && d.Origin.Kind != nft.OriginNoTierDecided {
			tp.Outcome, outcome = "decided", "not reached"
		}
		out = append(out, tp)
	}
	return out
}

// pod finds the endpoint of "namespace/name".
func (c *Cluster) pod(key string) (*model.Endpoint, error) {
	ns, name, ok := strings.Cut(key, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("%q: want NAMESPACE/POD", key)
	}
	e, ok := c.endpoints[model.EndpointKey{Namespace: ns, Name: name}]
	if !ok {
		return nil, fmt.Errorf("pod %s is no endpoint: it does not exist, has no address yet, is hostNetwork or has finished", key)
	}
	return &e, nil
}

// holder is an endpoint holding address a, preferring a running one; nil when none does. The
// node it is on decides which of several holders the address is judged as (Decide's endpoint).
func (c *Cluster) holder(a netip.Addr) *model.Endpoint {
	var found *model.Endpoint
	for _, e := range c.endpoints {
		if e.Host == nil && slices.Contains(e.Addrs, a) && (found == nil || e.Running && !found.Running ||
			e.Running == found.Running && e.Key.String() < found.Key.String()) {
			found = &e
		}
	}
	return found
}

func addrOf(e *model.Endpoint, is6 bool) (netip.Addr, error) {
	for _, a := range e.Addrs {
		if a = a.Unmap(); a.Is6() == is6 {
			return a, nil
		}
	}
	fam := "IPv4"
	if is6 {
		fam = "IPv6"
	}
	return netip.Addr{}, fmt.Errorf("pod %s has no %s address", e.Key, fam)
}

func hasPorts(p model.Protocol) bool {
	return p == model.ProtocolTCP || p == model.ProtocolUDP || p == model.ProtocolSCTP
}

func isICMP(p model.Protocol) bool { return p == model.ProtocolICMP || p == model.ProtocolICMPv6 }

// describePeer says what a rule's peer side matches, namespace scoping included.
func describePeer(p model.Peer, namespace string) string {
	var parts []string
	if p.Selector != "" {
		parts = append(parts, "pods "+p.Selector)
	}
	switch {
	case p.NamespaceSelector != "":
		parts = append(parts, "in namespaces "+p.NamespaceSelector)
	case p.Selector != "" && namespace != "":
		parts = append(parts, "in namespace "+namespace)
	}
	if p.ServiceAccountSelector != "" {
		parts = append(parts, "of service accounts "+p.ServiceAccountSelector)
	}
	if len(p.Nets) > 0 {
		parts = append(parts, "ipBlock "+joinPrefixes(p.Nets))
	}
	if len(p.NotNets) > 0 {
		parts = append(parts, "except "+joinPrefixes(p.NotNets))
	}
	if len(p.DomainNames) > 0 {
		parts = append(parts, "the addresses DNS answered for "+strings.Join(p.DomainNames, ", "))
	}
	if len(parts) == 0 {
		return "any peer"
	}
	return strings.Join(parts, " ")
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// describePorts says which protocol and destination ports (or ICMP type and code) a rule
// matches, and its source ports when it has some.
func describePorts(r model.Rule) string {
	if len(r.Source.Ports) == 0 {
		return describeDstPorts(r)
	}
	return describeDstPorts(r) + " from source ports " + portList(r.Source.Ports)
}

// describeDstPorts says which protocol and destination ports (or ICMP type and code) a rule
// matches.
func describeDstPorts(r model.Rule) string {
	proto := r.Protocol.String()
	if r.ICMP != nil || r.NotICMP != nil {
		var s []string
		if r.ICMP != nil {
			s = append(s, describeICMP(r.ICMP))
		}
		if r.NotICMP != nil {
			s = append(s, "not "+describeICMP(r.NotICMP))
		}
		return proto + " " + strings.Join(s, ", ")
	}
	ports := r.Destination.Ports
	if len(ports) == 0 {
		if r.Protocol == model.ProtocolAny {
			return "any protocol and port"
		}
		return proto + ", any port"
	}
	return proto + " " + portList(ports)
}

// portList names ports: numbers, ranges and named ports.
func portList(ports []model.Port) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		switch {
		case p.Name != "":
			s[i] = "named port " + p.Name
		case p.First == p.Last:
			s[i] = strconv.Itoa(int(p.First))
		default:
			s[i] = fmt.Sprintf("%d-%d", p.First, p.Last)
		}
	}
	return strings.Join(s, ", ")
}

// describeICMP says which ICMP type and code m matches.
func describeICMP(m *model.ICMPMatch) string {
	if m.Code == nil {
		return fmt.Sprintf("type %d", m.Type)
	}
	return fmt.Sprintf("type %d code %d", m.Type, *m.Code)
}
