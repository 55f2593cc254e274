package main

import (
	"errors"
	"io"
	"net/netip"
	"testing"
)

// The failsafe flags take Felix's cidr form; one that does not parse is a usage error.
func TestFailsafeFlags(t *testing.T) {
	env := func(k string) string { return map[string]string{"NODE_NAME": "a"}[k] }
	c, err := parseRunFlags([]string{"--failsafe-inbound-host-ports=tcp:10.0.0.0/8:22,udp:[fd00::/8]:53",
		"--failsafe-outbound-host-ports=none"}, env, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.FailsafeIn) != 2 || c.FailsafeIn[0].Net != netip.MustParsePrefix("10.0.0.0/8") || c.FailsafeIn[1].Port != 53 ||
		len(c.FailsafeOut) != 0 {
		t.Errorf("failsafes in %v out %v", c.FailsafeIn, c.FailsafeOut)
	}
	if _, err := parseRunFlags([]string{"--failsafe-inbound-host-ports=tcp:10.0.0.0/33:22"}, env, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("a bad net: %v, want a usage error", err)
	}
}
