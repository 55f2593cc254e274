package sync

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// typeMeta is LoadDir's MetaFactory: it finds a JSON document's apiVersion and kind as
// kjson.DefaultMetaFactory does, by reading the keys of the top-level object instead of decoding
// the whole document with encoding/json (the serializer decodes it again, into its type:
// DefaultMetaFactory's pass was a tenth of a render's CPU). It reads the plain case — an object
// whose keys and whose apiVersion and kind strings are ASCII without escapes — and hands
// anything else (another value at the top, an escape, a non-ASCII key, apiVersion or kind of
// another type, invalid JSON) to DefaultMetaFactory, whose answer and error are then the
// document's. Keys match as encoding/json matches them, ignoring case; the last one counts.
// data is valid JSON, as the serializer's input in LoadDir always is (written by the YAML subset
// or by sigs.k8s.io/yaml, or a List item of such): TestTypeMetaMatchesDefault and FuzzTypeMeta
// hold the equivalence for valid JSON.
type typeMeta struct{}

func (typeMeta) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	apiVersion, kind, ok := topLevelTypeMeta(data)
	if !ok {
		return kjson.DefaultMetaFactory.Interpret(data)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// topLevelTypeMeta reads apiVersion and kind from the top-level object of data; ok is false
// where typeMeta leaves data to DefaultMetaFactory.
func topLevelTypeMeta(data []byte) (apiVersion, kind string, ok bool) {
	i := skipJSONSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return "", "", false
	}
	i = skipJSONSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return "", "", skipJSONSpace(data, i+1) == len(data)
	}
	for i < len(data) {
		key, n, ok := plainJSONString(data, i)
		if !ok {
			return "", "", false
		}
		i = skipJSONSpace(data, n)
		if i == len(data) || data[i] != ':' {
			return "", "", false
		}
		i = skipJSONSpace(data, i+1)
		isVersion, isKind := strings.EqualFold(key, "apiVersion"), strings.EqualFold(key, "kind")
		if isVersion || isKind {
			v, n, ok := plainJSONString(data, i)
			if !ok {
				return "", "", false
			}
			if isVersion {
				apiVersion = v
			} else {
				kind = v
			}
			i = n
		} else if i = skipJSONValue(data, i); i < 0 {
			return "", "", false
		}
		i = skipJSONSpace(data, i)
		switch {
		case i == len(data):
			return "", "", false
		case data[i] == ',':
			i = skipJSONSpace(data, i+1)
		case data[i] == '}':
			return apiVersion, kind, skipJSONSpace(data, i+1) == len(data)
		default:
			return "", "", false
		}
	}
	return "", "", false
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainJSONString reads the string at data[i] if it is printable ASCII without escapes; n is
// the index after it.
func plainJSONString(data []byte, i int) (s string, n int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return string(data[i+1 : j]), j + 1, true
		case c == '\\' || c < ' ' || c > '~':
			return "", 0, false
		}
	}
	return "", 0, false
}

// skipJSONValue returns the index after the JSON value at data[i] (the delimiter that follows
// it), or -1 where data ends first.
func skipJSONValue(data []byte, i int) int {
	depth := 0
	for ; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
			if i >= len(data) {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}
