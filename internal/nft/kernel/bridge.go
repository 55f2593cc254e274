package kernel

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync/atomic"

	gnft "github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// The bridge companion: a `bridge` family table of the inet table's name that checks anti-spoofing
// and fail-closed ingress on bridge ports, which only the bridge family sees by name (the inet
// hooks, entered through br_netfilter, see the bridge as both interfaces). It is stateless (this
// kernel has no conntrack in the bridge family) and holds, for each checked workload prefix:
//
//	table bridge nftpolicy
//	  set sources_v4, sources_v6     port . address of each local pod (the inet table's sources)
//	  chain prerouting   hook prerouting priority filter + 7; policy accept
//	      iifname "<prefix>*" meta protocol ip ip saddr != 0.0.0.0
//	          iifname . ip saddr != @sources_v4 counter drop
//	      iifname "<prefix>*" meta protocol ip6 ip6 saddr != fe80::/10 ip6 saddr != ::
//	          iifname . ip6 saddr != @sources_v6 counter drop
//	  chain postrouting  hook postrouting priority filter + 8; policy accept
//	      oifname "<prefix>*" ether daddr & 01:00:00:00:00:00 == 0 (unicast) meta protocol ip
//	          oifname . ip daddr != @sources_v4 counter drop
//	      oifname "<prefix>*" … meta protocol ip6 ip6 daddr != fe80::/10
//	          oifname . ip6 daddr != @sources_v6 counter drop
//
// A frame from a pod's port must carry its pod's source address (or none yet: DHCP's 0.0.0.0,
// IPv6's :: and link-local sources, which neighbour discovery uses and no router forwards); a
// unicast frame to a pod's port must be addressed to its pod; ARP, broadcast and multicast pass.
// Ports of other names are not looked at. The table is written whole, in one transaction of its
// own, after each commit of the inet table that changed what it holds (the checked prefixes, the
// sources), and deleted once no prefix is checked: tens to hundreds of elements per node.
const (
	bridgeChainSpoofed  = "prerouting"
	bridgeChainIngress  = "postrouting"
	bridgePriorityEgr   = -200 + 7 // bridge family's filter priority + 7
	bridgePriorityIngr  = -200 + 8
	bridgeReasonSpoofed = "bridge port: spoofed source, or a port without a programmed endpoint"
	bridgeReasonIngress = "bridge port: to a port without a programmed endpoint"
)

// bridgeCompanion writes the bridge companion table of one network namespace.
type bridgeCompanion struct {
	name    string
	netnsFD int    // < 0: the current namespace
	written []byte // digest of what the kernel holds; nil: no table written
	// prefixes are the checked prefixes the table was last written (or deleted) for
	prefixes []string
	live     atomic.Bool // a table is written: what the counter reads, on any goroutine, look at
}

// desired lists the table's content from the builder: the checked prefixes and the sources
// elements, sorted, and a digest of both.
func bridgeContent(b *nft.Builder) (prefixes []string, v4, v6 []ruleset.Element, digest []byte) {
	prefixes = b.CheckedPrefixes()
	t := b.Table()
	collect := func(name string) []ruleset.Element {
		s := t.Sets[name]
		if s == nil {
			return nil
		}
		els := slices.Collect(s.All())
		slices.SortFunc(els, func(x, y ruleset.Element) int {
			return cmp.Or(cmp.Compare(x.Ifname, y.Ifname), x.Addr.Compare(y.Addr))
		})
		return els
	}
	v4, v6 = collect(nft.SourcesV4), collect(nft.SourcesV6)
	var d bytes.Buffer
	for _, p := range prefixes {
		fmt.Fprintf(&d, "p %s\n", p)
	}
	for _, e := range append(slices.Clone(v4), v6...) {
		fmt.Fprintf(&d, "e %s %s %s\n", e.Ifname, e.Addr, e.Comment)
	}
	return prefixes, v4, v6, d.Bytes()
}

func (c *bridgeCompanion) conn() (*gnft.Conn, error) {
	if c.netnsFD >= 0 {
		return gnft.New(gnft.WithNetNSFd(c.netnsFD))
	}
	return gnft.New()
}

