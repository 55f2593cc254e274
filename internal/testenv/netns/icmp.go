package netns

import (
	"fmt"

	"golang.org/x/net/icmp"
)

// ICMPConn opens a raw ICMP socket (ICMPv6 with is6) in netnsName, for the tests that send and
// watch ICMP packets: this machine has no ping, and a raw socket sees every ICMP packet that
// reaches the namespace.
func ICMPConn(netnsName string, is6 bool) (*icmp.PacketConn, error) {
	var c *icmp.PacketConn
	err := Do(netnsName, func() error {
		var err error
		if is6 {
			c, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		} else {
			c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("raw ICMP socket in %s: %w", netnsName, err)
	}
	return c, nil
}
