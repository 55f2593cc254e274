package model

import (
	"maps"
	"strings"
	"testing"
)

func TestLabels(t *testing.T) {
	long := strings.Repeat("v", 300) // a length that takes two varint bytes
	for _, m := range []map[string]string{
		nil,
		{"app": "web"},
		{"tier": "db", "app": "web", "pod-template-hash": "h1a2b", "": "empty key", "k": ""},
		{"example.com/long": long, "a": "1"},
	} {
		l := LabelsOf(m)
		if got := l.Map(); !maps.Equal(got, m) || (m == nil) != (got == nil) {
			t.Errorf("LabelsOf(%v).Map() = %v", m, got)
		}
		if l.Len() != len(m) {
			t.Errorf("LabelsOf(%v).Len() = %d", m, l.Len())
		}
		for k, v := range m {
			if got, ok := l.Get(k); !ok || got != v {
				t.Errorf("LabelsOf(%v).Get(%q) = %q, %v", m, k, got, ok)
			}
		}
		for _, absent := range []string{"zzz", "b", "app2", "appa"} {
			if _, in := m[absent]; in {
				continue
			}
			if got, ok := l.Get(absent); ok {
				t.Errorf("LabelsOf(%v).Get(%q) = %q, true", m, absent, got)
			}
		}
		var prev string
		for k := range l.All() {
			if prev != "" && k <= prev {
				t.Errorf("LabelsOf(%v).All() not in key order: %q after %q", m, k, prev)
			}
			prev = k
		}
		if LabelsOf(maps.Clone(m)) != l {
			t.Errorf("equal maps give different Labels: %v", m)
		}
	}
	if LabelsOf(map[string]string{"a": "1"}) == LabelsOf(map[string]string{"a": "2"}) {
		t.Error("different values compare equal")
	}
	if got := LabelsOf(map[string]string{"b": "2", "a": "1"}).String(); got != "{a=1,b=2}" {
		t.Errorf("String() = %q", got)
	}
}

func TestLabelsGetAllocates(t *testing.T) {
	l := LabelsOf(map[string]string{"app": "web", "tier": "db", "pod-template-hash": "h1a2b"})
	var sink string
	if n := testing.AllocsPerRun(100, func() { sink, _ = l.Get("tier") }); n != 0 {
		t.Errorf("Get allocates %v times", n)
	}
	_ = sink
}

func TestLabelsOfAllocatesOnce(t *testing.T) {
	m := map[string]string{"app": "web", "tier": "db", "pod-template-hash": "h1a2b"}
	// the sorted keys and the encoding
	if n := testing.AllocsPerRun(100, func() { _ = LabelsOf(m) }); n > 2 {
		t.Errorf("LabelsOf allocates %v times, want the keys and the encoding", n)
	}
}
