package fqdn

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// HoldPriority is the forward- and output-hook priority of the hold chains: before any policy
// chain, so an answer is copied (and, held, dropped) whatever a later chain would do with it. A
// drop in any table's chain is final; the answer sent on later leaves through the output path.
const HoldPriority = -10

// InstallHold writes, in the network namespace netnsFD (< 0: the current one), the inet table
// named table of the hold: HoldSet and two chains whose rules copy DNS answers to the NFLOG
// group. The forward chain "hold" takes the answers a resolver elsewhere (a pod, another host)
// sends to the node's pods — `udp sport @fqdn_hold meta length <= 1280 log group N drop`, then
// `udp sport @fqdn_hold log group N`, and copies TCP segments from port 53 without holding
// them — `tcp sport @fqdn_hold log group N`. The output chain "hold_out" takes, with the same three
// rules behind `meta oif != lo meta skuid != InjectUID`, the answers a resolver on the node's own
// network (node-local-dns on the host network) sends out of the node: to its pods, or to other
// nodes' pods, which their nodes see in forward; never an answer to the node's own processes
// (over lo), nor the answers the Injector sends on (its sockets are InjectUID's). It replaces a
// table of that name in one batch. The table is the agent's alone and never changes while it
// runs; the pattern sets live in the policy table, whose rules look them up.
func InstallHold(netnsFD int, table string, group uint16) error {
	c, err := conn(netnsFD)
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	t := &nftables.Table{Name: table, Family: nftables.TableFamilyINet}
	c.AddTable(t)
	c.DelTable(t)
	c.AddTable(t)
	set := &nftables.Set{Table: t, Name: HoldSet, KeyType: nftables.TypeInetService, HasTimeout: true}
	if err := c.AddSet(set, nil); err != nil {
		return fmt.Errorf("fqdn: declaring set %s: %w", HoldSet, err)
	}
	prio := nftables.ChainPriority(HoldPriority)
	accept := nftables.ChainPolicyAccept
	fwd := c.AddChain(&nftables.Chain{Name: "hold", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: &prio, Policy: &accept})
	out := c.AddChain(&nftables.Chain{Name: "hold_out", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: &prio, Policy: &accept})
	// leaving by another interface than lo (ifindex 1 in every namespace), from no Injector
	local := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIF, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, 1)},
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, InjectUID)},
	}
	sport := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}
	log := &expr.Log{Key: 1 << unix.NFTA_LOG_GROUP, Group: group}
	held := append(append([]expr.Any{}, sport...),
		&expr.Meta{Key: expr.MetaKeyLEN, Register: 1},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: binary.BigEndian.AppendUint32(nil, HoldMaxLength)},
		log, &expr.Verdict{Kind: expr.VerdictDrop})
	copied := append(append([]expr.Any{}, sport...), log)
	// DNS over TCP: copied, never held (a dropped segment would be sent again by its sender)
	tcp := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		log,
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: tcp})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append([]expr.Any{}, local...), tcp...)})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: held})
	c.AddRule(&nftables.Rule{Table: t, Chain: fwd, Exprs: copied})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append([]expr.Any{}, local...), held...)})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(append([]expr.Any{}, local...), copied...)})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("fqdn: writing the hold table %s: %w", table, err)
	}
	return nil
}

// RemoveHold deletes the hold's table; none is no error.
func RemoveHold(netnsFD int, table string) error {
	c, err := conn(netnsFD)
	if err != nil {
		return err
	}
	defer c.CloseLasting()
	c.DelTable(&nftables.Table{Name: table, Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("fqdn: removing the hold table %s: %w", table, err)
	}
	return nil
}

// conn connects to nftables in the network namespace netnsFD (< 0: the current one).
func conn(netnsFD int) (*nftables.Conn, error) {
	var opts []nftables.ConnOption
	if netnsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(netnsFD))
	}
	c, err := nftables.New(append(opts, nftables.AsLasting())...)
	if err != nil {
		return nil, fmt.Errorf("fqdn: connecting to nftables: %w", err)
	}
	return c, nil
}
