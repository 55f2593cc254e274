package ruleset

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/mdlayher/netlink"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestRenderGolden keeps Render's output for the sample table in testdata/sample.nft, and checks
// that nft 1.0.6 accepts it (`nft -c -f` in a test namespace).
func TestRenderGolden(t *testing.T) {
	got := Render(sampleTable("nftpolicy"))
	path := filepath.Join("testdata", "sample.nft")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Render differs from %s (run with -update to accept):\n%s", path, got)
	}
	if got != Render(sampleTable("nftpolicy")) {
		t.Errorf("Render is not deterministic")
	}
	ns, _ := newNetns(t)
	nftIn(t, ns, got, "-c", "-f", "-")
}

func TestRenderKeys(t *testing.T) {
	for _, tc := range []struct {
		key  Key
		el   ElementKey
		want string
	}{
		{KeyIPSaddr, addrKey("10.0.0.1"), "10.0.0.1"},
		{KeyIPSaddr, prefixKey("10.1.0.0/16"), "10.1.0.0/16"},
		{KeyIPSaddr, rangeKey("10.0.0.1", "10.0.0.2"), "10.0.0.1-10.0.0.2"},
		{KeyIPSaddr, prefixKey("0.0.0.0/0"), "0.0.0.0/0"},
		{KeyIP6Daddr, prefixKey("fd00::/8"), "fd00::/8"},
		{KeyL4Proto, ElementKey{Proto: 6}, "tcp"},
		{KeyL4Proto, ElementKey{Proto: 99}, "99"},
		{KeyL4ProtoDport, ElementKey{Proto: 17, Port: 53, PortEnd: 53}, "udp . 53"},
		{KeyL4ProtoDport, ElementKey{Proto: 132, Port: 1, PortEnd: 65535}, "sctp . 1-65535"},
		{KeyIifname, ElementKey{Ifname: "eth0"}, `"eth0"`},
	} {
		if got := renderKey(tc.key, tc.el); got != tc.want {
			t.Errorf("renderKey(%v, %v) = %q, want %q", tc.key, tc.el, got, tc.want)
		}
	}
}

func TestPriorityString(t *testing.T) {
	for _, tc := range []struct {
		h    Hook
		p    int32
		want string
	}{
		{HookForward, 0, "filter"}, {HookForward, 7, "filter + 7"}, {HookForward, -7, "filter - 7"},
		{HookForward, 1000, "1000"}, {HookOutput, -200, "-200"}, {HookOutput, -95, "dstnat + 5"},
		{HookInput, 105, "srcnat + 5"}, {HookForward, 55, "security + 5"},
	} {
		if got := priorityString(tc.h, tc.p); got != tc.want {
			t.Errorf("priorityString(%s, %d) = %q, want %q", tc.h, tc.p, got, tc.want)
		}
	}
}

func TestComment(t *testing.T) {
	long := ""
	for range 50 {
		long += "äb"
	}
	for _, tc := range []struct{ in, want string }{
		{`say "hi"`, `say 'hi'`},
		{"a\nb", "a b"},
		{long, long[:128]}, {long[:129], long[:128]}, {long[:130], long[:128]},
	} {
		if got := Comment(tc.in); got != tc.want {
			t.Errorf("Comment(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestQueuedMessages guards the chain-comment workaround: the google/nftables Conn still has the
// message queue it relies on.
func TestQueuedMessages(t *testing.T) {
	nc, err := nftables.New(nftables.WithTestDial(func([]netlink.Message) ([]netlink.Message, error) { return nil, nil }))
	if err != nil {
		t.Fatal(err)
	}
	q := queuedMessages(nc)
	if q == nil {
		t.Fatal("google/nftables Conn has no message queue of the v0.3.0 layout: chain comments cannot be sent")
	}
	nc.AddChain(&nftables.Chain{Name: "c", Table: nfTable("t")})
	before := len((*q)[0].Data)
	if !addChainComment(nc, "hello") || len(*q) != 1 || len((*q)[0].Data) <= before {
		t.Fatalf("comment not appended to the queued NEWCHAIN message")
	}
}

// TestBytecodeMatchesNft: the kernel holds the same bytecode for the sample table whether it was
// committed by Replace or loaded from Render's text by nft 1.0.6 itself (`nft --debug=netlink
// list table`), so the rules match packets exactly as their printed form says. nft additionally
// stores an all-zero end sentinel in interval sets and an "open interval" element flag; neither
// changes a lookup or the listing, both are ignored here.
func TestBytecodeMatchesNft(t *testing.T) {
	tb := sampleTable("bytecode")
	c, ours := openConn(t)
	if err := c.Replace(tb); err != nil {
		t.Fatal(err)
	}
	theirs, _ := newNetns(t)
	nftIn(t, theirs, Render(tb), "-f", "-")
	dump := func(ns string) string {
		out := nftIn(t, ns, "", "--debug=netlink", "list", "table", "inet", tb.Name)
		out, _, _ = strings.Cut(out, "\ntable inet") // the bytecode part, before the listing
		var rules, elems []string
		for _, l := range strings.Split(out, "\n") {
			switch {
			case sentinel.MatchString(l):
			case strings.HasPrefix(strings.TrimSpace(l), "element "):
				elems = append(elems, strings.Replace(l, `\x00\x01\x04\x01\x00\x00\x00 }`, `\x00 }`, 1))
			default:
				rules = append(rules, handles.ReplaceAllString(l, "$1"))
			}
		}
		slices.Sort(elems)
		return strings.Join(rules, "\n") + "\n" + strings.Join(elems, "\n")
	}
	if o, n := dump(ours), dump(theirs); o != n {
		t.Errorf("bytecode differs\n--- ours\n%s\n--- nft\n%s", o, n)
	}
}

var (
	sentinel = regexp.MustCompile(`^\s*element (00000000 ?)+ : 1 \[end\]$`)
	handles  = regexp.MustCompile(`^(inet \S+ \S+) \d+( \d+)?$`)
)
