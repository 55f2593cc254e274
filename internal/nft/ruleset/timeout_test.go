package ruleset

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestTimeoutSetElementsStayTheOwners: a timeout set is declared `flags timeout` without
// elements; the elements another owner adds (here nft, as the agent's DNS observer would) are
// kept by a Commit of other changes, not taken for drift by Verify, not reported by a Monitor,
// and carried by a Replace (a repair) with the time they had left.
func TestTimeoutSetElementsStayTheOwners(t *testing.T) {
	const name = "timed"
	c, ns := openConn(t)
	desired := sampleTable(name)
	desired.Sets["fqdn4_x"] = &Set{Name: "fqdn4_x", Key: KeyIPDaddr, Timeout: true, Comment: "addresses DNS answered for example.com"}
	desired.Sets["fqdn6_x"] = &Set{Name: "fqdn6_x", Key: KeyIP6Daddr, Timeout: true}
	if err := c.Replace(desired); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	assertKernel(t, ns, desired)
	if !strings.Contains(Render(desired), "set fqdn4_x {\n\t\ttype ipv4_addr\n\t\tflags timeout\n") {
		t.Fatalf("rendered without flags timeout:\n%s", Render(desired))
	}
	_, out := startMonitor(t, c, name)

	nftIn(t, ns, "add element inet timed fqdn4_x { 192.0.2.1 timeout 1h, 192.0.2.2 timeout 1h }\n"+
		"add element inet timed fqdn6_x { 2001:db8::1 timeout 1h }\n", "-f", "-")
	barrier(t, ns, out, name, "10.9.9.9") // the owner's elements were not reported
	desired.Sets["local_v4"].Put(Element{ElementKey: addrKey("10.9.9.9")})

	kept := func(when string) {
		t.Helper()
		got := nftIn(t, ns, "", "list", "set", "inet", name, "fqdn4_x")
		for _, a := range []string{"192.0.2.1", "192.0.2.2"} {
			m := regexp.MustCompile(regexp.QuoteMeta(a) + ` timeout \S+ expires (\d+)m`).FindStringSubmatch(got)
			if m == nil {
				t.Fatalf("%s: element %s with its timeout gone:\n%s", when, a, got)
			}
			if n, _ := strconv.Atoi(m[1]); n < 55 {
				t.Errorf("%s: element %s expires in %s minutes, want the time it had left (≈ 59)", when, a, m[1])
			}
		}
		if got := nftIn(t, ns, "", "list", "set", "inet", name, "fqdn6_x"); !strings.Contains(got, "2001:db8::1 timeout ") {
			t.Fatalf("%s: IPv6 element gone:\n%s", when, got)
		}
	}

	desired.Sets["local_v4"].Put(Element{ElementKey: addrKey("10.8.0.1")})
	if err := c.Commit(desired, nil); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	kept("after a commit of everything")
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify = %v, %v; want no drift (the elements are the owner's)", drift, err)
	}
	if err := c.Replace(desired); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	kept("after a replace")
	if drift, err := c.Verify(); err != nil || drift {
		t.Fatalf("Verify after the replace = %v, %v; want no drift", drift, err)
	}
}
