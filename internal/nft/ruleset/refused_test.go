package ruleset

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRefusedObjectNamed: when the kernel refuses a batch, the error names the object whose
// message it refused — an interval set whose elements overlap (EEXIST), a map element that jumps
// to a chain the batch does not make (ENOENT) — in a Replace and in a Commit, and the table in
// force stays the one committed before.
func TestRefusedObjectNamed(t *testing.T) {
	c, ns, committed := committedSample(t, "refused")
	for _, tc := range []struct {
		name    string
		breakIt func(*Table)
		object  Object
		errno   unix.Errno
	}{
		{"overlapping intervals", func(tb *Table) {
			s := tb.Sets["nets_v4"]
			put(s, prefixKey("10.77.0.0/16"), goTo("class_x"), "one")
			put(s, prefixKey("10.77.1.0/24"), goTo("class_x"), "inside the first")
		}, Object{"set", "nets_v4"}, unix.EEXIST},
		{"jump to a missing chain", func(tb *Table) {
			put(tb.Sets["peers_a"], addrKey("10.0.1.9"), goTo("nowhere"), "dangling")
		}, Object{"set", "peers_a"}, unix.ENOENT},
	} {
		for _, op := range []string{"replace", "commit"} {
			t.Run(tc.name+" "+op, func(t *testing.T) {
				bad := sampleTable("refused")
				tc.breakIt(bad)
				var err error
				if op == "replace" {
					err = c.Replace(bad)
				} else {
					err = c.Commit(bad, nil)
				}
				var ke *KernelError
				if !errors.As(err, &ke) {
					t.Fatalf("%s of a broken table: error %v, want a KernelError", op, err)
				}
				if ke.Object != tc.object || ke.Errno != tc.errno {
					t.Errorf("%s: refused %v with %v, want %v with %v (%v)", op, ke.Object, ke.Errno, tc.object, tc.errno, err)
				}
				assertKernel(t, ns, committed)               // the refused batch changed nothing
				if err := c.Replace(committed); err != nil { // and the connection still works
					t.Fatal(err)
				}
			})
		}
	}
}
