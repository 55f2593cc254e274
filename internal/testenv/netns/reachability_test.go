package netns

import (
	"strings"
	"testing"
)

func TestReachabilitySummary(t *testing.T) {
	ks := []string{"x/a", "x/b", "y/c"}
	all := func(r *Reachability, v bool) {
		for _, f := range ks {
			for _, to := range ks {
				r.Observe(f, to, v)
			}
		}
	}
	tests := []struct {
		name      string
		def       bool
		expect    func(r *Reachability)
		observe   func(r *Reachability)
		wrong     int
		contains  []string
		notInside []string
	}{
		{
			name:    "all connected as expected",
			def:     true,
			observe: func(r *Reachability) { all(r, true) },
			wrong:   0,
			contains: []string{
				"-   x/a x/b y/c\nx/a .   .   .\n",
			},
			notInside: []string{"wrong cells"},
		},
		{
			name:   "isolated destination, one cell wrong",
			def:    true,
			expect: func(r *Reachability) { r.ExpectAllIngress("y/c", false); r.Expect("y/c", "y/c", true) },
			observe: func(r *Reachability) {
				all(r, true)
				r.Observe("x/a", "y/c", false)
			},
			wrong: 1,
			contains: []string{
				"x/b -> y/c: expected blocked, observed connected",
				"1 wrong\n-   x/a x/b y/c\nx/a .   .   .\nx/b .   .   X\n",
			},
		},
		{
			name:   "egress deny from one source, all right",
			def:    true,
			expect: func(r *Reachability) { r.ExpectAllEgress("x/a", false) },
			observe: func(r *Reachability) {
				all(r, true)
				for _, to := range ks {
					r.Observe("x/a", to, false)
				}
			},
			wrong:    0,
			contains: []string{"x/a X   X   X\n"},
		},
		{
			name: "unobserved cells are wrong, unobserved self cells are ignored",
			def:  false,
			observe: func(r *Reachability) {
				r.Observe("x/a", "x/b", false)
			},
			wrong: 5,
			contains: []string{
				"x/b -> x/a: expected blocked, not observed",
				"x/a -   .   ?\n",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReachability(ks, tt.def)
			if tt.expect != nil {
				tt.expect(r)
			}
			tt.observe(r)
			wrong, table := r.Summary()
			if wrong != tt.wrong {
				t.Errorf("wrong = %d, want %d\n%s", wrong, tt.wrong, table)
			}
			for _, s := range tt.contains {
				if !strings.Contains(table, s) {
					t.Errorf("table lacks %q:\n%s", s, table)
				}
			}
			for _, s := range tt.notInside {
				if strings.Contains(table, s) {
					t.Errorf("table has %q:\n%s", s, table)
				}
			}
		})
	}
}
