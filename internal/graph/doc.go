// Package graph is the calculation graph of docs/design.md's data flow (internal/sync and
// internal/ifmon → graph → internal/nft). It is pure Go: no I/O, no goroutines, no wall clock,
// one caller goroutine, and deterministic (everything emitted is sorted; no map order leaks).
//
// API: New(Config{NodeName}) → OnUpdate(model.Update) for every change → Flush() []Message to
// get the messages of internal/dataplane; Problems() lists diagnostics about bad input.
// Updates are handed over (model.Update): an endpoint's labels are kept as they arrive, never
// copied and never modified; its addresses and named ports are packed into one string of the
// graph's own (netInfo, netinfo.go), repeated ones dropped.
//
// # Stages
//
// Five types, each owning its state (its own maps), joined by narrow interfaces and wired in
// one place, New (graph.go), whose comment draws the graph. An update enters the first stage
// that cares (OnUpdate); events flow downstream only, each stage handling its part and telling
// the next once. Upstream there are only queries (a matcher and its members, the policies
// selecting an endpoint, a tier, an object's message). After every update the active policies
// settle what it queued. Fields of the shared records are owned as marked: a matcher's
// policies are the active policies', its sets the set calculator's; an endpoint's inSets is the
// set calculator's.
//
//  1. Label index (labelIndex: index.go; records in endpoints.go, what selectors see of them
//     in labels.go, specs in spec.go, matchSet in matchset.go). It owns the endpoints,
//     namespaces, service accounts and network sets (endpointStore, with the namespace and
//     service-account life cycles) and the matchers. A matcher is a scoped selector tuple
//     (endpoint selector, namespace selector, service-account selector, namespace scope; see
//     model's package comment for the scoping conventions). Its identity is the canonical
//     strings of its parts, so equal tuples in many policies are one matcher and one set. An
//     endpoint is evaluated with its own labels and its namespace's (and service account's)
//     labels as separate views; nothing is copied or rewritten. Each view answers Calico's
//     automatic labels besides the stored ones (labels.go): an endpoint's
//     projectcalico.org/namespace, projectcalico.org/orchestrator ("k8s") and
//     projectcalico.org/serviceaccount, a namespace's and a service account's
//     projectcalico.org/name (while its object exists), a namespaced network set's
//     projectcalico.org/namespace; an automatic label replaces a stored one of its key, and
//     none is stored per pod. Each matcher is filed under
//     one anchor — its namespace scope together with a required key==value of its endpoint
//     selector, else its namespace scope alone, else a required key==value of its endpoint
//     selector, else of its namespace selector, else a required key, else "unindexed" — and an
//     endpoint is tested only against the matchers filed under anchors it satisfies (plus its
//     current matches, to drop the ones it left). A new matcher walks only the endpoints filed
//     under its anchor; the first anchor of a label key (in a namespace) files the endpoints
//     with that key by value in one scan, so further anchors of that key cost no scan: N
//     selectors `peer == 'p<i>'` in one namespace cost O(its pods) once, not O(N · its pods).
//     Automatic labels are anchors like stored ones, but for the two every endpoint carries:
//     a required projectcalico.org/namespace == "x" is the namespace scope x (the selector
//     walks x's endpoints, never every endpoint), and projectcalico.org/orchestrator or
//     has(projectcalico.org/namespace) is never an anchor (it would file every endpoint).
//     Network sets are not filed under anchors: the few there are are walked when a peer's
//     picks are computed (appendPickedNets), and a change of one, or a relabel of a namespace
//     holding some, is told to the active policies (netSetListener).
//     Invariant: e.matches is exactly the live matchers that match e; a
//     matcher's members are the candidates of its anchor that list it (membersOf), walked when
//     a set over it is made, listed or dropped. It tells the active policies of every change
//     of an endpoint once (endpointListener.onEndpoint, an endpointChange: the matchers it left
//     and joined, and for its own update whether it was added or removed, its addresses and
//     named ports before, its address claim), after its records and memberships are updated.
//     It is asked (policyIndex, setIndex) for matchers (acquired and released by reference)
//     and their members.
//  2. Active policies (activePolicies: policy.go). It owns the policies, the tiers and the
//     queue of policies to settle. A policy's applied-to selector is a matcher; the matcher
//     counts its local members. A policy is active iff its selector is valid, its tier is known
//     and it selects ≥ 1 local endpoint (Endpoint.Node == Config.NodeName). An endpoint change
//     queues the policies of the matchers it left or joined (and marks a local endpoint
//     changed); settle, at the end of every update, compiles the queued policies that are (or
//     stay) active with changed rules and releases the rules of those that are no longer. An
//     active policy's rules (of the directions it applies to) are compiled: each peer with an
//     endpoint match refers to a SetAddrs set over its matcher; each named port to a
//     SetNamedPorts set over the matcher of the side it resolves on — the endpoints the policy
//     selects for the local side (destination of ingress, source of egress), the peer's matcher
//     on the other side, or every endpoint when the peer has no endpoint match (its Nets still
//     constrain the address in the rule). Calico's peers — network sets, notSelector,
//     global() — are compiled as the section Calico's peers below says. Each set reference
//     has the polarity of its use:
//     every for a set used positively by an Allow or Log rule or negated (NotNamedPortSets) by
//     a Deny or Pass rule, any for one used positively by a Deny or Pass rule or negated by an
//     Allow or Log rule; a matcher used both ways has one set of each. Nets and NotNets are
//     normalised. Sets are acquired
//     from the set calculator (policySets) before the old ones are released, so unchanged
//     sets are kept. A rule with an invalid selector matches nothing and is left out; a policy
//     with an invalid selector selects nothing (both reported by Problems). It passes endpoint
//     changes on to the set calculator and tells the resolver of tier changes (tierListener).
//  3. Set calculator (setCalculator: set.go). It owns the sets and the address index. A
//     named port set holds (addr, proto, port) of every matched endpoint declaring that name
//     with the rule's protocol (any protocol when the rule has none). Sets are reference
//     counted by compiled rules: a set exists iff an active rule refers to it. A set's members
//     are not stored: a set emitted whole lists them from its matcher's endpoints, and a change
//     is found with the address index, which files every endpoint, in a set or not, under its
//     addresses. An address several endpoints hold (cluster-wide: a pod's IP reused before the
//     old pod's delete arrives) is a member of an every-polarity set only while every holder
//     contributes it, of an any-polarity set while one does (memberOf), so a rule allows it
//     only if it allows each pod that may be behind it and denies it if it denies one of them;
//     an address one endpoint holds is a member of both alike. The ID of an every-polarity set
//     is a hash of its matcher (and port), of an any-polarity set "any_" and a hash of them and
//     the polarity. A change that touches a shared address lists whole at the next flush the
//     sets it contributes to and the every-polarity sets of the other holders (SetReplaced)
//     instead of a delta. An endpoint change updates the sets over the matchers it
//     left and joined (with its addresses before the change), then, if its addresses or named
//     ports changed, swaps its old contributions for the new ones; it is passed on to the
//     resolver.
//  4. Policy resolver (resolver: resolve.go, owner.go). It owns the local endpoints, the
//     routes, the address owners and the host addresses (which only host endpoints' messages
//     list). Per
//     local endpoint and direction: the active policies that select it and apply to the
//     direction (asked of the active policies, resolverPolicies), grouped by tier in (tier
//     Order, name), policies in (Order, then as Felix: name, namespace, kind); only tiers with ≥ 1 such policy are
//     listed, with the tier's DefaultAction. Interface comes from RouteSet (a /32 or /128 route
//     to one of its addresses). Addrs lists only the addresses the endpoint owns (owner.go): of
//     the local endpoints holding one address, a Running one before one that is not, then the
//     newest (Created), then the smallest key. Every other holder is still an endpoint, with
//     its other addresses (perhaps none), so its messages never carry, and its removal never
//     withdraws, the owner's address; when the owner goes or changes, the others are
//     re-resolved and the next one takes the address over in the same flush. Remote endpoints
//     take no part: this node judges a packet for a local pod's address as that pod's. Set
//     membership is not the owner's alone: every holder must contribute the address (stage 3).
//     A host endpoint (model.Endpoint.Host; namespace "", matched only by specs with hosts,
//     spec.go) claims no address: its message lists the node's addresses and its expected IPs,
//     its interface, and, without a default-allow profile, ends both tier lists with the
//     policy-less model.TierHostDefault, which denies. One without interfaceName takes each
//     interface holding one of its expected IPs (host.go: HostAddrSet names the interface of
//     each node address) that no named endpoint takes and no endpoint of a smaller name
//     expecting one of its addresses (dataplane.EndpointUpdated.Interfaces), as Felix resolves
//     it; while there is none its message has no address, so nothing dispatches to it. Its
//     problems (an expected IP that is not the node's, an interface that does not exist yet,
//     none holding its expected IPs) are listed by Problems and given to Config.ReportHost
//     once each, when they appear.
//     Its lists of the other stages
//     (dataplane.Stage) hold the policies of that stage: applyOnForward ones (neither preDNAT
//     nor doNotTrack) for forwarded traffic, preDNAT ones (ingress) and doNotTrack ones, the
//     last two passing at each tier's end and ended by model.TierHostUndecided. A pod's lists
//     hold no preDNAT or doNotTrack policy.
//  5. Event sequencer (sequencer: flush.go). The stages tell it which objects changed
//     (changes); it keeps, per kind of object, one pending (the keys touched since the last
//     flush, sorted by the kind's order, and what was last sent). Flush asks each stage for
//     the message of each touched object (a source per kind), drops a policy's or endpoint's
//     message equal to the one sent last (the messages' Equal methods), and emits, in
//     internal/dataplane's order, at most one message per object:
//     SetReplaced (new sets, or when the delta is larger than the set) or SetMembersChanged
//     (the coalesced delta), PolicyUpdated, EndpointUpdated (only when changed),
//     EndpointRemoved, PolicyRemoved, SetRemoved, then InSync once. Nothing is emitted before
//     SyncStatusUpdate{InSync}; the first flush after it carries the full state.
//
// # Calico's peers
//
// Calico's rule peers add three things to the model's (policy.go, preparePeer), scoped as Felix
// scopes them (libcalico-go/lib/backend/syncersv1/updateprocessors/rules.go,
// GetEntityRuleSelector; Calico's "Automatic labels" page):
//
//   - Network sets (Peer.NetworkSets, not with a service-account selector): the peer's
//     selectors also pick network sets (netPick, spec.go). A namespaced policy's peer without
//     a namespace selector picks the sets of its namespace; a peer with a namespace selector
//     (all() included) the namespaced sets of matching namespaces, whose namespace's labels
//     it sees as a pod's; a cluster-wide policy's peer without one every set, cluster-scoped
//     and namespaced; a global() peer (Peer.Global) the cluster-scoped sets only, and no
//     endpoint (without NetworkSets it picks nothing). A picked set matches every address of
//     its nets, pods' included.
//   - The dataplane has no union of a set and nets within one match, so a rule whose peer
//     picks network sets is compiled as consecutive alternatives with its action, Index and
//     Comment (ruleCompiler.rule): one with the endpoints' set and the peer's Nets, one with
//     the picked nets (cut by the peer's Nets when it has them, IntersectPrefixes) and no
//     set. The rule matches iff one alternative does, and first-match order is kept. A side
//     with no alternative leaves the rule out, holding no set; two sides with two each give
//     four. Named ports on such a side are the picked endpoints' (a network set declares
//     none).
//   - Bound: the nets of the network sets one peer picks are at most MaxPeerNets per
//     alternative (and in NotNets). Over it the policy has a Problem and the use fails safe
//     by the rule's action: an Allow or Log rule's nets alternative is left out (for its
//     notSelector's nets, the whole rule), a Deny or Pass rule keeps the first MaxPeerNets;
//     an allow never grows.
//   - Peer.NotSelector: the address must be held by none of the endpoints it picks (a
//     SetAddrs set in NotSets, its polarity a negated use's) and, with NetworkSets, be in none
//     of the nets of the network sets it picks (joined to NotNets). It is not scoped (Felix
//     passes notSelector on as written): it picks in every namespace, and cluster-scoped
//     sets, whatever the policy's namespace. A namespaced policy's peer with a notSelector
//     and no other selector picks its namespace's endpoints (and network sets) positively, as
//     Felix scopes it; in a cluster-wide policy such a peer picks every other address.
//   - Automatic labels (stage 1) are seen by every selector, the Kubernetes APIs' too.
//   - Network sets reach the dataplane only in rules: a network set's change (or a relabel of
//     its namespace, for peers picking by namespace selector) recompiles the active policies
//     a peer of which picks it as it was or is (onNetSet), which emit their PolicyUpdated.
//
// # Unusual endpoints (TestPodEdgeCases, TestAddressOwner)
//
//   - No address: a member of no set; a local one's EndpointUpdated lists none, so it has no
//     dispatch element, and the policies selecting it are still active.
//   - A node the graph has never heard of: the graph knows no nodes, only NodeName; the
//     endpoint is remote — a member of the sets its labels select, never dispatched here, and
//     no owner of an address a local endpoint holds.
//   - An address several endpoints hold: one owner among the local ones (stage 4).
//   - Named ports: as many as declared, repeats dropped, at a cost linear in their number.
//   - Labels: no bound on their number or length; selectors see the endpoint's and its
//     namespace's labels as they are.
//
// # Cost of one change
//
//   - Endpoint add / relabel: O(candidate matchers of its labels and namespace) evaluations,
//     plus O(sets on the matchers it joins or leaves · its addresses · the endpoints sharing
//     them, usually none), plus O(addresses + named ports) to pack them (repeats dropped with
//     a map beyond 16: a pod may declare thousands of ports, ≈ 8 ms at 10,000 named ports twice
//     over, BenchmarkManyNamedPorts). A local endpoint sharing an address re-resolves the other
//     local holders (usually none).
//   - Endpoint delete: O(its matches + their sets · its addresses · the endpoints sharing them).
//   - An update adding, removing or moving an address another endpoint holds, or changing the
//     memberships of an endpoint holding one: its sets and the every-polarity sets of the other
//     holders are listed whole at the next flush (rare: a reused IP until the old pod's delete
//     arrives).
//   - Namespace relabel: a relabel of each of its endpoints.
//   - Policy change: parse its selectors; a new matcher walks the endpoints under its anchor
//     (its members, for an equality anchor whose key is already filed);
//     unchanged sets are kept (compile before release); a new or dropped set walks its
//     matcher's endpoints (counting the sets each is in), and the next flush lists a new set's
//     members.
//   - Tier change: every local endpoint is re-resolved at the next flush.
//   - Service account relabel: a relabel of each endpoint of its namespace that has it.
//   - Network set add, change or delete: a test of every peer that picks network sets (of the
//     policies having one) against the set before and after, and a compile of each active
//     policy that picks it, each walking the network sets in its peers' scopes: O(picking
//     peers + picking policies · (network sets in scope + their nets · log)). Network sets
//     change rarely; the PolicyUpdated of a picking policy carries all its rules.
//   - Namespace relabel, the namespace holding network sets: also a compile of every active
//     policy picking network sets by namespace selector.
//   - Flush: O(dirty objects · log), plus the resolver's O(n log n) for each dirty local
//     endpoint selected by n policies (collect, sort by tier, order and key without
//     allocating, build its message); the sequencer compares that message with the last sent
//     in O(n). So N policies selecting one endpoint cost O(N log N) to add in one flush, and
//     one of them added or removed costs O(N log N) comparisons for that endpoint's message
//     (≈ 5 ms at N = 10,000, BENCHMARKS.md P7), the message being the whole ordered list.
//
// # Memory
//
// What the graph keeps grows with the cluster's pods: an endpoint is 96 bytes, its labels' and
// its netInfo's strings, its entry in its namespace's map and, per address, one in the address
// index (16 bytes, keyed by a digest of the address), plus a pointer in its matchSet
// per matcher that matches it (matchers do not list their members). Nothing per pod is kept for
// a label no selector uses (epByAnchor and epByValue file only the label keys, and for
// anchorEpKey the anchors, that matchers use), and nothing for the automatic labels, which the
// records answer (a selector on projectcalico.org/serviceaccount files its endpoints by value,
// as for a stored label). The index's sets — the endpoints under a label value, the matchers
// under an anchor, the namespaces under a namespace anchor — are lists while they hold at most
// 16 members, as most do, and maps beyond (setmap.Small). A network set is its labels' string and
// its nets, as handed over.
// The owner rule keeps, per local endpoint only, its address list entries and its claim
// (running, created). BenchmarkHeapAtScale measures what the graph retains for a cluster of
// 100,000 pods and 5,000 policies (BENCHMARKS.md has the figure).
//
// # Output contract
//
// The state built by applying every flush's messages in order (see graphtest.State) depends
// only on the final inputs, not on their order or batching (TestOrderIndependence). Nothing is
// referenced before it exists and nothing is removed while referenced. After every flush no
// two EndpointUpdated of the state list one address, though one flush may move an address from
// one endpoint to another (TestSharedAddressEveryOrder). Package graphtest holds that state
// builder with integrity checks and the reference evaluator of the policy model (Evaluate),
// by which the graph's tests and the nft compiler's judge packets. Judged by it, the graph's
// output gives each packet to a local endpoint the verdict that Calico's semantics, evaluated
// directly over the model's objects (pods, network sets, notSelector, global(), automatic
// labels), give it (TestIngressMatchesModel, over the generated scenarios).
package graph
