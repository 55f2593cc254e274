package boundary

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/nftpolicy/nftpolicy/"

// mayImport lists, for every package of the module that is not a test, the packages of the
// module it may import: a stage imports the contracts and the stages before it, never one after
// it. A package missing from the table fails the test, so a new package gets a place in the flow.
var mayImport = map[string][]string{
	"internal/model":           nil,
	"internal/selector":        nil,
	"internal/setmap":          nil,
	"internal/dataplane":       {"internal/model"},
	"internal/scale":           {"internal/model"},
	"internal/sync":            {"internal/model", "internal/selector"},
	"internal/ifmon":           {"internal/model"},
	"internal/graph":           {"internal/model", "internal/selector", "internal/setmap", "internal/dataplane"},
	"internal/graph/graphtest": {"internal/model", "internal/dataplane", "internal/graph"},
	"internal/nft/ruleset":     nil,
	"internal/nft":             {"internal/model", "internal/dataplane", "internal/setmap", "internal/nft/ruleset"},
	// the kernel side of nft: applies the builder's table through ruleset's connection
	"internal/nft/kernel": {"internal/dataplane", "internal/nft", "internal/nft/ruleset"},
	// the fixtures the tests of nft and nft/kernel share
	"internal/nft/nfttest": {"internal/model", "internal/dataplane", "internal/graph", "internal/nft", "internal/testenv"},
	// nflog reads the kernel's logs of denied packets, beside the dataplane; trace follows
	// packets through the node's tables with the kernel's tracing, in a table of its own
	"internal/nflog": nil,
	"internal/trace": nil,
	// fqdn keeps the addresses DNS answers give the domainNames patterns, beside the dataplane
	"internal/fqdn": {"internal/nflog", "internal/dataplane"},
	// the DNS server and client the tests of fqdn and agent share
	"internal/fqdn/fqdntest": {"internal/nflog", "internal/dataplane", "internal/fqdn", "internal/testenv", "internal/testenv/netns"},
	"internal/agent": {"internal/model", "internal/dataplane", "internal/sync", "internal/graph", "internal/nft",
		"internal/nft/kernel", "internal/nft/ruleset", "internal/ifmon", "internal/nflog", "internal/fqdn"},
	// explain runs the stages offline for one flow, on top of them as the agent does
	"internal/explain": {"internal/model", "internal/sync", "internal/graph", "internal/nft", "internal/nft/ruleset"},
	"cmd/nftpolicy": {"internal/model", "internal/dataplane", "internal/sync", "internal/graph", "internal/nft",
		"internal/nft/kernel", "internal/nft/ruleset", "internal/agent", "internal/explain", "internal/trace",
		"internal/fqdn"},
	// the local cluster harness, and the demo that drives it
	"internal/testenv":           nil,
	"internal/testenv/netns":     {"internal/testenv"},
	"internal/testenv/kube":      {"internal/testenv"},
	"internal/testenv/agentproc": {"internal/testenv", "internal/testenv/kube", "internal/testenv/netns", "internal/nft/ruleset"},
	"cmd/nftpolicy-demo":         {"internal/testenv/agentproc", "internal/testenv/kube", "internal/testenv/netns"},
	// the OCI runtime wrapper of the offline kind path (hack/kind)
	"hack/kind/runc-nocap": nil,
	// test-only packages (a doc.go and tests)
	"test/bench":    nil,
	"test/e2e":      nil,
	"test/chaos":    nil,
	"test/boundary": nil,
}

// noKubernetes are the packages that must not depend on any k8s.io package, directly or not:
// only sync (and what sits on top of it) knows Kubernetes.
var noKubernetes = []string{"internal/model", "internal/selector", "internal/dataplane", "internal/graph",
	"internal/nft", "internal/nft/kernel", "internal/nft/ruleset", "internal/ifmon", "internal/nflog",
	"internal/trace", "internal/fqdn"}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// packages lists the module's packages (not their tests) with their imports and dependencies.
func packages(t *testing.T) map[string]listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Imports,Deps", "../../...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	pkgs := map[string]listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module)] = p
	}
	if len(pkgs) < len(mayImport)-2 {
		t.Fatalf("go list found %d packages: is the test run from test/boundary?", len(pkgs))
	}
	return pkgs
}

// TestImportsFollowTheFlow: every import inside the module is one the table allows.
func TestImportsFollowTheFlow(t *testing.T) {
	for name, p := range packages(t) {
		allowed, known := mayImport[name]
		if !known {
			t.Errorf("package %s has no place in the data flow: add it to mayImport", name)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if ok && !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, against the data flow (it may import %v)", name, dep, allowed)
			}
		}
	}
}

// TestNoKubernetesBelowSync: the graph, the dataplane and what they use depend on no k8s.io
// package.
func TestNoKubernetesBelowSync(t *testing.T) {
	pkgs := packages(t)
	for _, name := range noKubernetes {
		p, ok := pkgs[name]
		if !ok {
			t.Errorf("package %s not found", name)
			continue
		}
		var k8s []string
		for _, d := range p.Deps {
			if strings.HasPrefix(d, "k8s.io/") || strings.HasPrefix(d, "sigs.k8s.io/") {
				k8s = append(k8s, d)
			}
		}
		if len(k8s) > 0 {
			t.Errorf("%s depends on %d Kubernetes packages, e.g. %s", name, len(k8s), k8s[0])
		}
	}
}
