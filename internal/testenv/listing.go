package testenv

import (
	"regexp"
	"slices"
	"strings"
)

var (
	counterValues = regexp.MustCompile(`counter packets \d+ bytes \d+`)
	spaces        = regexp.MustCompile(`\s+`)
)

// NormalizeListing turns an `nft list table` output (or ruleset.Render's) into a canonical form:
// whitespace collapsed, counter values dropped, element lists sorted, and the table's blocks
// (sets, maps, chains) sorted, since the kernel lists objects in creation order and elements in
// its own order. Statements stay as printed, so a wrong expression still shows.
func NormalizeListing(s string) string {
	lines := strings.Split(counterValues.ReplaceAllString(s, "counter"), "\n")
	// join wrapped element lists
	var joined []string
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "elements = {") {
			for !strings.HasSuffix(l, "}") && i+1 < len(lines) {
				i++
				l += " " + strings.TrimSpace(lines[i])
			}
			inner := strings.TrimSuffix(strings.TrimPrefix(l, "elements = {"), "}")
			els := splitTop(inner)
			slices.Sort(els)
			l = "elements = { " + strings.Join(els, ", ") + " }"
		}
		if l = spaces.ReplaceAllString(l, " "); l != "" {
			joined = append(joined, l)
		}
	}
	// blocks
	var head []string
	var blocks []string
	var cur []string
	for _, l := range joined {
		switch {
		case cur == nil && (strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "map ") || strings.HasPrefix(l, "chain ")):
			cur = []string{l}
		case cur != nil && l == "}":
			blocks = append(blocks, strings.Join(append(cur, l), "\n"))
			cur = nil
		case cur != nil:
			cur = append(cur, l)
		default:
			head = append(head, l)
		}
	}
	slices.Sort(blocks)
	return strings.Join(head, "\n") + "\n" + strings.Join(blocks, "\n")
}

// splitTop splits an element list at commas outside quotes.
func splitTop(s string) []string {
	var out []string
	var b strings.Builder
	inq := false
	for _, r := range s {
		switch {
		case r == '"':
			inq = !inq
			b.WriteRune(r)
		case r == ',' && !inq:
			out = append(out, strings.TrimSpace(spaces.ReplaceAllString(b.String(), " ")))
			b.Reset()
		default:
			b.WriteRune(r)
		}
	}
	if t := strings.TrimSpace(b.String()); t != "" {
		out = append(out, spaces.ReplaceAllString(t, " "))
	}
	return out
}
