package nft

import (
	"github.com/nftpolicy/nftpolicy/internal/model"
	"github.com/nftpolicy/nftpolicy/internal/nft/ruleset"
)

// pending is the work of the current apply: what the folded messages made dirty, which the
// recompute consumes, and the objects of the table it changed, which the apply hands over.
type pending struct {
	policies  map[model.PolicyKey]struct{}   // changed policies: their endpoints and groups are redone
	endpoints map[model.EndpointKey]struct{} // endpoints to regroup
	groups    map[string]struct{}            // groups marked stale or with dirty peers
	// rejected are the policies rejected during the current recompute: their groups are
	// recompiled before the table is handed over.
	rejected map[model.PolicyKey]struct{}
	changes  *ruleset.Changes // the chains and sets put or dropped since the last take
	// sinceCounted are the chains and sets put or dropped since Builder.Counted last took its
	// snapshot: what it looks at to tell whether the snapshot still holds.
	sinceCounted *ruleset.Changes
}

func newPending() pending {
	return pending{
		policies:  map[model.PolicyKey]struct{}{},
		endpoints: map[model.EndpointKey]struct{}{},
		groups:    map[string]struct{}{},
		changes:   newChanges(),

		sinceCounted: newChanges(),
	}
}

// chain records that a chain was put or dropped.
func (p *pending) chain(name string) {
	p.changes.Chains[name] = struct{}{}
	p.sinceCounted.Chains[name] = struct{}{}
}

// set records that a set was put or dropped.
func (p *pending) set(name string) {
	p.changes.Sets[name] = struct{}{}
	p.sinceCounted.Sets[name] = struct{}{}
}

func newChanges() *ruleset.Changes {
	return &ruleset.Changes{Sets: map[string]struct{}{}, Chains: map[string]struct{}{}}
}

// take returns the changes recorded so far and starts recording anew.
func (p *pending) take() *ruleset.Changes {
	c := p.changes
	p.changes = newChanges()
	return c
}

// reject records a policy rejected by the current recompute.
func (p *pending) reject(k model.PolicyKey) {
	if p.rejected == nil {
		p.rejected = map[model.PolicyKey]struct{}{}
	}
	p.rejected[k] = struct{}{}
}

// requeueRejected makes the policies rejected meanwhile the next recompute's changed policies.
func (p *pending) requeueRejected() {
	for k := range p.rejected {
		p.policies[k] = struct{}{}
	}
	p.rejected = nil
}