// sync brings the kernel's companion table up to date with the builder's committed table; force
// writes it even when its content did not change (after a replace of the inet table). Without
// force, sourcesChanged says whether the commit named a sources set: if not, and the checked
// prefixes are the same, nothing is looked at — the per-commit cost is a comparison of the
// prefixes, not the sort and digest of every sources element.
func (c *bridgeCompanion) sync(b *nft.Builder, force, sourcesChanged bool) error {
	if !force && !sourcesChanged && slices.Equal(b.CheckedPrefixes(), c.prefixes) {
		return nil
	}
	prefixes, v4, v6, digest := bridgeContent(b)
	c.prefixes = prefixes
	if len(prefixes) == 0 {
		if c.written == nil {
			return nil
		}
		return c.delete()
	}
	if !force && bytes.Equal(digest, c.written) {
		return nil
	}
	conn, err := c.conn()
	if err != nil {
		return fmt.Errorf("bridge table %s: connecting: %w", c.name, err)
	}
	defer conn.CloseLasting()
	table := &gnft.Table{Family: gnft.TableFamilyBridge, Name: c.name}
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)
	sets := map[bool]*gnft.Set{}
	for _, is6 := range []bool{false, true} {
		name, els := nft.SourcesV4, v4
		if is6 {
			name, els = nft.SourcesV6, v6
		}
		s := &gnft.Set{Table: table, Name: name, Concatenation: true, KeyType: ruleset.IfnameAddrType(is6),
			Comment: "bridge port . address of each local pod"}
		sets[is6] = s
		if err := conn.AddSet(s, nil); err != nil {
			return fmt.Errorf("bridge table %s: set %s: %w", c.name, name, err)
		}
		for chunk := range slices.Chunk(els, 200) {
			vals := make([]gnft.SetElement, len(chunk))
			for i, e := range chunk {
				vals[i] = gnft.SetElement{Key: ruleset.IfnameAddrKey(e.Ifname, e.Addr), Comment: e.Comment}
			}
			if err := conn.SetAddElements(s, vals); err != nil {
				return fmt.Errorf("bridge table %s: elements of %s: %w", c.name, name, err)
			}
		}
	}
	accept := gnft.ChainPolicyAccept
	egr := conn.AddChain(&gnft.Chain{Table: table, Name: bridgeChainSpoofed, Type: gnft.ChainTypeFilter,
		Hooknum: gnft.ChainHookPrerouting, Priority: gnft.ChainPriorityRef(bridgePriorityEgr), Policy: &accept})
	ingr := conn.AddChain(&gnft.Chain{Table: table, Name: bridgeChainIngress, Type: gnft.ChainTypeFilter,
		Hooknum: gnft.ChainHookPostrouting, Priority: gnft.ChainPriorityRef(bridgePriorityIngr), Policy: &accept})
	for _, p := range prefixes {
		for _, is6 := range []bool{false, true} {
			spoof, err := spoofCheck(p, is6, sets[is6])
			if err != nil {
				return fmt.Errorf("bridge table %s: %w", c.name, err)
			}
			ingress, err := ingressCheck(p, is6, sets[is6])
			if err != nil {
				return fmt.Errorf("bridge table %s: %w", c.name, err)
			}
			conn.AddRule(&gnft.Rule{Table: table, Chain: egr, Exprs: spoof,
				UserData: userdata.AppendString(nil, userdata.TypeComment, bridgeReasonSpoofed)})
			conn.AddRule(&gnft.Rule{Table: table, Chain: ingr, Exprs: ingress,
				UserData: userdata.AppendString(nil, userdata.TypeComment, bridgeReasonIngress)})
		}
	}
	if err := conn.Flush(); err != nil {
		c.written = nil
		return fmt.Errorf("writing bridge table %s: %w", c.name, err)
	}
	c.written = digest
	c.live.Store(true)
	return nil
}

// delete removes the companion table (none: nothing to do).
func (c *bridgeCompanion) delete() error {
	conn, err := c.conn()
	if err != nil {
		return fmt.Errorf("bridge table %s: connecting: %w", c.name, err)
	}
	defer conn.CloseLasting()
	table := &gnft.Table{Family: gnft.TableFamilyBridge, Name: c.name}
	conn.AddTable(table) // the delete cannot fail on a missing table
	conn.DelTable(table)
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("deleting bridge table %s: %w", c.name, err)
	}
	c.written, c.prefixes = nil, nil
	c.live.Store(false)
	return nil
}

