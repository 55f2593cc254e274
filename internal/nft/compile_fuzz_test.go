package nft

import (
	"math/rand"
	"testing"

	"github.com/nftpolicy/nftpolicy/internal/testenv"
)

// FuzzCompile: the fuzz input drives TestCompileMatchesModel's generator, widened (modelGen):
// sets and named-port sets over addresses of both families, tiers of Allow, Deny, Pass and Log
// rules over CIDRs with excepts, port ranges anywhere, negated ports, protocols and named ports,
// each rule used for ingress and egress. For every model it makes, a compile never panics and
// never runs out of budget, and for both directions and both families the compiled structure
// (its lookup and what the kernel does with its fast path) and, when the group has it, the
// listed shape give every probed packet the model's outcome (State.Evaluate); after set
// members join and leave, the structure recompiled peer by peer equals a fresh compile and the
// model.
func FuzzCompile(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for i := range 8 {
		b := make([]byte, 64<<(i%4))
		rng.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c := testenv.NewChoices(in)
		g := newModelGen(c, true)
		s, tiers := g.state("", c.Intn(3) == 0, c.Intn(2) == 0)
		g.check(t, "", s, tiers, 1+c.Intn(2))
	})
}
