package sync

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// yamlSubset translates a YAML document into the JSON that sigs.k8s.io/yaml's YAMLToJSONStrict
// makes of it, byte for byte, for the YAML that manifests are written in: block mappings and
// sequences (a sequence may sit at its key's indentation), single-line flow mappings and
// sequences, single-line plain, single-quoted and double-quoted scalars (the escapes \" \\
// \n \t \r), comments. Plain scalars are resolved as go.yaml.in/yaml/v2 resolves them (YAML 1.1:
// yes/no/on/off are booleans; 0x10 and 1_000 are integers; a number keeps the value
// YAMLToJSON gives it) and mapping keys are sorted as encoding/json sorts them.
//
// Anything else — anchors and aliases, tags, block and multi-line scalars, multi-line flow
// collections, floats, timestamps, YAML 1.1 merge keys, complex keys, tabs, carriage returns,
// bytes outside printable ASCII, duplicate keys, and every syntax error — makes translate
// decline the document, and LoadDir hands it to YAMLToJSONStrict, whose result and error are then
// the document's: the subset changes how fast a document is read, never what it means or how it
// fails. TestYAMLSubsetMatchesYAMLToJSON holds the equivalence over a corpus, FuzzYAMLSubset over
// random documents.
//
// It costs one pass over the document's lines, a node per value and no allocation for most
// strings (they are views of the document); a yamlSubset is reused from document to document and
// is not safe for concurrent use.
type yamlSubset struct {
	lines []yamlLine
	pos   int
	nodes []yamlNode
	kids  []int32 // scratch: a mapping's entries while they are sorted
	out   []byte
}

// yamlLine is a line holding content: its indentation and its text after it.
type yamlLine struct {
	indent int
	text   []byte
}

type yamlKind uint8

const (
	yamlNull yamlKind = iota
	yamlLiteral
	yamlString
	yamlMapping
	yamlSequence
)

// yamlNode is one value: a scalar (text: the JSON literal of a null, boolean or number, or the
// string) or a collection, whose children are chained from first through next. key is the
// node's key in its mapping.
type yamlNode struct {
	kind        yamlKind
	text, key   string
	first, last int32
	next        int32
}

// translate returns the JSON of doc, valid until the next call, or false when doc is outside
// the subset. An empty document (comments only) is null.
func (y *yamlSubset) translate(doc []byte) ([]byte, bool) {
	if !y.split(doc) {
		return nil, false
	}
	y.nodes, y.pos, y.out = y.nodes[:0], 0, y.out[:0]
	if len(y.lines) == 0 {
		return append(y.out, "null"...), true
	}
	root, ok := y.block(y.lines[0].indent)
	if !ok || y.pos != len(y.lines) {
		return nil, false
	}
	if !y.encode(root) {
		return nil, false
	}
	return y.out, true
}

// split cuts doc into its lines holding content, refusing bytes the subset leaves to yaml.v2.
func (y *yamlSubset) split(doc []byte) bool {
	y.lines = y.lines[:0]
	for len(doc) > 0 {
		line := doc
		if i := bytes.IndexByte(doc, '\n'); i >= 0 {
			line, doc = doc[:i], doc[i+1:]
		} else {
			doc = nil
		}
		for _, c := range line {
			if c < ' ' || c > '~' {
				return false // tabs, carriage returns, control characters, non-ASCII
			}
		}
		indent := 0
		for indent < len(line) && line[indent] == ' ' {
			indent++
		}
		text := bytes.TrimRight(line[indent:], " ")
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		if indent == 0 && (text[0] == '%' || bytes.HasPrefix(text, []byte("---")) || bytes.HasPrefix(text, []byte("..."))) {
			return false // directives and document markers
		}
		y.lines = append(y.lines, yamlLine{indent: indent, text: text})
	}
	return true
}

func (y *yamlSubset) node(n yamlNode) int32 {
	n.first, n.last, n.next = -1, -1, -1
	y.nodes = append(y.nodes, n)
	return int32(len(y.nodes) - 1)
}

func (y *yamlSubset) add(parent, child int32) {
	p := &y.nodes[parent]
	if p.last < 0 {
		p.first = child
	} else {
		y.nodes[p.last].next = child
	}
	p.last = child
}

func isSequenceEntry(text []byte) bool {
	return text[0] == '-' && (len(text) == 1 || text[1] == ' ')
}

// block reads the block collection whose first line is the current one, at indent.
func (y *yamlSubset) block(indent int) (int32, bool) {
	if y.lines[y.pos].indent != indent {
		return 0, false
	}
	if isSequenceEntry(y.lines[y.pos].text) {
		return y.sequence(indent)
	}
	return y.mapping(indent)
}

