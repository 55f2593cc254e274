package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// fakeView gives the model pods fixed addresses, as a netns cluster would: 10.0.<ns>.<pod+1>
// or fd00:10:<ns>::<pod+1>.
type fakeView struct{ is6 bool }

func (v fakeView) IP(key string) netip.Addr {
	ns, name := splitKey(key)
	n := strings.Index("xyz", ns)
	p := strings.Index("abc", name) + 1
	if n < 0 || p < 1 {
		panic("fakeView: unknown pod " + key)
	}
	if v.is6 {
		return netip.MustParseAddr(fmt.Sprintf("fd00:10:%d::%d", n, p))
	}
	return netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", n, p))
}

// TestCaseTable replays every case on the reference evaluator, on both address families, and
// checks that it reproduces upstream's expected tables: on upstream's own topology with
// upstream's calls only, and on the 9-pod model with Model9's calls added. A transcription error
// in a policy or an expectation fails here, without root.
func TestCaseTable(t *testing.T) {
	for _, fam := range []struct {
		name string
		view fakeView
	}{{"IPv4", fakeView{}}, {"IPv6", fakeView{is6: true}}} {
		t.Run(fam.name, func(t *testing.T) {
			for _, c := range cases() {
				t.Run(caseName(c), func(t *testing.T) {
					checkCase(t, c, c.Pods, false, fam.view)
					checkCase(t, c, modelPods(), true, fam.view)
				})
			}
		})
	}
}

func checkCase(t *testing.T, c Case, pods []string, model9 bool, v View) {
	t.Helper()
	o := newOracle(pods, v.IP)
	for i, s := range c.Steps {
		if err := o.apply(s, v); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		for _, p := range s.Probes {
			exp := expected(p, pods, model9)
			wrong, report := compare(exp, func(from, to string) bool { return o.allowed(from, to, p.Protocol, p.Port) })
			if wrong > 0 {
				t.Errorf("step %d (%s), %s/%d, %d pods (model9=%v): the evaluator disagrees with the expectation:\n%s",
					i+1, s.By, p.Protocol, p.Port, len(pods), model9, report)
			}
			if model9 && p.Model9 != nil {
				// Model9 must be needed: upstream's calls alone must be wrong on 9 pods.
				up := expected(Probe{Expect: p.Expect}, pods, false)
				if w, _ := compare(up, func(from, to string) bool { return o.allowed(from, to, p.Protocol, p.Port) }); w == 0 {
					t.Errorf("step %d, %s/%d: Model9 is set but upstream's calls already give the 9-pod table", i+1, p.Protocol, p.Port)
				}
			}
		}
	}
}

// expected builds a probe's expected table: all-true, upstream's calls, then Model9's.
func expected(p Probe, pods []string, model9 bool) *Reachability {
	r := NewReachability(pods, true)
	p.Expect(r)
	if model9 && p.Model9 != nil {
		p.Model9(r)
	}
	return r
}

func caseName(c Case) string {
	if c.Context == "" {
		return fmt.Sprintf("%03d %s", c.ID, c.Name)
	}
	return fmt.Sprintf("%03d %s %s", c.ID, c.Context, c.Name)
}

// TestCaseTableShape checks the table against upstream's counts and the model: 42 TCP, 3 UDP, 3
// SCTP cases, unique IDs, topologies within the model, and every probe on a served port.
func TestCaseTableShape(t *testing.T) {
	counts := map[string]int{}
	ids := map[int]bool{}
	for _, c := range cases() {
		counts[c.Context]++
		if ids[c.ID] {
			t.Errorf("duplicate case ID %d", c.ID)
		}
		ids[c.ID] = true
		if c.Name == "" || len(c.Steps) == 0 || len(c.Pods) == 0 {
			t.Errorf("case %d: empty name, steps or topology", c.ID)
		}
		for _, p := range c.Pods {
			if !contains(modelPods(), p) {
				t.Errorf("case %d: pod %s is not in the model", c.ID, p)
			}
		}
		for i, s := range c.Steps {
			if len(s.Probes) == 0 {
				t.Errorf("case %d step %d: no probe", c.ID, i+1)
			}
			for _, p := range s.Probes {
				if p.Expect == nil || (p.Port != 80 && p.Port != 81) {
					t.Errorf("case %d step %d: probe %s/%d has no expectation or an unserved port", c.ID, i+1, p.Protocol, p.Port)
				}
			}
		}
	}
	want := map[string]int{"": 42, ctxUDP: 3, ctxSCTP: 3}
	for ctx, n := range want {
		if counts[ctx] != n {
			t.Errorf("context %q: %d cases, upstream has %d", ctx, counts[ctx], n)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCompareReport shows that a wrong expectation fails with upstream-style tables: one wrong
// cell is counted, marked in the comparison table, and loopback is never counted.
func TestCompareReport(t *testing.T) {
	pods := []string{"x/a", "x/b", "y/a"}
	exp := NewReachability(pods, true)
	exp.ExpectAllIngress("x/a", false)
	observed := func(from, to string) bool { return to != "x/a" || from == "y/a" } // y/a gets through
	wrong, report := compare(exp, observed)
	if wrong != 1 {
		t.Fatalf("wrong = %d, want 1 (y/a->x/a); report:\n%s", wrong, report)
	}
	for _, want := range []string{
		"1 wrong",
		"  y/a -> x/a: expected blocked, observed connected",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	// Loopback differences are ignored.
	if w, _ := compare(exp, func(from, to string) bool { return from == to || exp.Get(from, to) }); w != 0 {
		t.Errorf("loopback counted: wrong = %d", w)
	}
}

// TestDocListsCases keeps doc.go's case list true: every case appears there as "<ID> <name>".
func TestDocListsCases(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases() {
		if line := "//\t" + caseName(c) + "\n"; !strings.Contains(string(doc), line) {
			t.Errorf("doc.go does not list %q", caseName(c))
		}
	}
}
