package selector

import (
	"fmt"
	"strings"
)

type parser struct {
	s   string
	pos int
}

// Parse parses Calico's selector language; "" parses as all().
func Parse(s string) (*Selector, error) {
	p := &parser{s: s}
	p.ws()
	if p.pos == len(s) {
		return All(), nil
	}
	n, err := p.or(0)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %w", s, err)
	}
	p.ws()
	if p.pos != len(s) {
		return nil, fmt.Errorf("selector %q: unexpected %q at %d", s, s[p.pos:], p.pos)
	}
	return build(normalize(n)), nil
}

const maxDepth = 200

func (p *parser) ws() {
	for p.pos < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.pos]) >= 0 {
		p.pos++
	}
}

func (p *parser) lit(t string) bool {
	p.ws()
	if strings.HasPrefix(p.s[p.pos:], t) {
		p.pos += len(t)
		return true
	}
	return false
}

func (p *parser) or(d int) (*node, error) {
	if d > maxDepth {
		return nil, fmt.Errorf("nested too deeply")
	}
	n, err := p.and(d)
	if err != nil {
		return nil, err
	}
	kids := []*node{n}
	for p.lit("||") {
		n, err := p.and(d)
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return n, nil
	}
	return &node{op: opOr, kids: kids}, nil
}

func (p *parser) and(d int) (*node, error) {
	n, err := p.unary(d)
	if err != nil {
		return nil, err
	}
	kids := []*node{n}
	for p.lit("&&") {
		n, err := p.unary(d)
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	if len(kids) == 1 {
		return n, nil
	}
	return &node{op: opAnd, kids: kids}, nil
}

func isKey(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/._-", c) >= 0
}

func (p *parser) ident() string {
	p.ws()
	st := p.pos
	for p.pos < len(p.s) && isKey(p.s[p.pos]) {
		p.pos++
	}
	return p.s[st:p.pos]
}

func (p *parser) str() (string, error) {
	p.ws()
	if p.pos >= len(p.s) || (p.s[p.pos] != '\'' && p.s[p.pos] != '"') {
		return "", fmt.Errorf("expected string at %d", p.pos)
	}
	q := p.s[p.pos]
	end := strings.IndexByte(p.s[p.pos+1:], q)
	if end < 0 {
		return "", fmt.Errorf("unterminated string at %d", p.pos)
	}
	v := p.s[p.pos+1 : p.pos+1+end]
	p.pos += end + 2
	return v, nil
}

func (p *parser) unary(d int) (*node, error) {
	if d > maxDepth {
		return nil, fmt.Errorf("nested too deeply")
	}
	if p.lit("!") {
		n, err := p.unary(d + 1)
		if err != nil {
			return nil, err
		}
		if n.op == opNot {
			return n.kids[0], nil
		}
		return &node{op: opNot, kids: []*node{n}}, nil
	}
	if p.lit("(") {
		n, err := p.or(d + 1)
		if err != nil {
			return nil, err
		}
		if !p.lit(")") {
			return nil, fmt.Errorf("expected ) at %d", p.pos)
		}
		return n, nil
	}
	if p.lit("all()") {
		return &node{op: opAll}, nil
	}
	save := p.pos
	if p.lit("has(") {
		k := p.ident()
		if k == "" || !p.lit(")") {
			return nil, fmt.Errorf("bad has() at %d", save)
		}
		return &node{op: opHas, key: k}, nil
	}
	k := p.ident()
	if k == "" {
		return nil, fmt.Errorf("expected label key at %d", p.pos)
	}
	switch {
	case p.lit("=="):
		v, err := p.str()
		return &node{op: opEq, key: k, val: v}, err
	case p.lit("!="):
		v, err := p.str()
		return &node{op: opNe, key: k, val: v}, err
	case p.kw("contains"):
		v, err := p.str()
		return &node{op: opContains, key: k, val: v}, err
	case p.kw("starts") && p.kw("with"):
		v, err := p.str()
		return &node{op: opStarts, key: k, val: v}, err
	case p.kw("ends") && p.kw("with"):
		v, err := p.str()
		return &node{op: opEnds, key: k, val: v}, err
	case p.kw("in"):
		vs, err := p.set()
		return &node{op: opIn, key: k, vals: vs}, err
	case p.kw("not") && p.kw("in"):
		vs, err := p.set()
		return &node{op: opNotIn, key: k, vals: vs}, err
	}
	return nil, fmt.Errorf("expected operator after %q at %d", k, p.pos)
}

func (p *parser) kw(w string) bool {
	save := p.pos
	if p.ident() == w {
		return true
	}
	p.pos = save
	return false
}

func (p *parser) set() ([]string, error) {
	if !p.lit("{") {
		return nil, fmt.Errorf("expected { at %d", p.pos)
	}
	var vs []string
	if p.lit("}") {
		return vs, nil
	}
	for {
		v, err := p.str()
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		if p.lit("}") {
			return sortedSet(vs), nil
		}
		if !p.lit(",") {
			return nil, fmt.Errorf("expected , or } at %d", p.pos)
		}
	}
}
