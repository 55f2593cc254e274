package kernel_test

import (
	"bytes"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// TestGroupNamePassesInKernel: local pods joining, leaving and relabelled so that a group
// chain's name (its lowest address) passes to a group of other policies — whose chain comment
// differs — commit incrementally: no commit writes the table whole, the kernel holds a fresh
// builder's table after every step, and nothing drifted.
func TestGroupNamePassesInKernel(t *testing.T) {
	ns, fd := bareNetns(t)
	var logs bytes.Buffer
	cfg := nft.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	a, err := kernel.Open(fd, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })

	pod := func(name, app string, last byte) model.Update {
		return model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: name}, Node: "a",
			Labels: model.LabelsOf(map[string]string{"app": app}), Running: true,
			Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, 0, last}), netip.AddrFrom16([16]byte{0xfd, 0, 15: last})}}}
	}
	gone := func(name string) model.Update {
		return model.EndpointDeleted{Key: model.EndpointKey{Namespace: "x", Name: name}}
	}
	policy := func(name, app string, port uint16) model.Update {
		return model.PolicySet{Policy: nfttest.NP("x", name, "app == '"+app+"'",
			[]model.Rule{nfttest.AllowTCP(model.Peer{Selector: "role == 'client'"}, model.Peer{Ports: []model.Port{nfttest.TCP(port)}})},
			nil, model.Ingress)}
	}
	initial := []model.Update{
		model.NamespaceSet{Namespace: model.Namespace{Name: "x"}},
		model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "client"}, Node: "b",
			Labels: model.LabelsOf(map[string]string{"role": "client"}), Running: true, Addrs: []netip.Addr{netip.MustParseAddr("10.244.1.9")}}},
		policy("web", "web", 80), policy("db", "db", 5432), policy("cache", "cache", 6379),
		pod("web-1", "web", 10), pod("db-1", "db", 20), pod("cache-1", "cache", 30),
		model.SyncStatusUpdate{Status: model.InSync},
	}
	var all []model.Update
	g := graph.New(graph.Config{NodeName: "a"})
	feed := func(what string, us ...model.Update) {
		t.Helper()
		all = append(all, us...)
		for _, u := range us {
			g.OnUpdate(u)
		}
		if err := a.Apply(g.Flush()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if strings.Contains(logs.String(), "a commit wrote the table whole") {
			t.Fatalf("%s: a commit wrote the table whole:\n%s", what, logs.String())
		}
		fresh := graph.New(graph.Config{NodeName: "a"})
		for _, u := range all {
			fresh.OnUpdate(u)
		}
		b := nft.NewBuilder(nft.Config{})
		b.Apply(fresh.Flush())
		if got, want := testenv.NormalizeListing(nftIn(t, ns, "list", "table", "inet", nft.DefaultTable)), testenv.NormalizeListing(b.Render()); got != want {
			t.Fatalf("%s: the kernel holds\n%s\nwant a fresh builder's\n%s", what, got, want)
		}
		if drift, err := a.Resync(); err != nil || drift {
			t.Fatalf("%s: Resync = %v, %v; want no drift", what, drift, err)
		}
	}
	feed("first apply", initial...)
	// web's group (10.244.0.10) takes cache's pod: the name of cache's group passes to nobody,
	// then a db pod with a lower address than web's takes web's name to db's policies
	feed("cache-1 relabelled to web", pod("cache-1", "web", 30))
	feed("db-2 created below web-1", pod("db-2", "db", 5))
	feed("db-2 relabelled to web: the lowest of web's group", pod("db-2", "web", 5))
	feed("web-1 relabelled to db: db's group is named by 10.244.0.20 again", pod("web-1", "db", 10))
	feed("db-2 deleted", gone("db-2"))
	feed("web-1 back to web, above db's lowest", pod("web-1", "web", 10))
}