// denied reads the companion's drop counters by reason (nothing while it is not written).
func (c *bridgeCompanion) denied(into map[string]uint64) error {
	if !c.live.Load() {
		return nil
	}
	conn, err := c.conn()
	if err != nil {
		return err
	}
	defer conn.CloseLasting()
	table := &gnft.Table{Family: gnft.TableFamilyBridge, Name: c.name}
	for chain, reason := range map[string]string{bridgeChainSpoofed: bridgeReasonSpoofed, bridgeChainIngress: bridgeReasonIngress} {
		rules, err := conn.GetRules(table, &gnft.Chain{Table: table, Name: chain})
		if err != nil {
			return fmt.Errorf("reading bridge chain %s: %w", chain, err)
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					into[reason] += ctr.Packets
				}
			}
		}
	}
	return nil
}

const regVerdict = 1

// etherType matches the frame's protocol (`meta protocol ip` / `ip6`).
func etherType(is6 bool) []expr.Any {
	proto := uint16(unix.ETH_P_IP)
	if is6 {
		proto = unix.ETH_P_IPV6
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyPROTOCOL, Register: regVerdict},
		&expr.Cmp{Op: expr.CmpOpEq, Register: regVerdict, Data: binaryutil.BigEndian.PutUint16(proto)},
	}
}

// notLinkLocal6 matches an IPv6 address (at offset off of the network header) outside fe80::/10.
func notLinkLocal6(off uint32) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: regVerdict, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: 2},
		&expr.Bitwise{SourceRegister: regVerdict, DestRegister: regVerdict, Len: 2, Mask: []byte{0xff, 0xc0}, Xor: []byte{0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: regVerdict, Data: []byte{0xfe, 0x80}},
	}
}

// notInSources is `IF . ADDR != @set counter drop`, the interface and address of key.
func notInSources(key ruleset.Key, s *gnft.Set) ([]expr.Any, error) {
	lookup, err := ruleset.LookupExprs(key, s.Name, true)
	if err != nil {
		return nil, err
	}
	return append(lookup, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}), nil
}

// spoofCheck drops a frame from a port of the prefix whose source is not its pod's.
func spoofCheck(prefix string, is6 bool, s *gnft.Set) ([]expr.Any, error) {
	e := append(ruleset.IfnamePrefixMatch(expr.MetaKeyIIFNAME, prefix), etherType(is6)...)
	if is6 {
		e = append(e, notLinkLocal6(8)...)
		e = append(e,
			&expr.Payload{DestRegister: regVerdict, Base: expr.PayloadBaseNetworkHeader, Offset: 8, Len: 16},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: regVerdict, Data: make([]byte, 16)})
		check, err := notInSources(ruleset.KeyIifnameIP6Saddr, s)
		return append(e, check...), err
	}
	e = append(e,
		&expr.Payload{DestRegister: regVerdict, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: regVerdict, Data: make([]byte, 4)})
	check, err := notInSources(ruleset.KeyIifnameIPSaddr, s)
	return append(e, check...), err
}

// ingressCheck drops a unicast frame to a port of the prefix not addressed to its pod.
func ingressCheck(prefix string, is6 bool, s *gnft.Set) ([]expr.Any, error) {
	e := append(ruleset.IfnamePrefixMatch(expr.MetaKeyOIFNAME, prefix),
		&expr.Payload{DestRegister: regVerdict, Base: expr.PayloadBaseLLHeader, Offset: 0, Len: 1},
		&expr.Bitwise{SourceRegister: regVerdict, DestRegister: regVerdict, Len: 1, Mask: []byte{0x01}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: regVerdict, Data: []byte{0}})
	e = append(e, etherType(is6)...)
	if is6 {
		e = append(e, notLinkLocal6(24)...)
		check, err := notInSources(ruleset.KeyOifnameIP6Daddr, s)
		return append(e, check...), err
	}
	check, err := notInSources(ruleset.KeyOifnameIPDaddr, s)
	return append(e, check...), err
}
