package ruleset

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// Count is what one counting rule or set element has counted, with its comment and verdict (a
// plain set's elements have none), and for a rule its chain.
type Count struct {
	Chain   string // the rule's chain; "" for a set element
	Comment string
	Verdict VerdictKind
	Counter
}

// ReadCounts reads, on netlink sockets of its own in the network namespace netnsFD (< 0: the
// current one), the counters of table's named chains, one Count per rule that counts, and of its
// named sets' elements, one per element (sets made with Counter). A reader (a metrics scrape)
// never waits for a commit in progress, nor a commit for it. Chains and sets that are gone are
// skipped. It reads the rules on one socket (openRuleReader) and the elements on another, a dump
// socket as Verify's (dialDumpSocket), whatever the number of chains and sets.
func ReadCounts(netnsFD int, table string, chains, sets []string) ([]Count, error) {
	nc, err := openRuleReader(netnsFD)
	if err != nil {
		return nil, err
	}
	defer nc.CloseLasting()
	t := nfTable(table)
	var out []Count
	for _, name := range chains {
		rules, err := nc.GetRules(t, &nftables.Chain{Table: t, Name: name})
		if err != nil {
			continue // removed since the caller listed it
		}
		for _, r := range rules {
			c := Count{Chain: name}
			counts := false
			for _, e := range r.Exprs {
				switch e := e.(type) {
				case *expr.Counter:
					counts = true
					c.Packets, c.Bytes = e.Packets, e.Bytes
				case *expr.Verdict:
					c.Verdict = verdictKind(int32(e.Kind))
				}
			}
			if counts {
				c.Comment, _ = userdata.GetString(r.UserData, userdata.TypeComment)
				out = append(out, c)
			}
		}
	}
	if len(sets) == 0 {
		return out, nil
	}
	nl, err := dialDumpSocket(netnsFD)
	if err != nil {
		return nil, fmt.Errorf("counters: %w", err)
	}
	defer nl.Close()
	for _, name := range sets {
		err := dumpElements(nl, table, name, func(el *netlink.AttributeDecoder) {
			if c, ok := decodeCount(el); ok {
				out = append(out, c)
			}
		})
		if err != nil {
			continue // removed since the caller listed it
		}
	}
	return out, nil
}

// openRuleReader opens a lasting nftables connection in the network namespace netnsFD (< 0: the
// current one) for a reader's rule dumps: one socket for all of them, as each socket costs a
// switch into the namespace and back. Close it with CloseLasting.
func openRuleReader(netnsFD int) (*nftables.Conn, error) {
	opts := []nftables.ConnOption{nftables.AsLasting()}
	if netnsFD >= 0 {
		opts = append(opts, nftables.WithNetNSFd(netnsFD))
	}
	nc, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("opening a connection for counters: %w", err)
	}
	return nc, nil
}

// decodeCount reads an element's comment, verdict and counter; ok is false for an element without
// a counter (and nft's interval end elements).
func decodeCount(ad *netlink.AttributeDecoder) (Count, bool) {
	var c Count
	counts := false
	counter := func(b []byte) { // NFTA_EXPR_NAME "counter", NFTA_EXPR_DATA {bytes, packets}
		e, err := netlink.NewAttributeDecoder(b)
		if err != nil {
			return
		}
		var name string
		var data []byte
		for e.Next() {
			switch e.Type() {
			case unix.NFTA_EXPR_NAME:
				name = e.String()
			case unix.NFTA_EXPR_DATA:
				data = e.Bytes()
			}
		}
		d, err := netlink.NewAttributeDecoder(data)
		if name != "counter" || err != nil {
			return
		}
		counts = true
		for d.Next() {
			switch d.Type() {
			case unix.NFTA_COUNTER_BYTES:
				c.Bytes = binary.BigEndian.Uint64(d.Bytes())
			case unix.NFTA_COUNTER_PACKETS:
				c.Packets = binary.BigEndian.Uint64(d.Bytes())
			}
		}
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_SET_ELEM_USERDATA:
			c.Comment, _ = userdata.GetString(ad.Bytes(), userdata.NFTNL_UDATA_SET_ELEM_COMMENT)
		case unix.NFTA_SET_ELEM_DATA:
			if code, _, ok := elementVerdict(ad.Bytes()); ok {
				c.Verdict = verdictKind(code)
			}
		case unix.NFTA_SET_ELEM_EXPR:
			counter(ad.Bytes())
		case nftables.NFTA_SET_ELEM_EXPRESSIONS:
			list, err := netlink.NewAttributeDecoder(ad.Bytes())
			if err != nil {
				continue
			}
			for list.Next() {
				if list.Type() == unix.NFTA_LIST_ELEM {
					counter(list.Bytes())
				}
			}
		}
	}
	return c, counts
}

// verdictKind is the kind of a kernel verdict code.
func verdictKind(code int32) VerdictKind {
	switch code {
	case int32(expr.VerdictAccept):
		return Accept
	case int32(expr.VerdictDrop):
		return Drop
	case unix.NFT_RETURN:
		return Return
	case unix.NFT_JUMP:
		return Jump
	case unix.NFT_GOTO:
		return Goto
	}
	return VerdictNone
}
