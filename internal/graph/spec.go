package graph

import (
	"strconv"
	"strings"

	"github.com/nftpolicy/nftpolicy/internal/selector"
)

// spec is a scoped selector tuple: an endpoint matches when it is in namespace scope (if set),
// its labels match ep, its namespace's labels match ns and its service account's labels match
// sa (nil: no constraint). Equal specs are one matcher, hence one set.
type spec struct {
	ep, ns, sa *selector.Selector
	scope      string
	// hosts: the spec matches host endpoints too (a Calico selector of cluster scope); a host
	// endpoint matches only such a spec without scope, ns or sa, as it has no namespace.
	hosts bool
}

func normSel(s *selector.Selector) *selector.Selector {
	if s == nil || s.String() == selector.All().String() {
		return nil
	}
	return s
}

// key is the injective identity of a spec (length-prefixed parts).
func (s spec) key() string {
	var b strings.Builder
	part := func(tag string, v string) {
		b.WriteString(tag)
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	if s.ep != nil {
		part("e", s.ep.String())
	}
	if s.ns != nil {
		part("n", s.ns.String())
	}
	if s.sa != nil {
		part("s", s.sa.String())
	}
	if s.scope != "" {
		part("i", s.scope)
	}
	if s.hosts {
		b.WriteString("h")
	}
	return b.String()
}

// describe is the human form of a spec, for set comments.
func (s spec) describe() string {
	var parts []string
	if s.ep != nil {
		parts = append(parts, s.ep.String())
	}
	if s.ns != nil {
		parts = append(parts, "namespace("+s.ns.String()+")")
	}
	if s.sa != nil {
		parts = append(parts, "serviceaccount("+s.sa.String()+")")
	}
	if s.scope != "" {
		parts = append(parts, "in namespace "+quote(s.scope))
	}
	if len(parts) == 0 {
		parts = append(parts, "all()")
	}
	if s.hosts && s.ns == nil && s.sa == nil && s.scope == "" {
		return strings.Join(parts, " && ") + " (pods and host endpoints)"
	}
	return strings.Join(parts, " && ")
}

func quote(s string) string { return strconv.Quote(s) }

// netPick is which network sets a peer picks: those whose labels (with their automatic
// projectcalico.org/namespace) match ep, within the peer's scope, which is one of
//   - global: the cluster-scoped sets only (global());
//   - scope: the sets of that namespace (a namespaced policy's peer without a namespace
//     selector);
//   - namespaced: the namespaced sets whose namespace's labels match ns (nil: every
//     namespace; a peer with a namespace selector, all() included);
//   - none of them: every set, cluster-scoped and namespaced (a cluster-wide policy's peer
//     without a namespace selector).
type netPick struct {
	ep, ns     *selector.Selector
	scope      string
	namespaced bool
	global     bool
}

// picks reports whether p picks n.
func (p *netPick) picks(n *netSet) bool {
	switch {
	case p.global:
		if n.ns != nil {
			return false
		}
	case p.scope != "":
		if n.ns == nil || n.ns.name != p.scope {
			return false
		}
	case p.namespaced:
		if n.ns == nil || (p.ns != nil && !p.ns.Evaluate(n.ns)) {
			return false
		}
	}
	return p.ep == nil || p.ep.Evaluate(n)
}
