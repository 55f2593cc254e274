package ruleset

import (
	"testing"
)

// TestReplaceRoundTrip: the kernel lists a replaced table as Render prints it.
func TestReplaceRoundTrip(t *testing.T) {
	c, ns := openConn(t)
	want := sampleTable("roundtrip")
	if err := c.Replace(want); err != nil {
		t.Fatalf("Replace: %v", err)
	}
	assertKernel(t, ns, want)
	// what the kernel lists parses again
	nftIn(t, ns, nftIn(t, ns, "", "list", "table", "inet", want.Name), "-c", "-f", "-")
	if got, w := Render(c.Committed()), Render(want); got != w {
		t.Errorf("mirror differs from desired")
	}
	// Replacing again (table present) is one more transaction and leaves the same table.
	if err := c.Replace(want); err != nil {
		t.Fatalf("second Replace: %v", err)
	}
	assertKernel(t, ns, want)
	if c.Batches() != 2 {
		t.Errorf("batches = %d, want 2", c.Batches())
	}
}
