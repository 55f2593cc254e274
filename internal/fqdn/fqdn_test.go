package fqdn_test

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/nftpolicy/nftpolicy/internal/fqdn"
)

func TestPatternMatch(t *testing.T) {
	for _, c := range []struct {
		pattern string
		match   []string
		noMatch []string
	}{
		// the examples of network-policy-api v0.3.0's DomainName
		{"kubernetes.io", []string{"kubernetes.io"}, []string{"www.kubernetes.io", "blog.kubernetes.io", "my-kubernetes.io", "wikipedia.org"}},
		{"blog.kubernetes.io", []string{"blog.kubernetes.io"}, []string{"www.kubernetes.io", "kubernetes.io"}},
		{"*.kubernetes.io", []string{"www.kubernetes.io", "blog.kubernetes.io", "latest.blog.kubernetes.io"}, []string{"kubernetes.io", "wikipedia.org", "my-kubernetes.io", "xkubernetes.io"}},
		{"Example.COM.", []string{"example.com"}, []string{"www.example.com"}},
	} {
		p, err := fqdn.ParsePattern(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.match {
			if !p.Match(fqdn.Canonical(n)) {
				t.Errorf("%s does not match %s", c.pattern, n)
			}
		}
		for _, n := range c.noMatch {
			if p.Match(fqdn.Canonical(n)) {
				t.Errorf("%s matches %s", c.pattern, n)
			}
		}
	}
	for _, bad := range []string{"com", "*.com", "a.*.com", "**.a.com", "-a.com", "a..com", "*a.com", ""} {
		if _, err := fqdn.ParsePattern(bad); err == nil {
			t.Errorf("ParsePattern(%q) accepted it", bad)
		}
	}
}

// rr is one answer record for message.
type rr struct {
	name  string
	ttl   uint32
	cname string
	a     string
}

func message(t testing.TB, qname string, qtype dnsmessage.Type, rcode dnsmessage.RCode, rrs ...rr) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1, Response: true, RCode: rcode})
	b.EnableCompression()
	must(t, b.StartQuestions())
	must(t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(qname), Type: qtype, Class: dnsmessage.ClassINET}))
	must(t, b.StartAnswers())
	for _, r := range rrs {
		h := dnsmessage.ResourceHeader{Name: dnsmessage.MustNewName(r.name), Class: dnsmessage.ClassINET, TTL: r.ttl}
		switch {
		case r.cname != "":
			must(t, b.CNAMEResource(h, dnsmessage.CNAMEResource{CNAME: dnsmessage.MustNewName(r.cname)}))
		case netip.MustParseAddr(r.a).Is4():
			must(t, b.AResource(h, dnsmessage.AResource{A: netip.MustParseAddr(r.a).As4()}))
		default:
			must(t, b.AAAAResource(h, dnsmessage.AAAAResource{AAAA: netip.MustParseAddr(r.a).As16()}))
		}
	}
	msg, err := b.Finish()
	must(t, err)
	return msg
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParseAnswerFollowsCNAMEChain(t *testing.T) {
	msg := message(t, "WWW.Example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess,
		rr{name: "www.example.com.", ttl: 300, cname: "edge.cdn.net."},
		rr{name: "edge.cdn.net.", ttl: 60, cname: "a1.cdn.net."},
		rr{name: "a1.cdn.net.", ttl: 120, a: "192.0.2.1"},
		rr{name: "a1.cdn.net.", ttl: 30, a: "192.0.2.2"},
		rr{name: "unrelated.org.", ttl: 30, a: "198.51.100.1"},
		rr{name: "a1.cdn.net.", ttl: 120, a: "2001:db8::1"})
	a, err := fqdn.ParseAnswer(msg)
	must(t, err)
	if want := []string{"www.example.com", "edge.cdn.net", "a1.cdn.net"}; !slices.Equal(a.Chain, want) {
		t.Errorf("chain %v, want %v", a.Chain, want)
	}
	want := []fqdn.Record{
		{Addr: netip.MustParseAddr("192.0.2.1"), TTL: 60 * time.Second, Owner: 2},
		{Addr: netip.MustParseAddr("192.0.2.2"), TTL: 30 * time.Second, Owner: 2},
		{Addr: netip.MustParseAddr("2001:db8::1"), TTL: 60 * time.Second, Owner: 2},
	}
	if !slices.Equal(a.Records, want) {
		t.Errorf("records %v, want %v", a.Records, want)
	}
}

func TestParseAnswerCNAMELoop(t *testing.T) {
	msg := message(t, "a.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess,
		rr{name: "a.example.com.", ttl: 10, cname: "b.example.com."},
		rr{name: "b.example.com.", ttl: 10, cname: "a.example.com."},
		rr{name: "b.example.com.", ttl: 10, a: "192.0.2.9"})
	a, err := fqdn.ParseAnswer(msg)
	must(t, err)
	if len(a.Chain) != 2 || len(a.Records) != 1 || a.Records[0].Owner != 1 {
		t.Errorf("loop: %+v", a)
	}
}

