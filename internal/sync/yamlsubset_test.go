package sync

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// yamlSubsetCorpus: documents the subset reads (read: true) and documents it leaves to yaml.v2,
// each either valid or not.
var yamlSubsetCorpus = []struct {
	name string
	doc  string
	read bool
}{
	{"empty", "", true},
	{"comments only", "# nothing\n  # here\n", true},
	{"block mapping", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: b\n", true},
	{"indented top level", "  a: 1\n  b: 2\n", true},
	{"sequence at its key's indentation", "a:\n- x\n- y\nb: 1\n", true},
	{"sequence indented", "a:\n  - x\n  -   y\nb: 1\n", true},
	{"sequence of mappings", "containers:\n- name: c\n  image: registry.k8s.io/pause:3.9\n  ports:\n  - containerPort: 80\n    name: http\n- name: d\n", true},
	{"nested sequences", "a:\n- - 1\n  - 2\n- -   3\n", true},
	{"entry below its dash", "a:\n-\n  b: 1\n-\n- c\n", true},
	{"null values", "a:\nb: ~\nc: null\nd: Null\ne: NULL\n", true},
	{"YAML 1.1 booleans", "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: N\ng: true\nh: False\n", true},
	{"integers", "a: 0\nb: 80\nc: -1\nd: +5\ne: 0x1F\nf: 1_000\ng: 017\nh: 0o17\ni: 18446744073709551615\nj: 0b101\n", true},
	{"strings that look like numbers", "a: 10.0.0.1\nb: 10.0.0.0/8\nc: fd00::1\nd: 1.2.3\ne: .x\nf: -x\ng: 1-2\nh: 0xZZ\ni: 123abc\n", true},
	{"quoted", "a: \"x y\"\nb: 'it''s'\nc: \"say \\\"hi\\\"\\n\\t\\\\ / \\r\"\nd: \"80\"\ne: 'yes'\n'f g': 1\n\"h\": 2\n", true},
	{"comments after values", "a: b # c\nd: 'e' # f\ng: h#i\nj: [1, 2] # k\nl: # m\n  p: o\n", true},
	{"HTML characters", "a: <b>&c\n", true},
	{"plain with inner colon and spaces", "image: registry.k8s.io/pause:3.9\nurl: http://x/y?z=1\nsentence: a b  c\n", true},
	{"trailing spaces", "a: b   \nc:   \n", true},
	{"flow", "a: {}\nb: []\nc: {x: 1, z: [a, 'b', \"c\"]}\nd: [{ip: 10.0.1.1}, {ip: \"fd00::1:1\"}]\ne: { f : g }\n", true},
	{"flow in sequence", "- {name: serve-80, containerPort: 80}\n- [1, 2]\n", true},
	{"sorted keys", "z: 1\na: 2\nm: {c: 1, b: 2, a: 3}\n", true},
	{"deep nesting", "a:\n  b:\n    c:\n      d:\n      - e:\n          f: 1\n", true},
	{"kubernetes labels", "metadata:\n  labels:\n    app.kubernetes.io/name: x\n    kubernetes.io/metadata.name: y\n", true},
	{"key with inner spaces", "a b: c\n", true},
	{"key spaces before colon", "a  : c\n", true},
	{"markers inside values", "a: ---\nb: ...\nc: -- x\n", true},
	{"dash keys and values", "-a: -1\nb: -x\nc: x-\n", true},
	{"colons inside plain values", "a: x:y\nb: 'p:q'\nc: a::1\n", true},
	{"plain starting with a colon", "a: ::1\n", false},
	{"flow plain with spaces", "a: [a b, c  d ,e]\n", true},
	{"value only a comment", "a:    # nothing\nb: 1\n", true},
	{"three nested dashes", "- - - x\n    - y\n", true},
	{"flow empty value", "a: {b: }\n", false},
	{"flow value missing after comma", "a: [1,,2]\n", false},
	{"question mark key", "?a: 1\n", false},

	// left to yaml.v2: valid
	{"float", "a: 1.5\n", false},
	{"float integer", "a: 1.0\n", false},
	{"exponent", "a: 1e3\n", false},
	{"leading zero decimal", "a: 08\n", false},
	{"integer beyond 64 bits", "a: 99999999999999999999\n", false},
	{"escaped slash", "a: \"\\/\"\n", false},
	{"infinity", "a: .inf\n", false},
	{"timestamp", "a: 2024-01-02T03:04:05Z\n", false},
	{"date", "a: 2024-01-02\n", false},
	{"date-like", "a: 2024-xx\n", false},
	{"anchor and alias", "a: &x 1\nb: *x\n", false},
	{"merge key", "a: {x: 1}\nb:\n  <<: {y: 2}\n", false},
	{"tag", "a: !!str 1\n", false},
	{"literal block scalar", "a: |\n  x\n  y\n", false},
	{"folded block scalar", "a: >\n  x\n  y\n", false},
	{"multi-line plain", "a: x\n  y\n", false},
	{"multi-line plain in sequence", "- x\n  y\n", false},
	{"multi-line quoted", "a: \"x\n  y\"\n", false},
	{"multi-line flow", "a: {x: 1,\n  y: 2}\n", false},
	{"unicode", "a: é\n", false},
	{"unicode escape", "a: \"\\u00e9\"\n", false},
	{"tab", "a:\tb\n", false},
	{"carriage return", "a: b\r\n", false},
	{"json", "{\"a\": 1}\n", false},
	{"boolean key", "yes: 1\n", false},
	{"integer key", "80: http\n", false},
	{"null key", "~: 1\n", false},
	{"complex key", "? a\n: b\n", false},
	{"flow implicit null", "a: {b}\n", false},
	{"flow trailing comma", "a: [1, 2, ]\n", false},
	{"flow colon inside scalar", "a: [fd00::1]\n", false},
	{"flow pair in sequence", "a: [b: c]\n", false},
	{"flow adjacent value", "a: {\"b\":c}\n", false},
	{"document end", "a: 1\n...\n", false},
	{"directive", "%YAML 1.1\n---\na: 1\n", false},
	{"scalar document", "hello\n", false},

	// left to yaml.v2: invalid, or valid only in a way the subset does not read
	{"duplicate key", "a: 1\nb: 2\na: 3\n", false},
	{"duplicate key in flow", "a: {b: 1, b: 2}\n", false},
	{"duplicate nested key", "a:\n  b: 1\n  b: 1\n", false},
	{"mapping on a key's line", "a: b: c\n", false},
	{"bad indentation", "a:\n    b: 1\n  c: 2\n", false},
	{"sequence in mapping", "a: 1\n- b\n", false},
	{"unclosed quote", "a: \"b\n", false},
	{"unclosed flow", "a: [1, 2\n", false},
	{"text after flow", "a: [1] x\n", false},
	{"text after quote", "a: 'b' c\n", false},
	{"dash value", "a: - b\n", false},
	{"bare scalar in mapping", "a: 1\nb\n", false},
	{"deeper line after value", "a: 1\n  b: 2\n", false},
	{"colon without space", "a:b\n", false},
}

func subsetJSON(t testing.TB, doc []byte) (want, got []byte, read bool, wantErr error) {
	t.Helper()
	var y yamlSubset
	got, read = y.translate(doc)
	got = bytes.Clone(got)
	want, wantErr = yaml.YAMLToJSONStrict(doc)
	return want, got, read, wantErr
}

// TestYAMLSubsetMatchesYAMLToJSON: a document the subset reads becomes the very JSON
// YAMLToJSONStrict makes of it; the others are declined, so that yaml.v2 reads them (and
// reports their errors).
func TestYAMLSubsetMatchesYAMLToJSON(t *testing.T) {
	for _, tt := range yamlSubsetCorpus {
		t.Run(tt.name, func(t *testing.T) {
			want, got, read, wantErr := subsetJSON(t, []byte(tt.doc))
			if read != tt.read {
				t.Errorf("read = %v, want %v (yaml.v2: %s, %v)", read, tt.read, want, wantErr)
			}
			if !read {
				return
			}
			if wantErr != nil {
				t.Fatalf("the subset read %q as %s; YAMLToJSONStrict fails: %v", tt.doc, got, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("subset %s\n  yaml.v2 %s", got, want)
			}
		})
	}
}

// TestYAMLSubsetReadsManifests: the documents of the test cluster and of the many-policies
// benchmark (block style as kubectl writes it, and flow style) match YAMLToJSONStrict, and the
// benchmark's are all read by the subset.
func TestYAMLSubsetReadsManifests(t *testing.T) {
	var docs [][]byte
	split := func(r io.Reader) {
		yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
		for {
			d, err := yr.Read()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, bytes.Clone(d))
		}
	}
	files, _ := filepath.Glob("testdata/cluster/*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		split(bytes.NewReader(b))
	}
	cluster := len(docs)
	var b bytes.Buffer
	m := scale.ManyPolicies{Policies: 3, PeersPerPolicy: 2, Node: "n"}
	if err := m.WritePods(&b); err != nil {
		t.Fatal(err)
	}
	if err := m.WritePolicies(&b); err != nil {
		t.Fatal(err)
	}
	split(&b)
	for i, d := range docs {
		want, got, read, wantErr := subsetJSON(t, d)
		switch {
		case !read && i >= cluster:
			t.Errorf("the subset declines a generated manifest:\n%s", d)
		case read && (wantErr != nil || !bytes.Equal(got, want)):
			t.Errorf("document %d:\n%s\nsubset %s\nyaml.v2 %s %v", i, d, got, want, wantErr)
		}
	}
}

// FuzzYAMLSubset: whatever the subset reads, YAMLToJSONStrict reads too, into the same JSON.
func FuzzYAMLSubset(f *testing.F) {
	for _, tt := range yamlSubsetCorpus {
		f.Add(tt.doc)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		want, got, read, wantErr := subsetJSON(t, []byte(doc))
		if !read {
			return
		}
		if wantErr != nil {
			t.Fatalf("the subset read %q as %s; YAMLToJSONStrict fails: %v", doc, got, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q:\nsubset  %s\nyaml.v2 %s", doc, got, want)
		}
		if strings.Contains(doc, "\t") {
			t.Fatalf("the subset read a tab: %q", doc)
		}
	})
}