// below reads the value of an entry whose line held no value: a block collection on the lines
// indented deeper than indent, a sequence at indent itself when sameIndentSequence (a mapping's
// value), or null.
func (y *yamlSubset) below(indent int, sameIndentSequence bool) (int32, bool) {
	if y.pos < len(y.lines) {
		l := y.lines[y.pos]
		if l.indent > indent {
			return y.block(l.indent)
		}
		if sameIndentSequence && l.indent == indent && isSequenceEntry(l.text) {
			return y.sequence(indent)
		}
	}
	return y.node(yamlNode{kind: yamlNull, text: "null"}), true
}

func (y *yamlSubset) sequence(indent int) (int32, bool) {
	seq := y.node(yamlNode{kind: yamlSequence})
	for y.pos < len(y.lines) {
		l := y.lines[y.pos]
		if l.indent < indent || l.indent == indent && !isSequenceEntry(l.text) {
			break
		}
		if l.indent > indent {
			return 0, false
		}
		rest := l.text[1:]
		spaces := 0
		for spaces < len(rest) && rest[spaces] == ' ' {
			spaces++
		}
		rest = rest[spaces:]
		var item int32
		var ok bool
		switch {
		case len(rest) == 0 || rest[0] == '#':
			y.pos++
			item, ok = y.below(indent, false)
		case isSequenceEntry(rest) || hasKey(rest):
			// the entry's collection starts on this line, at the column after "- "
			y.lines[y.pos] = yamlLine{indent: indent + 1 + spaces, text: rest}
			item, ok = y.block(indent + 1 + spaces)
		default:
			item, ok = y.inline(rest)
			y.pos++
			ok = ok && (y.pos == len(y.lines) || y.lines[y.pos].indent <= indent)
		}
		if !ok {
			return 0, false
		}
		y.add(seq, item)
	}
	return seq, true
}

func (y *yamlSubset) mapping(indent int) (int32, bool) {
	m := y.node(yamlNode{kind: yamlMapping})
	for y.pos < len(y.lines) {
		l := y.lines[y.pos]
		if l.indent < indent || l.indent == indent && isSequenceEntry(l.text) {
			break
		}
		if l.indent > indent {
			return 0, false
		}
		key, rest, ok := y.key(l.text)
		if !ok {
			return 0, false
		}
		var value int32
		if len(rest) == 0 || rest[0] == '#' {
			y.pos++
			value, ok = y.below(indent, true)
		} else {
			value, ok = y.inline(rest)
			y.pos++
			ok = ok && (y.pos == len(y.lines) || y.lines[y.pos].indent <= indent)
		}
		if !ok {
			return 0, false
		}
		y.nodes[value].key = key
		y.add(m, value)
	}
	return m, true
}

// hasKey reports whether text starts with a mapping entry, "key:" followed by a space or the
// end of the line (a quoted key ends at its closing quote).
func hasKey(text []byte) bool {
	if text[0] == '"' || text[0] == '\'' {
		_, n, ok := quoted(text)
		if !ok {
			return false
		}
		rest := bytes.TrimLeft(text[n:], " ")
		return len(rest) > 0 && rest[0] == ':' && (len(rest) == 1 || rest[1] == ' ')
	}
	if !plainStart(text, false) {
		return false
	}
	for i := 0; i < len(text); i++ {
		switch {
		case text[i] == '#' && i > 0 && text[i-1] == ' ':
			return false
		case text[i] == ':' && (i+1 == len(text) || text[i+1] == ' '):
			return true
		}
	}
	return false
}

// key reads a block mapping entry's key and returns it with what follows ": " on the line.
func (y *yamlSubset) key(text []byte) (string, []byte, bool) {
	var key string
	var rest []byte
	if text[0] == '"' || text[0] == '\'' {
		s, n, ok := quoted(text)
		if !ok {
			return "", nil, false
		}
		key, rest = s, bytes.TrimLeft(text[n:], " ")
		if len(rest) == 0 || rest[0] != ':' {
			return "", nil, false
		}
	} else {
		if !plainStart(text, false) {
			return "", nil, false
		}
		i := 0
		for ; i < len(text); i++ {
			if text[i] == '#' && i > 0 && text[i-1] == ' ' {
				return "", nil, false
			}
			if text[i] == ':' && (i+1 == len(text) || text[i+1] == ' ') {
				break
			}
		}
		if i == len(text) || i > 1024 {
			return "", nil, false
		}
		kind, s, ok := resolvePlain(view(bytes.TrimRight(text[:i], " ")))
		if !ok || kind != yamlString {
			return "", nil, false // a key yaml.v2 reads as a number, a boolean, null or a merge
		}
		key, rest = s, text[i:]
	}
	if len(rest) > 1 && rest[1] != ' ' {
		return "", nil, false
	}
	return key, bytes.TrimLeft(rest[1:], " "), true
}

