package selector

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"sort"
	"strings"
)

// Labels is what a selector is evaluated against.
type Labels interface {
	Get(key string) (value string, ok bool)
}

// Map is a plain label set.
type Map map[string]string

// Get implements Labels.
func (m Map) Get(k string) (string, bool) { v, ok := m[k]; return v, ok }

// KV is a label key/value pair.
type KV struct{ Key, Value string }

type op int

const (
	opAll op = iota
	opAnd
	opOr
	opNot
	opEq
	opNe
	opIn
	opNotIn
	opHas
	opContains
	opStarts
	opEnds
)

type node struct {
	op   op
	key  string
	val  string
	vals []string
	kids []*node
}

// Selector is a parsed selector, immutable after Parse.
type Selector struct {
	root *node
	str  string
	id   string
}

func (n *node) eval(l Labels) bool {
	switch n.op {
	case opAll:
		return true
	case opAnd:
		for _, k := range n.kids {
			if !k.eval(l) {
				return false
			}
		}
		return true
	case opOr:
		for _, k := range n.kids {
			if k.eval(l) {
				return true
			}
		}
		return false
	case opNot:
		return !n.kids[0].eval(l)
	}
	v, ok := l.Get(n.key)
	switch n.op {
	case opHas:
		return ok
	case opEq:
		return ok && v == n.val
	case opNe:
		return !ok || v != n.val
	case opIn:
		return ok && contains(n.vals, v)
	case opNotIn:
		return !ok || !contains(n.vals, v)
	case opContains:
		return ok && strings.Contains(v, n.val)
	case opStarts:
		return ok && strings.HasPrefix(v, n.val)
	case opEnds:
		return ok && strings.HasSuffix(v, n.val)
	}
	return false
}

func contains(vs []string, v string) bool {
	i := sort.SearchStrings(vs, v)
	return i < len(vs) && vs[i] == v
}

func (n *node) render(b *strings.Builder, parent op) {
	switch n.op {
	case opAll:
		b.WriteString("all()")
	case opAnd, opOr:
		paren := parent == opAnd || parent == opNot || (parent == opOr && n.op == opOr)
		if paren {
			b.WriteByte('(')
		}
		sep := " && "
		if n.op == opOr {
			sep = " || "
		}
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(sep)
			}
			k.render(b, n.op)
		}
		if paren {
			b.WriteByte(')')
		}
	case opNot:
		b.WriteByte('!')
		n.kids[0].render(b, opNot)
	case opHas:
		b.WriteString("has(" + n.key + ")")
	case opIn, opNotIn:
		b.WriteString(n.key)
		if n.op == opIn {
			b.WriteString(" in {")
		} else {
			b.WriteString(" not in {")
		}
		for i, v := range n.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(v))
		}
		b.WriteByte('}')
	default:
		b.WriteString(n.key)
		b.WriteString(map[op]string{opEq: " == ", opNe: " != ", opContains: " contains ", opStarts: " starts with ", opEnds: " ends with "}[n.op])
		b.WriteString(quote(n.val))
	}
}

func build(root *node) *Selector {
	var b strings.Builder
	root.render(&b, opAll)
	s := b.String()
	h := sha256.Sum256([]byte(s))
	id := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h[:]))[:16]
	return &Selector{root: root, str: s, id: id}
}

// All returns the selector matching everything.
func All() *Selector { return build(&node{op: opAll}) }

// Evaluate reports whether l matches.
func (s *Selector) Evaluate(l Labels) bool { return s.root.eval(l) }

// String returns the canonical form.
func (s *Selector) String() string { return s.str }

// ID returns a 16-character stable ID of the canonical form.
func (s *Selector) ID() string { return s.id }

// Equal reports canonical equality.
func (s *Selector) Equal(o *Selector) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.str == o.str
}

