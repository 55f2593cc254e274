package kernel_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft"
	"github.com/nftpolicy/nftpolicy/internal/nft/kernel"
	"github.com/nftpolicy/nftpolicy/internal/nft/nfttest"
)

// TestSetSizes: the first commit gives a set of at least 1,024 elements a size (twice its
// elements, to a power of two) and smaller sets none; the set fills up to that size in place;
// one element more has that set written anew with a larger size, in one transaction, and
// the kernel holds every element each time (Resync finds no drift).
func TestSetSizes(t *testing.T) {
	ns, fd := bareNetns(t)
	dp, err := kernel.Open(fd, nft.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	g := graph.New(graph.Config{NodeName: "a"})
	clients := 0
	addClients := func(n int) {
		for range n {
			g.OnUpdate(model.EndpointSet{Endpoint: model.Endpoint{
				Key: model.EndpointKey{Namespace: "x", Name: fmt.Sprint("client-", clients)}, Node: "b",
				Labels: model.LabelsOf(map[string]string{"role": "client"}),
				Addrs:  []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(clients >> 8), byte(clients)})},
			}})
			clients++
		}
	}
	g.OnUpdate(model.NamespaceSet{Namespace: model.Namespace{Name: "x", Labels: map[string]string{"ns": "x"}}})
	g.OnUpdate(model.EndpointSet{Endpoint: model.Endpoint{Key: model.EndpointKey{Namespace: "x", Name: "server"}, Node: "a",
		Labels: model.LabelsOf(map[string]string{"role": "server"}), Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}}})
	g.OnUpdate(model.PolicySet{Policy: nfttest.NP("x", "clients-to-server", "role == 'server'", []model.Rule{{
		Action: model.ActionAllow, Protocol: model.ProtocolTCP, Source: model.Peer{Selector: "role == 'client'"},
		Destination: model.Peer{Ports: []model.Port{{First: 80, Last: 80}}},
	}}, nil, model.Ingress)})
	addClients(1500)
	g.OnUpdate(model.SyncStatusUpdate{Status: model.InSync})

	sizeLine := regexp.MustCompile(`(?m)^\s*size (\d+)$`)
	step := func(name string, wantSize string, wantTransactions uint64) {
		t.Helper()
		if err := dp.Apply(g.Flush()); err != nil {
			t.Fatalf("%s: Apply: %v", name, err)
		}
		if drift, err := dp.Resync(); err != nil || drift {
			t.Fatalf("%s: Resync = %v, %v; want the kernel to hold the table", name, drift, err)
		}
		if _, n := dp.Stats(); n != wantTransactions {
			t.Errorf("%s: %d transactions, want %d", name, n, wantTransactions)
		}
		var sizes []string
		for _, m := range sizeLine.FindAllStringSubmatch(nftIn(t, ns, "list", "table", "inet", nft.DefaultTable), -1) {
			sizes = append(sizes, m[1])
		}
		if len(sizes) != 1 || sizes[0] != wantSize {
			t.Errorf("%s: the kernel lists sizes %v, want one set (the clients', %d elements) of size %s", name, sizes, clients, wantSize)
		}
	}
	step("1,500 clients: 2 × 1,500 to a power of two", "4096", 1)
	addClients(4096 - 1500)
	step("4,096 clients: filled in place", "4096", 2)
	addClients(1)
	step("4,097 clients: the set written anew with a new size", "16384", 3)
}