// inline reads a value that starts on its entry's line and ends with it.
func (y *yamlSubset) inline(text []byte) (int32, bool) {
	var v int32
	var n int
	var ok bool
	switch text[0] {
	case '{', '[':
		v, n, ok = y.flow(text)
	case '"', '\'':
		var s string
		s, n, ok = quoted(text)
		v = y.node(yamlNode{kind: yamlString, text: s})
	default:
		if !plainStart(text, false) {
			return 0, false
		}
		for n < len(text) && !(text[n] == '#' && text[n-1] == ' ') {
			if text[n] == ':' && (n+1 == len(text) || text[n+1] == ' ') {
				return 0, false // a mapping on the line of a key
			}
			n++
		}
		kind, s, ok := resolvePlain(view(bytes.TrimRight(text[:n], " ")))
		if !ok {
			return 0, false
		}
		return y.node(yamlNode{kind: kind, text: s}), true
	}
	if !ok {
		return 0, false
	}
	rest := text[n:]
	if len(rest) > 0 && (rest[0] != ' ' || bytes.TrimLeft(rest, " ")[0] != '#') {
		return 0, false
	}
	return v, true
}

// flow reads a flow collection that ends on its line; n is the length it took.
func (y *yamlSubset) flow(text []byte) (v int32, n int, ok bool) {
	closing := byte('}')
	kind := yamlMapping
	if text[0] == '[' {
		closing, kind = ']', yamlSequence
	}
	c := y.node(yamlNode{kind: kind})
	n = skipSpaces(text, 1)
	if n < len(text) && text[n] == closing {
		return c, n + 1, true
	}
	for {
		var key string
		if kind == yamlMapping {
			var k int32
			var taken int
			k, taken, ok = y.flowScalar(text[n:])
			if !ok || y.nodes[k].kind != yamlString {
				return 0, 0, false
			}
			key = y.nodes[k].text
			y.nodes = y.nodes[:k] // the key is no node of its own
			n = skipSpaces(text, n+taken)
			if n+1 >= len(text) || text[n] != ':' || text[n+1] != ' ' {
				return 0, 0, false // no value (an implicit null) or a ':' yaml.v2 reads otherwise
			}
			n = skipSpaces(text, n+1)
		}
		if n >= len(text) {
			return 0, 0, false
		}
		var item int32
		var taken int
		if text[n] == '{' || text[n] == '[' {
			item, taken, ok = y.flow(text[n:])
		} else {
			item, taken, ok = y.flowScalar(text[n:])
		}
		if !ok {
			return 0, 0, false
		}
		y.nodes[item].key = key
		y.add(c, item)
		n = skipSpaces(text, n+taken)
		if n >= len(text) {
			return 0, 0, false
		}
		switch text[n] {
		case closing:
			return c, n + 1, true
		case ',':
			n = skipSpaces(text, n+1)
			if n >= len(text) || text[n] == closing {
				return 0, 0, false
			}
		default:
			return 0, 0, false
		}
	}
}

// flowScalar reads a scalar inside a flow collection.
func (y *yamlSubset) flowScalar(text []byte) (int32, int, bool) {
	if len(text) == 0 {
		return 0, 0, false
	}
	if text[0] == '"' || text[0] == '\'' {
		s, n, ok := quoted(text)
		return y.node(yamlNode{kind: yamlString, text: s}), n, ok
	}
	if !plainStart(text, true) {
		return 0, 0, false
	}
	n := 0
	for ; n < len(text); n++ {
		c := text[n]
		if c == ',' || c == ']' || c == '}' || c == '[' || c == '{' || c == '?' || c == ':' || c == '#' && text[n-1] == ' ' {
			break
		}
	}
	if n < len(text) && (text[n] == ':' && n+1 < len(text) && text[n+1] != ' ' || text[n] == '#' || text[n] == '[' || text[n] == '{' || text[n] == '?') {
		return 0, 0, false // a ':' inside the scalar, a comment, or an indicator yaml.v2 reads otherwise
	}
	kind, s, ok := resolvePlain(view(bytes.TrimRight(text[:n], " ")))
	if !ok {
		return 0, 0, false
	}
	return y.node(yamlNode{kind: kind, text: s}), n, true
}

func skipSpaces(text []byte, i int) int {
	for i < len(text) && text[i] == ' ' {
		i++
	}
	return i
}

// plainStart reports whether text can start a plain scalar that the subset reads: not with an
// indicator, nor a '-' followed by a space.
func plainStart(text []byte, inFlow bool) bool {
	switch text[0] {
	case '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`':
		return false
	case '-':
		return len(text) > 1 && text[1] != ' ' && !(inFlow && strings.IndexByte(",[]{}", text[1]) >= 0)
	}
	return true
}