// MustParse parses or panics.
func MustParse(s string) *Selector {
	sel, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

// And returns the conjunction; nil operands are all().
func And(a, b *Selector) *Selector {
	if a == nil {
		a = All()
	}
	if b == nil {
		b = All()
	}
	return build(normalize(&node{op: opAnd, kids: []*node{a.root, b.root}}))
}

// normalize flattens nested &&/||, drops all() from &&, and collapses single-child nodes.
func normalize(n *node) *node {
	if n.op != opAnd && n.op != opOr {
		return n
	}
	var kids []*node
	for _, k := range n.kids {
		k = normalize(k)
		if n.op == opAnd && k.op == opAll {
			continue
		}
		if k.op == n.op {
			kids = append(kids, k.kids...)
		} else {
			kids = append(kids, k)
		}
	}
	switch len(kids) {
	case 0:
		return &node{op: opAll}
	case 1:
		return kids[0]
	}
	return &node{op: n.op, kids: kids}
}

// RequiredEqualities returns key==value constraints every match must satisfy.
func (s *Selector) RequiredEqualities() []KV {
	var out []KV
	req(s.root, func(n *node) {
		if n.op == opEq {
			out = append(out, KV{n.key, n.val})
		} else if n.op == opIn && len(n.vals) == 1 {
			out = append(out, KV{n.key, n.vals[0]})
		}
	})
	return out
}

// RequiredKeys returns keys every match must carry.
func (s *Selector) RequiredKeys() []string {
	var out []string
	seen := map[string]bool{}
	req(s.root, func(n *node) {
		switch n.op {
		case opEq, opIn, opHas, opContains, opStarts, opEnds:
			if !seen[n.key] {
				seen[n.key] = true
				out = append(out, n.key)
			}
		}
	})
	return out
}

func req(n *node, f func(*node)) {
	if n.op == opAnd {
		for _, k := range n.kids {
			req(k, f)
		}
		return
	}
	f(n)
}

// Requirement is one requirement of a label selector in Kubernetes' terms (a LabelSelector's
// matchExpressions entry): a key, an operator (OpIn, OpNotIn, OpExists, OpDoesNotExist) and
// values.
type Requirement struct {
	Key      string
	Operator string
	Values   []string
}

// Operators of Requirement, spelled as Kubernetes spells them.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// FromLabelSelector converts a Kubernetes label selector — its matchLabels and its
// matchExpressions — exactly. Nothing at all gives All(); callers decide what a missing selector
// means.
func FromLabelSelector(matchLabels map[string]string, matchExpressions []Requirement) (*Selector, error) {
	var kids []*node
	keys := make([]string, 0, len(matchLabels))
	for k := range matchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kids = append(kids, &node{op: opEq, key: k, val: matchLabels[k]})
	}
	for _, e := range matchExpressions {
		switch e.Operator {
		case OpIn, OpNotIn:
			if len(e.Values) == 0 {
				return nil, fmt.Errorf("selector: %s on %q needs values", e.Operator, e.Key)
			}
			o := opIn
			if e.Operator == OpNotIn {
				o = opNotIn
			}
			kids = append(kids, &node{op: o, key: e.Key, vals: sortedSet(e.Values)})
		case OpExists, OpDoesNotExist:
			if len(e.Values) != 0 {
				return nil, fmt.Errorf("selector: %s on %q takes no values", e.Operator, e.Key)
			}
			var n node = node{op: opHas, key: e.Key}
			if e.Operator == OpDoesNotExist {
				kids = append(kids, &node{op: opNot, kids: []*node{&n}})
			} else {
				kids = append(kids, &n)
			}
		default:
			return nil, fmt.Errorf("selector: unknown operator %q on %q", e.Operator, e.Key)
		}
		if e.Key == "" {
			return nil, fmt.Errorf("selector: empty key")
		}
	}
	sel := build(normalize(&node{op: opAnd, kids: kids}))
	// the result's text must parse back into the same selector (the graph and the dataplane's
	// comments read it): the grammar has no escapes and trims blanks, so some keys and values
	// cannot be written
	text := sel.String()
	back, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("selector: label keys or values the selector language cannot express: %w", err)
	}
	if back.String() != text {
		return nil, fmt.Errorf("selector: label keys or values the selector language cannot express: %q reads back as %q", text, back.String())
	}
	return sel, nil
}

func sortedSet(vs []string) []string {
	out := append([]string(nil), vs...)
	sort.Strings(out)
	j := 0
	for i, v := range out {
		if i == 0 || v != out[j-1] {
			out[j] = v
			j++
		}
	}
	return out[:j]
}

// quote renders a literal: double quotes unless the value contains one (the grammar has no escapes).
func quote(v string) string {
	if strings.IndexByte(v, '"') < 0 {
		return `"` + v + `"`
	}
	return "'" + v + "'"
}
