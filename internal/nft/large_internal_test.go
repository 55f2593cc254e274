package nft

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/graph"
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/scale"
)

// TestLargePolicyMatchesModel compiles a scaled-down scale.LargePolicy (nested and overlapping
// ipBlocks with excepts, pod and namespace selectors, a port per rule and a named port) and
// checks, for every known peer and a sample of other addresses, ports and protocols, that the
// compiled structure gives the model's outcome.
func TestLargePolicyMatchesModel(t *testing.T) {
	spec := scale.LargePolicySpec{Pods: 2000, Namespaces: 20, LocalPods: 3, Rules: 12, PeersPerRule: 25, Node: "n"}
	ups, pol := scale.LargePolicy(spec)
	g := graph.New(graph.Config{NodeName: spec.Node})
	for _, u := range append(ups, model.PolicySet{Policy: pol}) {
		g.OnUpdate(u)
	}
	s := NewState()
	var local *dataplane.EndpointUpdated
	for _, m := range g.Flush() {
		s.Apply(m)
		if e, ok := m.(dataplane.EndpointUpdated); ok && local == nil {
			local = &e
		}
	}
	if local == nil || len(local.Ingress) == 0 {
		t.Fatal("no local endpoint with ingress policy")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, is4 := range []bool{true, false} {
		var la netip.Addr
		for _, a := range local.Addrs {
			if a.Is4() == is4 {
				la = a
			}
		}
		cp := s.compile(model.Ingress, local.Ingress, la, is4)
		peers := []netip.Addr{}
		for a := range cp.Peers {
			peers = append(peers, a)
		}
		for range 2000 { // addresses around the ipBlocks, known or not
			if is4 {
				peers = append(peers, netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(80)), byte(rng.IntN(256))}))
			} else {
				peers = append(peers, scale.PodAddrs(rng.IntN(4000))[1])
			}
		}
		if len(cp.Peers) < 1000 || len(cp.Intervals) < 20 {
			t.Fatalf("v4=%v: %d known peers, %d intervals: the test no longer exercises the large shapes", is4, len(cp.Peers), len(cp.Intervals))
		}
		for i, peer := range peers {
			ports := []uint16{8000, 8080, uint16(8000 + rng.IntN(spec.Rules+2)), uint16(rng.IntN(65536))}
			for _, proto := range []model.Protocol{model.ProtocolTCP, model.ProtocolUDP, model.ProtocolICMP} {
				for _, port := range ports {
					want := s.Evaluate(model.Ingress, local.Ingress, la, peer, proto, 0, port)
					if got := cp.kernelLookup(peer, proto, 0, port); got != want {
						t.Fatalf("peer %d %v %s/%d: compiled %v, model %v", i, peer, proto, port, got, want)
					}
				}
			}
		}
		t.Logf("v4=%v: %d known peers, %d intervals, %d classes", is4, len(cp.Peers), len(cp.Intervals), len(cp.Classes))
	}
}