// quoted reads a single- or double-quoted scalar that ends on its line; n is the length it took,
// both quotes included. Double-quoted escapes other than \" \\ \n \t \r are declined.
func quoted(text []byte) (s string, n int, ok bool) {
	q := text[0]
	var b []byte // the value when it differs from the text between the quotes
	for i := 1; i < len(text); i++ {
		c := text[i]
		switch {
		case c == q && q == '\'' && i+1 < len(text) && text[i+1] == '\'':
			if b == nil {
				b = append([]byte(nil), text[1:i]...)
			}
			b = append(b, '\'')
			i++
		case c == q:
			if b != nil {
				return string(b), i + 1, true
			}
			return view(text[1:i]), i + 1, true
		case c == '\\' && q == '"':
			if i+1 == len(text) {
				return "", 0, false
			}
			var r byte
			switch text[i+1] {
			case '"', '\\':
				r = text[i+1]
			case 'n':
				r = '\n'
			case 't':
				r = '\t'
			case 'r':
				r = '\r'
			default:
				return "", 0, false
			}
			if b == nil {
				b = append([]byte(nil), text[1:i]...)
			}
			b = append(b, r)
			i++
		default:
			if b != nil {
				b = append(b, c)
			}
		}
	}
	return "", 0, false
}

// yamlStyleFloat is yaml.v2's pattern of a float.
var yamlStyleFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// resolvePlain resolves a plain scalar as yaml.v2 does (resolve.go), into a JSON literal (null,
// a boolean, an integer) or a string. It declines (ok false) floats, timestamps, the merge key
// and binary integers, whose JSON the subset leaves to yaml.v2.
func resolvePlain(s string) (kind yamlKind, text string, ok bool) {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return yamlNull, "null", true
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return yamlLiteral, "true", true
	case "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return yamlLiteral, "false", true
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", "<<":
		return 0, "", false
	}
	switch c := s[0]; {
	case c == '.':
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return 0, "", false
		}
	case c == '+' || c == '-' || c >= '0' && c <= '9':
		digits := 0
		for digits < len(s) && s[digits] >= '0' && s[digits] <= '9' {
			digits++
		}
		if digits == 4 && len(s) > 4 && s[4] == '-' {
			return 0, "", false // perhaps a timestamp
		}
		if digits == len(s) && (s[0] != '0' || len(s) == 1) && len(s) < 19 {
			return yamlLiteral, s, true // a decimal integer, written as JSON writes it
		}
		plain := strings.ReplaceAll(s, "_", "")
		if i, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return yamlLiteral, strconv.FormatInt(i, 10), true
		}
		if u, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return yamlLiteral, strconv.FormatUint(u, 10), true
		}
		if yamlStyleFloat.MatchString(plain) || strings.HasPrefix(plain, "0b") || strings.HasPrefix(plain, "-0b") {
			return 0, "", false
		}
	}
	return yamlString, s, true
}

// encode appends node v's JSON to y.out, as encoding/json writes the value YAMLToJSON builds:
// mapping keys sorted, no spaces; false for a duplicate key.
func (y *yamlSubset) encode(v int32) bool {
	n := &y.nodes[v]
	switch n.kind {
	case yamlNull, yamlLiteral:
		y.out = append(y.out, n.text...)
	case yamlString:
		y.out = appendJSONString(y.out, n.text)
	case yamlSequence:
		y.out = append(y.out, '[')
		for c := n.first; c >= 0; c = y.nodes[c].next {
			if c != n.first {
				y.out = append(y.out, ',')
			}
			if !y.encode(c) {
				return false
			}
		}
		y.out = append(y.out, ']')
	case yamlMapping:
		start := len(y.kids)
		for c := n.first; c >= 0; c = y.nodes[c].next {
			y.kids = append(y.kids, c)
		}
		kids := y.kids[start:]
		slices.SortFunc(kids, func(a, b int32) int { return strings.Compare(y.nodes[a].key, y.nodes[b].key) })
		y.out = append(y.out, '{')
		for i, c := range kids {
			if i > 0 {
				if y.nodes[kids[i-1]].key == y.nodes[c].key {
					return false
				}
				y.out = append(y.out, ',')
			}
			y.out = appendJSONString(y.out, y.nodes[c].key)
			y.out = append(y.out, ':')
			if !y.encode(c) {
				return false
			}
		}
		y.out = append(y.out, '}')
		y.kids = y.kids[:start]
	}
	return true
}

// appendJSONString appends s quoted as encoding/json quotes it: s holds printable ASCII and the
// control characters of the escapes quoted reads.
func appendJSONString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			out = append(out, '\\', c)
		case '\n':
			out = append(out, '\\', 'n')
		case '\t':
			out = append(out, '\\', 't')
		case '\r':
			out = append(out, '\\', 'r')
		case '<', '>', '&':
			out = append(out, `\u00`...)
			out = append(out, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		default:
			out = append(out, c)
		}
	}
	return append(out, '"')
}
