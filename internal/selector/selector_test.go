package selector

import (
	"testing"
)

var evalCases = []struct {
	sel    string
	labels Map
	want   bool
}{
	{"", Map{}, true},
	{"all()", Map{"a": "b"}, true},
	{"a == 'x'", Map{"a": "x"}, true},
	{"a == 'x'", Map{}, false},
	{"a != 'x'", Map{}, true},
	{"a != 'x'", Map{"a": "x"}, false},
	{"a in {'x', \"y\"}", Map{"a": "y"}, true},
	{"a in {'x'}", Map{}, false},
	{"a not in {'x'}", Map{}, true},
	{"a not in {'x'}", Map{"a": "x"}, false},
	{"has(kubernetes.io/metadata.name)", Map{"kubernetes.io/metadata.name": "ns"}, true},
	{"!has(a)", Map{"a": ""}, false},
	{"a == 'x' || b == 'y' && c == 'z'", Map{"a": "x"}, true},
	{"(a == 'x' || b == 'y') && c == 'z'", Map{"a": "x"}, false},
	{"a contains 'bc'", Map{"a": "abcd"}, true},
	{"a starts with 'ab'", Map{"a": "abcd"}, true},
	{"a ends with 'ab'", Map{"a": "abcd"}, false},
	{"!(a == 'x')", Map{}, true},
}

func TestEvaluate(t *testing.T) {
	for _, c := range evalCases {
		s, err := Parse(c.sel)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.sel, err)
		}
		if got := s.Evaluate(c.labels); got != c.want {
			t.Errorf("%q on %v = %v, want %v", c.sel, c.labels, got, c.want)
		}
		r, err := Parse(s.String())
		if err != nil || !r.Equal(s) || r.ID() != s.ID() {
			t.Errorf("round trip of %q via %q: %v", c.sel, s.String(), err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, s := range []string{"a ==", "a == 'x", "(a == 'x'", "a in {'x'", "has()", "&&", "a = 'x'", "a == 'x' b"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded", s)
		}
	}
}

func TestFromLabelSelector(t *testing.T) {
	type reqs = []Requirement
	cases := []struct {
		labels map[string]string
		exprs  reqs
		on     Map
		want   bool
	}{
		{nil, nil, Map{"a": "b"}, true},
		{map[string]string{"k": ""}, nil, Map{}, false},
		{map[string]string{"k": ""}, nil, Map{"k": ""}, true},
		{nil, reqs{{Key: "k", Operator: OpNotIn, Values: []string{"x"}}}, Map{}, true},
		{nil, reqs{{Key: "k", Operator: OpDoesNotExist}}, Map{"k": "v"}, false},
		{nil, reqs{{Key: "k", Operator: OpIn, Values: []string{"x", "y"}}}, Map{"k": "y"}, true},
		{nil, reqs{{Key: "k", Operator: OpExists}}, Map{"k": ""}, true},
	}
	for _, c := range cases {
		s, err := FromLabelSelector(c.labels, c.exprs)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Evaluate(c.on); got != c.want {
			t.Errorf("%v %v (%s) on %v = %v, want %v", c.labels, c.exprs, s, c.on, got, c.want)
		}
	}
	if _, err := FromLabelSelector(nil, reqs{{Key: "k", Operator: "Bogus"}}); err == nil {
		t.Error("bad operator accepted")
	}
	// a value with both quote characters has no spelling in the grammar (no escapes): refused,
	// never handed on as a selector that does not parse back
	if s, err := FromLabelSelector(map[string]string{"k": `a'b"c`}, nil); err == nil {
		t.Errorf("unexpressible value accepted as %s", s)
	}
	// a key with a blank at its edge reads back as another key (the parser trims blanks): refused,
	// never handed on as a selector that would match the trimmed key
	for _, k := range []string{" pp", "pp ", "p p"} {
		if s, err := FromLabelSelector(map[string]string{k: "b"}, nil); err == nil {
			t.Errorf("key %q accepted as %s", k, s)
		}
	}
}