func TestParseAnswerRefuses(t *testing.T) {
	for name, msg := range map[string][]byte{
		"nxdomain": message(t, "x.example.com.", dnsmessage.TypeA, dnsmessage.RCodeNameError),
		"mx":       message(t, "x.example.com.", dnsmessage.TypeMX, dnsmessage.RCodeSuccess),
	} {
		if _, err := fqdn.ParseAnswer(msg); !errors.Is(err, fqdn.ErrNotAnswer) {
			t.Errorf("%s: %v, want ErrNotAnswer", name, err)
		}
	}
	if _, err := fqdn.ParseAnswer([]byte{1, 2, 3}); err == nil || errors.Is(err, fqdn.ErrNotAnswer) {
		t.Errorf("garbage: %v", err)
	}
}

var (
	t0     = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	podA   = netip.MustParseAddr("10.0.0.1")
	podB   = netip.MustParseAddr("fd00::2")
	limits = fqdn.Limits{PerName: 4, PerClient: 6, Floor: 5 * time.Second, MaxTTL: time.Hour, Grace: 10 * time.Second}
)

func patterns(t testing.TB, ss ...string) []fqdn.Pattern {
	var ps []fqdn.Pattern
	for _, s := range ss {
		p, err := fqdn.ParsePattern(s)
		must(t, err)
		ps = append(ps, p)
	}
	return ps
}

func answer(t testing.TB, msg []byte) fqdn.Answer {
	a, err := fqdn.ParseAnswer(msg)
	must(t, err)
	return a
}

func TestTimeout(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{0: 15 * time.Second, 30 * time.Second: 40 * time.Second, 48 * time.Hour: time.Hour + 10*time.Second} {
		if got := limits.Timeout(ttl); got != want {
			t.Errorf("Timeout(%v) = %v, want %v", ttl, got, want)
		}
	}
}

