package fqdn

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
)

// SetName is the name of the kernel set that holds pattern's addresses of one family: "fqdn4_"
// or "fqdn6_" and 16 hex digits of the pattern's SHA-256, stable across restarts. The set is
// `type ipv4_addr` (ipv6_addr) with `flags timeout`.
func SetName(pattern string, is6 bool) string { return dataplane.DomainSetName(pattern, !is6) }

// SetWriter writes Changes into the per-pattern sets (SetName) of one inet table, which its owner
// declares; it adds and deletes elements only.
type SetWriter struct {
	conn  *nftables.Conn
	table *nftables.Table
}

// NewSetWriter connects to nftables in the network namespace netnsFD (< 0: the current one) for
// the inet table named table.
func NewSetWriter(netnsFD int, table string) (*SetWriter, error) {
	c, err := conn(netnsFD)
	if err != nil {
		return nil, err
	}
	return &SetWriter{conn: c, table: &nftables.Table{Name: table, Family: nftables.TableFamilyINet}}, nil
}

// Write sends changes in one batch, so the kernel applies all of them or none: an Add sets the
// element's timeout (a new one, or an existing element's, which the kernel replaces), a Delete
// removes an element the Cache evicted.
func (w *SetWriter) Write(changes []Change) error {
	if len(changes) == 0 {
		return nil
	}
	for _, ch := range changes {
		set := &nftables.Set{Table: w.table, Name: SetName(ch.Pattern, ch.Addr.Is6()), HasTimeout: true, KeyType: nftables.TypeIPAddr}
		if ch.Addr.Is6() {
			set.KeyType = nftables.TypeIP6Addr
		}
		el := []nftables.SetElement{{Key: ch.Addr.AsSlice(), Timeout: ch.Timeout}}
		var err error
		if ch.Delete {
			err = w.conn.SetDeleteElements(set, el)
		} else {
			err = w.conn.SetAddElements(set, el)
		}
		if err != nil {
			return fmt.Errorf("fqdn: encoding %s of set %s: %w", ch.Addr, set.Name, err)
		}
	}
	if err := w.conn.Flush(); err != nil {
		return fmt.Errorf("fqdn: writing %d elements to table %s: %w", len(changes), w.table.Name, err)
	}
	return nil
}

// Close releases the connection.
func (w *SetWriter) Close() error { return w.conn.CloseLasting() }

// Element is an address of a pattern's set as the kernel holds it: the timeout it was added
// with and the time it has left before the kernel expires it.
type Element struct {
	Addr             netip.Addr
	Timeout, Expires time.Duration
}

// ReadElements reads pattern's two sets (SetName) of the inet table named table in the network
// namespace netnsFD (< 0: the current one): the addresses, IPv4 first, each family sorted, with
// the time each has left. A set the table does not declare (no rule of the node uses the
// pattern) holds nothing. It costs one netlink dump per set.
func ReadElements(netnsFD int, table, pattern string) ([]Element, error) {
	c, err := conn(netnsFD)
	if err != nil {
		return nil, err
	}
	defer c.CloseLasting()
	t := &nftables.Table{Name: table, Family: nftables.TableFamilyINet}
	var out []Element
	for _, is6 := range []bool{false, true} {
		set, err := c.GetSetByName(t, SetName(pattern, is6))
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("fqdn: reading set %s of table %s: %w", SetName(pattern, is6), table, err)
		}
		els, err := c.GetSetElements(set)
		if err != nil {
			return nil, fmt.Errorf("fqdn: reading the elements of set %s of table %s: %w", set.Name, table, err)
		}
		start := len(out)
		for _, el := range els {
			a, ok := netip.AddrFromSlice(el.Key)
			if !ok {
				continue
			}
			out = append(out, Element{Addr: a, Timeout: el.Timeout, Expires: el.Expires})
		}
		slices.SortFunc(out[start:], func(a, b Element) int { return a.Addr.Compare(b.Addr) })
	}
	return out, nil
}
