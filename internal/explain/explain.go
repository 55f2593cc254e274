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
	// Problems are the graph's diagnostics (invalid selectors, unknown tiers) of the last node
	// built.
	Problems []graph.Problem
}

// New keeps the state that updates describe (a source's stream up to in-sync).
func New(updates []model.Update) *Cluster {
	c := &Cluster{endpoints: map[model.EndpointKey]model.Endpoint{}, policies: map[model.PolicyKey]model.Policy{},
		tables: map[string]*nft.Builder{}}
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
	b := nft.NewBuilder(nft.Config{})
	b.Apply(g.Flush())
	c.Problems = g.Problems()
	c.tables[node] = b
	return b
}

// Query is one flow to explain: the first packet of a connection from pod From ("ns/name") to
// To (a pod "ns/name" or an address) on Proto and, for TCP, UDP and SCTP, Port (the destination
// port) and SrcPort; for ICMP and ICMPv6, ICMPType and ICMPCode.
type Query struct {
	From, To           string
	Proto              model.Protocol
	Port               uint16
	SrcPort            uint16
	ICMPType, ICMPCode uint8
	// IPv6 picks the pods' IPv6 addresses (when To is an address, its family decides).
	IPv6 bool
}

// ICMP is an ICMP or ICMPv6 packet's type and code.
type ICMP struct {
	Type uint8 `json:"type"`
	Code uint8 `json:"code"`
}

// End is one end of the flow.
type End struct {
	Pod  string     `json:"pod,omitempty"`
	Addr netip.Addr `json:"address"`
	Node string     `json:"node,omitempty"`
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
}

// Side is the decision of one direction on one node.
type Side struct {
	Direction string `json:"direction"`
	// Judged is false for an end that is no pod of the cluster: no node judges its side.
	Judged  bool   `json:"judged"`
	Node    string `json:"node,omitempty"`
	Pod     string `json:"pod,omitempty"`
	Verdict string `json:"verdict"` // allow or deny
	// Reason is the compiler's reason for the verdict, as the deciding element's comment says it.
	Reason    string     `json:"reason"`
	DecidedBy DecidedBy  `json:"decided_by"`
	Tiers     []TierPath `json:"tiers,omitempty"`
	NFTables  []Step     `json:"nftables,omitempty"`
}

// DecidedBy is what decided a side.
type DecidedBy struct {
	// Kind: "rule", "tier default", "no policy", "no tier decided", "rejected policy", "unknown",
	// or "not judged".
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
	from, err := c.pod(q.From)
	if err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	r := &Result{Protocol: q.Proto.String(), Port: q.Port, SrcPort: q.SrcPort}
	if !hasPorts(q.Proto) {
		r.Port, r.SrcPort = 0, 0
	}
	if isICMP(q.Proto) {
		r.ICMP = &ICMP{Type: q.ICMPType, Code: q.ICMPCode}
	}
	is6 := q.IPv6
	var to *model.Endpoint
	if a, err := netip.ParseAddr(q.To); err == nil {
		a = a.Unmap()
		is6 = a.Is6()
		r.To.Addr = a
		to = c.holder(a)
	} else {
		if to, err = c.pod(q.To); err != nil {
			return nil, fmt.Errorf("--to: %w", err)
		}
		if r.To.Addr, err = addrOf(to, is6); err != nil {
			return nil, fmt.Errorf("--to: %w", err)
		}
	}
	if r.From.Addr, err = addrOf(from, is6); err != nil {
		return nil, fmt.Errorf("--from: %w", err)
	}
	r.From.Pod, r.From.Node = from.Key.String(), from.Node
	if to != nil {
		r.To.Pod, r.To.Node = to.Key.String(), to.Node
	}
	pkt := ruleset.Packet{Src: r.From.Addr, Dst: r.To.Addr, Proto: uint8(q.Proto), Dport: r.Port, Sport: r.SrcPort}
	if r.ICMP != nil {
		pkt.ICMPType, pkt.ICMPCode = r.ICMP.Type, r.ICMP.Code
	}
	if r.Egress, err = c.side(model.Egress, from.Node, r.From.Addr, r.To.Addr, q, pkt); err != nil {
		return nil, err
	}
	if to == nil {
		r.Ingress = Side{Direction: model.Ingress.String(), Verdict: nft.Allow.String(),
			Reason:    "no pod of the cluster holds " + r.To.Addr.String() + ": no ingress policy applies",
			DecidedBy: DecidedBy{Kind: "not judged"}}
	} else if r.Ingress, err = c.side(model.Ingress, to.Node, r.To.Addr, r.From.Addr, q, pkt); err != nil {
		return nil, err
	}
	r.Allowed = r.Egress.Verdict == nft.Allow.String() && r.Ingress.Verdict == nft.Allow.String()
	return r, nil
}

// side explains one direction on node, where local is the pod's address and peer the other end's.
func (c *Cluster) side(dir model.Direction, node string, local, peer netip.Addr, q Query, pkt ruleset.Packet) (Side, error) {
	s := Side{Direction: dir.String(), Judged: true, Node: node}
	builder := c.table(node)
	port := pkt.Dport
	if isICMP(q.Proto) {
		port = nft.ICMPKey(pkt.ICMPType, pkt.ICMPCode)
	}
	d, ok := builder.Decide(dir, local, peer, q.Proto, pkt.Sport, port)
	if !ok {
		return s, fmt.Errorf("node %s holds no endpoint with address %s", node, local)
	}
	s.Pod, s.Verdict, s.Reason = d.Endpoint.String(), d.Outcome.Verdict.String(), d.Outcome.Reason
	s.DecidedBy = c.decidedBy(d.Origin)
	s.Tiers = tierPaths(d)
	chain := nft.ChainForwardIngress
	if dir == model.Egress {
		chain = nft.ChainForwardEgress
	}
	steps, v, err := builder.Table().Walk(chain, pkt)
	if err != nil {
		return s, fmt.Errorf("walking the table of node %s: %w", node, err)
	}
	if (v.Kind == ruleset.Accept) != (d.Outcome.Verdict == nft.Allow) {
		return s, fmt.Errorf("node %s, %s of %s: the compiled decision says %s (%s) but the table's walk ends in %s",
			node, dir, d.Endpoint, d.Outcome.Verdict, d.Outcome.Reason, v)
	}
	for _, st := range steps {
		step := Step{Chain: st.Chain, ChainComment: st.ChainComment, Rule: st.Rule, Statement: st.Text, Verdict: st.Verdict.String()}
		for _, f := range st.Found {
			step.Lookups = append(step.Lookups, Lookup{Set: f.Set, SetComment: f.SetComment, Element: f.ElementText})
		}
		s.NFTables = append(s.NFTables, step)
	}
	return s, nil
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
		if slices.Contains(e.Addrs, a) && (found == nil || e.Running && !found.Running ||
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
