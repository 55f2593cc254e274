package bench_test

import (
	"slices"
	"strings"
	"testing"
)

func TestRatioStats(t *testing.T) {
	// 15 rounds: the interval is the 4th to the 12th smallest
	var xs []float64
	for i := range 15 {
		xs = append(xs, 0.90+0.01*float64((i*7)%15)) // 0.90 … 1.04, shuffled
	}
	orig := slices.Clone(xs)
	st := ratioStats(xs)
	if !slices.Equal(xs, orig) {
		t.Error("ratioStats reordered its input")
	}
	want := ratioStat{median: 0.97, lo: 0.93, hi: 1.01, min: 0.90, max: 1.04}
	const eps = 1e-9
	for _, c := range [][2]float64{{st.median, want.median}, {st.lo, want.lo}, {st.hi, want.hi}, {st.min, want.min}, {st.max, want.max}} {
		if c[0] < c[1]-eps || c[0] > c[1]+eps {
			t.Fatalf("ratioStats = %+v, want %+v", st, want)
		}
	}
	for _, c := range []struct {
		st     ratioStat
		target float64
		want   string
	}{
		{ratioStat{median: 0.96, lo: 0.93, hi: 0.99}, 0.95, "yes"},
		{ratioStat{median: 0.94, lo: 0.91, hi: 0.97}, 0.95, "NO (within noise"},
		{ratioStat{median: 0.90, lo: 0.88, hi: 0.93}, 0.95, "NO"},
	} {
		if got := c.st.verdict(c.target); !strings.HasPrefix(got, c.want) || (c.want == "NO" && got != "NO") {
			t.Errorf("%+v.verdict(%v) = %q, want %q", c.st, c.target, got, c.want)
		}
	}
	// too few rounds for the interval: their range
	if st := ratioStats([]float64{1.0, 0.9, 1.1}); st.lo != 0.9 || st.hi != 1.1 || st.median != 1.0 {
		t.Errorf("ratioStats of 3 = %+v, want the median 1 within 0.9–1.1", st)
	}
}

func TestMonitorLineParts(t *testing.T) {
	// a line of `nft monitor elements` may list several elements, concatenations and comments
	_, elems, _ := strings.Cut(`add element inet nftpolicy sel_1 { 10.0.0.1 comment "a/b", 10.0.0.2 . tcp . 80, fd00::1 }`, "{")
	got := strings.FieldsFunc(elems, isElementSeparator)
	for _, want := range []string{"10.0.0.1", "10.0.0.2", "fd00::1"} {
		if !slices.Contains(got, want) {
			t.Errorf("parts %q lack %s", got, want)
		}
	}
}
