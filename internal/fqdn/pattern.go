package fqdn

import (
	"fmt"
	"strings"
)

// Pattern is one domainNames entry: an exact name, or a wildcard that matches every name with
// one or more labels in front of its suffix.
type Pattern struct {
	// name is the exact name, or the wildcard's suffix without "*."; lower case, no trailing dot.
	name     string
	wildcard bool
}

// ParsePattern parses a domainNames entry: "name" or "*.name", an optional trailing dot. It
// checks the shape network-policy-api validates (labels of letters, digits, '-' and '_', '*' only
// as the first label, at least two labels after it).
func ParsePattern(s string) (Pattern, error) {
	rest, wildcard := strings.CutPrefix(s, "*.")
	rest = strings.TrimSuffix(rest, ".")
	labels := strings.Split(rest, ".")
	if len(labels) < 2 {
		return Pattern{}, fmt.Errorf("domain name %q: at least two labels are required", s)
	}
	for _, l := range labels {
		if !validLabel(l) {
			return Pattern{}, fmt.Errorf("domain name %q: invalid label %q", s, l)
		}
	}
	return Pattern{name: Canonical(rest), wildcard: wildcard}, nil
}

func validLabel(l string) bool {
	if l == "" || len(l) > 63 {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && !((c == '-' || c == '_') && i > 0 && i < len(l)-1) {
			return false
		}
	}
	return true
}

// Canonical is name in the form patterns compare against: ASCII lower case, no trailing dot.
func Canonical(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

// Match reports whether the canonical name matches p.
func (p Pattern) Match(name string) bool {
	if !p.wildcard {
		return name == p.name
	}
	return len(name) > len(p.name)+1 && strings.HasSuffix(name, p.name) && name[len(name)-len(p.name)-1] == '.' &&
		name[0] != '.'
}

// String is the pattern as written canonically: "name" or "*.name".
func (p Pattern) String() string {
	if p.wildcard {
		return "*." + p.name
	}
	return p.name
}
