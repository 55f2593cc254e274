package selector

import "testing"

func FuzzParseSelector(f *testing.F) {
	for _, c := range evalCases {
		f.Add(c.sel)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		r, err := Parse(s.String())
		if err != nil || !r.Equal(s) || r.String() != s.String() {
			t.Fatalf("%q -> %q does not round-trip: %v", in, s.String(), err)
		}
	})
}