func TestObserveMatchesChainNames(t *testing.T) {
	c := fqdn.NewCache(limits)
	c.SetPatterns(patterns(t, "www.example.com", "*.cdn.net", "other.org"))
	msg := message(t, "www.example.com.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess,
		rr{name: "www.example.com.", ttl: 300, cname: "edge.cdn.net."},
		rr{name: "edge.cdn.net.", ttl: 20, a: "2001:db8::5"})
	got := c.Observe(podB, answer(t, msg), t0)
	want := []fqdn.Change{
		{Pattern: "www.example.com", Addr: netip.MustParseAddr("2001:db8::5"), Timeout: 30 * time.Second},
		{Pattern: "*.cdn.net", Addr: netip.MustParseAddr("2001:db8::5"), Timeout: 30 * time.Second},
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
	if es := c.Entries("www.example.com", t0.Add(10*time.Second)); len(es) != 1 || es[0].Remaining != 20*time.Second {
		t.Errorf("entries %v", es)
	}
	if es := c.Entries("other.org", t0); len(es) != 0 {
		t.Errorf("other.org: %v", es)
	}
	// the same answer again changes nothing; a longer TTL extends; a shorter one does not shorten
	if got := c.Observe(podB, answer(t, msg), t0); len(got) != 0 {
		t.Errorf("repeat: %v", got)
	}
	longer := message(t, "edge.cdn.net.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, rr{name: "edge.cdn.net.", ttl: 100, a: "2001:db8::5"})
	if got := c.Observe(podA, answer(t, longer), t0); len(got) != 1 || got[0].Pattern != "*.cdn.net" || got[0].Timeout != 110*time.Second {
		t.Errorf("extend: %v", got)
	}
	// expiry
	c.Expire(t0.Add(31 * time.Second))
	if es := c.Entries("www.example.com", t0.Add(31*time.Second)); len(es) != 0 {
		t.Errorf("expired still listed: %v", es)
	}
	if c.Len() != 1 {
		t.Errorf("Len %d after expiry, want 1", c.Len())
	}
	// a pattern removed drops its elements
	c.SetPatterns(patterns(t, "www.example.com"))
	if c.Len() != 0 || c.Entries("*.cdn.net", t0) != nil {
		t.Errorf("removed pattern kept: Len %d", c.Len())
	}
}

func TestBounds(t *testing.T) {
	c := fqdn.NewCache(limits)
	c.SetPatterns(patterns(t, "*.example.com", "*.example.org"))
	addr := func(i int) string { return fmt.Sprintf("192.0.2.%d", i) }
	// per name: the fifth address evicts the one that expires first
	for i := 1; i <= 5; i++ {
		msg := message(t, "h.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, rr{name: "h.example.com.", ttl: uint32(100 + i), a: addr(i)})
		got := c.Observe(podA, answer(t, msg), t0)
		if i == 5 {
			want := []fqdn.Change{{Pattern: "*.example.com", Addr: netip.MustParseAddr(addr(1)), Delete: true},
				{Pattern: "*.example.com", Addr: netip.MustParseAddr(addr(5)), Timeout: 115 * time.Second}}
			if !slices.Equal(got, want) {
				t.Errorf("per name: %v, want %v", got, want)
			}
		}
	}
	if ev := c.Evictions(); ev.PerName != 1 || ev.PerClient != 0 {
		t.Errorf("evictions %+v", ev)
	}
	// per client: podA holds 4; three more under another name take it over 6
	for i := 10; i < 13; i++ {
		msg := message(t, "h.example.org.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, rr{name: "h.example.org.", ttl: 1000, a: addr(i)})
		c.Observe(podA, answer(t, msg), t0)
	}
	if ev := c.Evictions(); ev.PerClient != 1 || c.Len() != 6 {
		t.Errorf("evictions %+v, Len %d", ev, c.Len())
	}
}

// TestFloodBounded: a flood of distinct answers from many clients keeps the Cache within
// patterns × PerName and every Delete names an element an Add made.
func TestFloodBounded(t *testing.T) {
	c := fqdn.NewCache(limits)
	c.SetPatterns(patterns(t, "*.example.com", "flood.example.net"))
	live := map[fqdn.Change]bool{}
	for i := range 20000 {
		client := netip.AddrFrom4([4]byte{10, 0, byte(i >> 8 % 4), byte(i)})
		a := netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)})
		msg := message(t, fmt.Sprintf("h%d.example.com.", i), dnsmessage.TypeA, dnsmessage.RCodeSuccess,
			rr{name: fmt.Sprintf("h%d.example.com.", i), ttl: uint32(i % 50), cname: "flood.example.net."},
			rr{name: "flood.example.net.", ttl: uint32(i % 70), a: a.String()})
		for _, ch := range c.Observe(client, answer(t, msg), t0.Add(time.Duration(i)*time.Millisecond)) {
			k := fqdn.Change{Pattern: ch.Pattern, Addr: ch.Addr}
			if ch.Delete {
				if !live[k] {
					t.Fatalf("delete of an element never added: %v", ch)
				}
				delete(live, k)
			} else {
				live[k] = true
			}
		}
		if c.Len() > 2*limits.PerName {
			t.Fatalf("Len %d over 2 patterns × %d", c.Len(), limits.PerName)
		}
	}
	if ev := c.Evictions(); ev.PerName == 0 {
		t.Errorf("no eviction counted: %+v", ev)
	}
}

// TestClientBoundOnTakeOver: a client that extends another's element takes it over within its
// own bound.
func TestClientBoundOnTakeOver(t *testing.T) {
	l := limits
	l.PerClient = 2
	c := fqdn.NewCache(l)
	c.SetPatterns(patterns(t, "*.example.com"))
	ans := func(ttl uint32, addrs ...string) fqdn.Answer {
		var rrs []rr
		for _, a := range addrs {
			rrs = append(rrs, rr{name: "h.example.com.", ttl: ttl, a: a})
		}
		return answer(t, message(t, "h.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, rrs...))
	}
	c.Observe(podA, ans(100, "192.0.2.1", "192.0.2.2"), t0)
	c.Observe(podB, ans(200, "192.0.2.3", "192.0.2.4"), t0)
	// podA takes over 192.0.2.3 with a longer TTL: it must give up its element expiring first
	got := c.Observe(podA, ans(300, "192.0.2.3"), t0)
	want := []fqdn.Change{{Pattern: "*.example.com", Addr: netip.MustParseAddr("192.0.2.1"), Delete: true},
		{Pattern: "*.example.com", Addr: netip.MustParseAddr("192.0.2.3"), Timeout: 310 * time.Second}}
	if !slices.Equal(got, want) {
		t.Errorf("take-over: %v, want %v", got, want)
	}
	if ev := c.Evictions(); ev.PerClient != 1 || c.Len() != 3 {
		t.Errorf("evictions %+v, Len %d", ev, c.Len())
	}
}

// FuzzParseAnswer: any message parses or fails without panic, and every record's owner is a
// name of the chain.
func FuzzParseAnswer(f *testing.F) {
	f.Add(message(f, "www.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess,
		rr{name: "www.example.com.", ttl: 300, cname: "edge.cdn.net."}, rr{name: "edge.cdn.net.", ttl: 20, a: "192.0.2.1"}))
	f.Add(message(f, "x.example.com.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, rr{name: "x.example.com.", ttl: 1, a: "2001:db8::1"}))
	f.Fuzz(func(t *testing.T, msg []byte) {
		a, err := fqdn.ParseAnswer(msg)
		if err != nil {
			return
		}
		if len(a.Chain) == 0 || len(a.Chain) > fqdn.MaxChain+1 {
			t.Fatalf("chain %v", a.Chain)
		}
		for _, r := range a.Records {
			if r.Owner < 0 || r.Owner >= len(a.Chain) || !r.Addr.IsValid() {
				t.Fatalf("record %+v of chain %v", r, a.Chain)
			}
		}
	})
}
