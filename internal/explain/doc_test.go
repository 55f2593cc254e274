package explain

import (
	"os"
	"strings"
	"testing"
)

// TestOperatingDocCalicoManifests: the manifests docs/operating.md shows in its Calico worked
// example are testdata/calico's, which its explain examples (checked by cmd/nftpolicy's
// TestOperatingDocExplain) run on.
func TestOperatingDocCalicoManifests(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(doc), "**A worked example.** internal/explain/testdata/calico")
	if !ok {
		t.Fatal("docs/operating.md has no Calico worked example")
	}
	_, shown, _ := strings.Cut(example, "```yaml\n")
	shown, _, _ = strings.Cut(shown, "```")
	file, err := os.ReadFile("testdata/calico/10-calico.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := string(file) // without its leading comment
	for strings.HasPrefix(want, "#") {
		_, want, _ = strings.Cut(want, "\n")
	}
	if shown != want {
		t.Errorf("docs/operating.md shows\n%s\ntestdata/calico/10-calico.yaml holds\n%s", shown, want)
	}
}
