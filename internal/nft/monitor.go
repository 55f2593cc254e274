package nft

import (
	"errors"

	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// Monitor subscribes to the kernel's reports of changes that other processes make to the
// dataplane's table (ruleset.Monitor), delivered to out: the caller runs it and answers a
// reported change with Repair, a report that changes may have gone unreported with Resync. It
// needs the kernel connection of New; the dataplane's own commits are not reported.
func (d *Dataplane) Monitor(out chan<- ruleset.TableChange) (*ruleset.Monitor, error) {
	c, ok := d.conn.(*ruleset.Conn)
	if !ok {
		return nil, errors.New("monitoring the table: the dataplane has no kernel connection")
	}
	return c.Monitor(d.table.Name, out)
}

// Repair replaces the table with the desired one in one transaction without reading it back
// first: the answer to the kernel's report that another process changed it, which makes the
// read-back of Resync (seconds for hundreds of thousands of elements) needless. Before in-sync
// it does nothing: the first commit replaces the table.
func (d *Dataplane) Repair() error {
	if d.conn == nil || !d.inSync {
		return nil
	}
	return d.replace()
}
