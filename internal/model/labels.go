package model

import (
	"encoding/binary"
	"iter"
	"slices"
	"strings"
)

// Labels is an immutable label set: its pairs sorted by key, each key and value prefixed with its
// length, in one string. It is what an endpoint carries because clusters hold 100,000s of them: a
// Go map of three labels takes ≈ 340 bytes and a string per key and value; this takes the encoded
// length (≈ 50 bytes for three labels) in one allocation and no pointers for the collector to
// follow. Equal label sets have equal encodings, so == compares them. The zero value is the
// empty set.
//
// Pass it to a selector as a pointer (&l): the pointer satisfies selector.Labels without an
// allocation.
type Labels struct{ enc string }

// LabelsOf returns the label set of m (nil or empty: the empty set).
func LabelsOf(m map[string]string) Labels {
	if len(m) == 0 {
		return Labels{}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	n := 0
	for _, k := range keys {
		n += uvarintLen(len(k)) + len(k) + uvarintLen(len(m[k])) + len(m[k])
	}
	var b strings.Builder // one allocation of the exact size, which String does not copy
	b.Grow(n)
	var lb [binary.MaxVarintLen64]byte
	for _, k := range keys {
		for _, s := range [2]string{k, m[k]} {
			b.Write(binary.AppendUvarint(lb[:0], uint64(len(s))))
			b.WriteString(s)
		}
	}
	return Labels{enc: b.String()}
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// next decodes the string at enc[i:] and returns it with the index after it.
func (l Labels) next(i int) (string, int) {
	n := 0
	for shift := 0; ; shift += 7 { // the uvarint AppendUvarint wrote
		c := l.enc[i]
		i++
		n |= int(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return l.enc[i : i+n], i + n
}

// All yields the pairs in key order.
func (l Labels) All() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for i := 0; i < len(l.enc); {
			var k, v string
			k, i = l.next(i)
			v, i = l.next(i)
			if !yield(k, v) {
				return
			}
		}
	}
}

// Get returns the value of key k (selector.Labels).
func (l Labels) Get(k string) (string, bool) {
	for i := 0; i < len(l.enc); {
		var key, v string
		key, i = l.next(i)
		v, i = l.next(i)
		if c := strings.Compare(key, k); c >= 0 {
			return v, c == 0
		}
	}
	return "", false
}

// Len is the number of labels.
func (l Labels) Len() int {
	n := 0
	for range l.All() {
		n++
	}
	return n
}

// Map returns the labels as a new map (nil when empty).
func (l Labels) Map() map[string]string {
	if l.enc == "" {
		return nil
	}
	m := map[string]string{}
	for k, v := range l.All() {
		m[k] = v
	}
	return m
}

// String formats the labels as k=v pairs in key order.
func (l Labels) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for k, v := range l.All() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + v)
	}
	b.WriteByte('}')
	return b.String()
}
