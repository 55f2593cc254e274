package graph

import (
	"cmp"
	"slices"

	"github.com/nftpolicy/nftpolicy/internal/dataplane"
	"github.com/nftpolicy/nftpolicy/internal/model"
)

// changes is what the stages tell the sequencer: which objects changed since the last flush.
type changes interface {
	setChanged(dataplane.SetID)
	policyChanged(model.PolicyKey)
	endpointChanged(model.EndpointKey)
}

// sequencer is stage 5, the event sequencer: the objects touched since the last flush and
// what was last sent of each (one pending per kind), and the ordered emission. It asks the
// set calculator, the active policies and the resolver for their objects' messages (source).
type sequencer struct {
	sets      setSource
	policies  policySource
	endpoints endpointSource

	inSync     bool
	sentInSync bool

	pendingSets      pending[dataplane.SetID, dataplane.Message]
	pendingPolicies  pending[model.PolicyKey, *dataplane.PolicyUpdated]
	pendingEndpoints pending[model.EndpointKey, *dataplane.EndpointUpdated]
}

// source is what the sequencer asks a stage for: an object's message for this flush (sent:
// one was sent before), or that the object is gone (exists false).
type source[K comparable, M any] interface {
	message(k K, sent bool) (msg M, exists bool)
}

type (
	setSource      = source[dataplane.SetID, dataplane.Message]
	policySource   = source[model.PolicyKey, *dataplane.PolicyUpdated]
	endpointSource = source[model.EndpointKey, *dataplane.EndpointUpdated]
)

func newSequencer() *sequencer {
	return &sequencer{
		// A set's message is its delta: nil when nothing changed. What was sent is not kept.
		pendingSets: newPending(cmp.Compare[dataplane.SetID],
			func(_, now dataplane.Message) bool { return now == nil }, false),
		pendingPolicies:  newPending(comparePolicyKeys, (*dataplane.PolicyUpdated).Equal, true),
		pendingEndpoints: newPending(compareEndpointKeys, (*dataplane.EndpointUpdated).Equal, true),
	}
}

func (q *sequencer) wire(sets setSource, policies policySource, endpoints endpointSource) {
	q.sets, q.policies, q.endpoints = sets, policies, endpoints
}

func (q *sequencer) setChanged(id dataplane.SetID)       { q.pendingSets.touch(id) }
func (q *sequencer) policyChanged(k model.PolicyKey)     { q.pendingPolicies.touch(k) }
func (q *sequencer) endpointChanged(k model.EndpointKey) { q.pendingEndpoints.touch(k) }

// flush emits, in internal/dataplane's order, the changed sets, policies and endpoints, then
// the removed endpoints, policies and sets, then InSync once.
func (q *sequencer) flush() []dataplane.Message {
	if !q.inSync {
		return nil
	}
	var out []dataplane.Message
	out, removedSets := q.pendingSets.flush(q.sets, out, setMessage)
	out, removedPolicies := q.pendingPolicies.flush(q.policies, out, policyMessage)
	out, removedEndpoints := q.pendingEndpoints.flush(q.endpoints, out, endpointMessage)
	for _, k := range removedEndpoints {
		out = append(out, dataplane.EndpointRemoved{Key: k})
	}
	for _, k := range removedPolicies {
		out = append(out, dataplane.PolicyRemoved{Key: k})
	}
	for _, id := range removedSets {
		out = append(out, dataplane.SetRemoved{ID: id})
	}
	if !q.sentInSync {
		q.sentInSync = true
		out = append(out, dataplane.InSync{})
	}
	return out
}

func setMessage(m dataplane.Message) dataplane.Message               { return m }
func policyMessage(m *dataplane.PolicyUpdated) dataplane.Message     { return *m }
func endpointMessage(m *dataplane.EndpointUpdated) dataplane.Message { return *m }

// pending is the sequencer's record of one kind of object: the keys touched since the last
// flush and what was last sent for each key (or only that something was, when keep is false).
type pending[K comparable, M any] struct {
	dirty map[K]struct{}
	sent  map[K]M
	// order sorts the keys of one flush.
	order func(a, b K) int
	// equal reports whether now changes nothing of last, the message sent before.
	equal func(last, now M) bool
	keep  bool
}

func newPending[K comparable, M any](order func(a, b K) int, equal func(last, now M) bool, keep bool) pending[K, M] {
	return pending[K, M]{dirty: map[K]struct{}{}, sent: map[K]M{}, order: order, equal: equal, keep: keep}
}

func (p *pending[K, M]) touch(k K) { p.dirty[k] = struct{}{} }

// flush visits the touched keys in order: src gives a key's message (told whether one was
// sent before), appended to out as asMessage makes it unless it equals the last one sent, or
// that its object is gone. It returns out and the gone keys that had been sent, in order, for
// their removal messages. Its cost is O(touched keys · log) plus src's.
func (p *pending[K, M]) flush(src source[K, M], out []dataplane.Message, asMessage func(M) dataplane.Message) ([]dataplane.Message, []K) {
	if len(p.dirty) == 0 {
		return out, nil
	}
	keys := make([]K, 0, len(p.dirty))
	for k := range p.dirty {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, p.order)
	clear(p.dirty)
	var removed []K
	var zero M
	for _, k := range keys {
		last, sent := p.sent[k]
		now, exists := src.message(k, sent)
		if !exists {
			if sent {
				removed = append(removed, k)
				delete(p.sent, k)
			}
			continue
		}
		if sent && p.equal(last, now) {
			continue
		}
		out = append(out, asMessage(now))
		if p.keep {
			p.sent[k] = now
		} else {
			p.sent[k] = zero
		}
	}
	return out, removed
}

func comparePolicyKeys(a, b model.PolicyKey) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func compareEndpointKeys(a, b model.EndpointKey) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// CompareMembers orders members by address, protocol, port.
func CompareMembers(a, b dataplane.Member) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port))
}

func sortMembers(ms []dataplane.Member) { slices.SortFunc(ms, CompareMembers) }
