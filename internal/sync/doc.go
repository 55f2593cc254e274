// Package sync is the agent's view of the cluster: the first stage of docs/design.md's data flow
// (Kubernetes API → sync → graph → nft). It turns Namespaces, Pods, ServiceAccounts,
// NetworkPolicies, ClusterNetworkPolicies (with the Nodes their node peers select) and Calico's
// Tiers, GlobalNetworkPolicies, NetworkPolicies, GlobalNetworkSets, NetworkSets and HostEndpoints into model updates
// (internal/model) and reports sync status. It is the only stage that knows Kubernetes types
// (the binary's client set-up aside); nothing downstream does.
//
// # Sources
//
//   - Watcher (watch.go): client-go informers for Namespaces, Pods (all pods of the cluster: remote
//     pods are members of the sets that local policies use; the graph tells local ones by
//     Endpoint.Node) and NetworkPolicies, over protobuf, through a Client (client.go): a REST
//     client of a scheme holding only those types, not client-go's clientset, whose packages
//     register all 55 of Kubernetes' API groups at start-up (see Client). Each resource has a
//     client-go Reflector of its own with the Watcher's retry backoff, filling a store that calls
//     the handlers itself (informer.go): client-go's informers take no backoff, and a shared
//     informer's listener buffer allocates a trace per event during the initial list of pods. The
//     pod reflector lists through podlist.go, which decodes the response pod by pod as it arrives
//     instead of reading it whole and decoding one PodList (client-go falls back to one unpaginated
//     list when the API server cannot stream it), reading only the fields a record uses by hand
//     (podfields.go) and skipping the rest without allocating it; watch events go through
//     client-go's generated decoder. Namespaces and NetworkPolicies are listed by streaming
//     (client-go's WatchListClient: a watch that sends the current objects first, ended by a
//     bookmark), which the API server serves from its watch cache object by object instead of
//     building one answer; it can where its etcd has progress notifications (etcd 3.5.13+).
//     Where it cannot, it ends the stream with an error and the reflector lists instead:
//     logged once per resource at Info ("API server cannot stream lists; listing"), and
//     nftpolicy_watch_streaming{resource} says which way each resource's last list came
//     (trackedListerWatcher and resourceWatch in informer.go). Pods are listed plainly, through
//     podlist.go: a streaming list's events go through the generated decoder whole, which at
//     100,000 pods cost more CPU, in the agent and in the API server, than the one answer
//     podlist.go reads field by field (BENCHMARKS.md). After the updates of each event, the next batch carries a
//     model.SourceVersion of its resource: the agent publishes, once committed, the versions its
//     table reflects. ServiceAccounts are watched too (calicowatch.go; their metadata only,
//     ServiceAccountSet/Deleted when their labels change): Calico's serviceAccounts peers
//     select by them.
//   - ClusterNetworkPolicies (cnpwatch.go; policy.networking.k8s.io/v1beta1, or v1alpha2 where
//     the CRD serves only it (network-policy-api v0.2); a custom resource read as JSON through
//     the same REST client approach, not the module's generated clientset and informers) are
//     optional: while the API server serves neither version (no CRD), the Watcher holds none,
//     counts them as in sync and not as a watch outage, and looks again every
//     Config.AbsentRecheck (30 s), so installing the CRD later needs no restart; removing it
//     withdraws every one. The version is chosen by a list of one object at each, v1beta1
//     first, at start and whenever the watch finds its version gone; while it reads v1alpha2 the
//     Watcher looks for v1beta1 every AbsentRecheck and moves to it once served (a CRD upgrade:
//     the same objects, no update emitted, no relist). The version read is logged and exported
//     as nftpolicy_cnp_api_version{version}. Nodes are watched only from the first ClusterNetworkPolicy with a
//     node peer on, cached as name, labels and IP addresses: such a policy is emitted with its
//     node peers resolved into the selected nodes' addresses once the node list is in, and again
//     when a node it selects (or selected) changes labels or addresses — heartbeats do nothing.
//   - Calico's policy API, projectcalico.org/v3 (calicowatch.go; hand-written types in
//     calicotypes.go, read as JSON like ClusterNetworkPolicies): Tiers, GlobalNetworkPolicies,
//     NetworkPolicies, GlobalNetworkSets and NetworkSets, each optional on its own exactly as
//     ClusterNetworkPolicies are (not served: none held, in sync, idle, looked for again every
//     AbsentRecheck; served later: picked up without a restart; gone: withdrawn). They are
//     named in SourceVersion and the metrics as <resource>.projectcalico.org. Policies are
//     cached as policyRecords; tiers and network sets, being few, as slim objects, the Watcher
//     keeping what it last emitted of each. A Calico policy whose tier does not exist is
//     emitted (the graph enforces it once the tier exists) and, once every Calico resource is
//     listed, logged and counted in nftpolicy_invalid_objects_total; the tier's arrival is
//     logged.
//   - HostEndpoints (hostendpoint.go) are endpoints of namespace "" with a Host part, optional
//     like the other Calico kinds. One node interface is held by one of them: of several
//     claiming it, the smallest name (hostClaims, O(host endpoints) per change); the others are
//     logged, counted in nftpolicy_invalid_objects_total and emitted once the holder is gone.
//     With Config.AutoHostEndpoints the Nodes are watched and each is also a "*" host endpoint
//     <node>-auto-hep with its labels, addresses and Calico's default-allow profile.
//   - LoadDir / ConvertObjects (load.go): the same conversion from a directory of YAML/JSON
//     manifests (multi-document files, v1 Lists; strict decoding as kubectl's; both
//     ClusterNetworkPolicy apiVersions), for
//     `nftpolicy render` and tests. Deterministic order (namespaces, endpoints, policies, then
//     in-sync); namespaces that objects use but no manifest defines are added with their name
//     label, as the API server would hold them; bad documents are reported with file and
//     document number and skipped; a duplicate key is an error, as an unknown field is. Each
//     document is translated from YAML to JSON once and decoded strictly from JSON. The
//     translation (yamlsubset.go) reads the YAML manifests are written in (block and
//     single-line flow collections, single-line scalars, comments) itself, producing the very
//     JSON sigs.k8s.io/yaml would, and leaves everything else (anchors, tags, block scalars,
//     floats, timestamps, duplicate keys, syntax errors) to sigs.k8s.io/yaml's strict
//     YAMLToJSONStrict, whose result or error is then the document's: the same outcome for a
//     fraction of yaml.v2's CPU and garbage (TestYAMLSubsetMatchesYAMLToJSON, FuzzYAMLSubset).
//     The serializer finds a document's apiVersion and kind in its top-level keys (typemeta.go)
//     instead of decoding it with encoding/json first, as its DefaultMetaFactory would.
//     A file's documents are decoded in chunks on GOMAXPROCS goroutines and converted in
//     order as each chunk is done, so only a chunk's Kubernetes objects are held at a time.
//
// # Conversion (convert.go)
//
// ConvertNetworkPolicy follows NetworkPolicy v1 exactly (see its comment): policyTypes
// defaulting, empty podSelector = every pod of the namespace, no peers = everyone, peer
// podSelector scoped to the policy's namespace, namespaceSelector, both = AND, ipBlock with
// except, ports by protocol (TCP default; a protocol without a port = all its ports; numeric,
// endPort ranges and named ports, which the graph resolves per endpoint). NetworkPolicies live
// in tier model.TierNetworkPolicy, all rules Allow, Order 1000 as in Calico (ties broken by key, so by name);
// isolation comes from the tier's default Deny. LabelSelectors go through
// selector.FromLabelSelector and must parse back. ConvertPod makes an endpoint of a pod bound to
// a node, not hostNetwork, not Succeeded/Failed, with ≥ 1 IP (status.podIPs, else podIP);
// named ports from its containers and restartable init containers, as many as it declares
// (the work is linear in their number); whether it runs and when it was created, which decide
// the owner of an address several pods hold (model). A pod without an IP is no endpoint until
// it has one; a pod of a node that does not exist is an endpoint of that node (remote: a
// member of sets, never dispatched here); a pod that turns Succeeded or Failed is withdrawn
// (EndpointDeleted), so it keeps no policy of its own. ConvertNamespace sets
// kubernetes.io/metadata.name = name, as the API server guarantees. The graph starts with
// model.DefaultTiers (at Calico's orders for kube-admin, default and kube-baseline); TierSet
// comes only from Calico's Tiers.
//
// ConvertClusterNetworkPolicy (cnp.go, see convertCNP's comment) converts v1beta1; a v1alpha2
// object (the same schema) is copied into v1beta1 through its JSON first
// (ClusterNetworkPolicyV1beta1), by the Watcher's transform and by LoadDir. It puts Admin policies in
// model.TierAdmin and Baseline ones in model.TierBaseline (both default to Pass: Admin →
// NetworkPolicy → Baseline → allowed), Order = priority, so equal priorities are ordered by
// name; rules in order (first match decides), each expanded per peer and protocol group with a
// Label naming the API rule (tier, priority, direction, index, name) for the ruleset's
// comments; subjects as Selector plus NamespaceSelector; node peers as the nodes' addresses.
// domainNames peers of Accept rules become model.Peer.DomainNames; in a Deny or Pass rule (which
// the API forbids) the rule denies everything (the API's fail-closed rule), and such a policy,
// or one with a peer or protocol of a newer API, is logged once per version ("policy not enforced as written", with an Accepted=False-style
// condition) and counted in nftpolicy_partly_enforced_objects_total{kind}. The output is at
// most 25 rules × 25 peers × 4 protocol groups = 2,500 model rules per direction; larger
// input (the API's limits) is invalid.
//
// # Calico's policy API (calico.go)
//
// convertCalicoPolicy (see its comment) converts GlobalNetworkPolicies (PolicyKey.Kind
// KindGlobalNetworkPolicy) and Calico NetworkPolicies (KindCalicoNetworkPolicy, a kind of its
// own so that it never shares a key with a Kubernetes NetworkPolicy) with Calico's semantics:
// tier (CalicoTierName: default, kube-admin and kube-baseline are the model's default, admin
// and baseline; a user tier named admin or baseline is calico:<name>), order (unset:
// OrderUnset, +Inf, last), types defaulting, Allow/Deny/Pass/Log, protocols by name or number,
// ICMP, nets, selectors with notSelector merged into a positive selector as Felix's rule
// scanner does, namespaceSelector global() (Peer.Global), serviceAccounts (names as
// projectcalico.org/name in {…}, ANDed with the selector), ports and named ports; every peer
// picks network sets too (Peer.NetworkSets). Each model rule's Label names its tier, order,
// direction and index. http and services are not enforced and never widen an allow (an Allow
// rule with one matches nothing; Deny and Log rules drop them; a Pass rule becomes a Deny), and
// the policy is reported as partly enforced. ConvertCalicoTier converts tiers (Deny by default;
// Calico's built-in tiers are checked and emit nothing); ConvertGlobalNetworkSet and
// ConvertCalicoNetworkSet network sets (labels, canonical sorted nets; allowedEgressDomains
// not enforced).
//
// # Invariants
//
//   - In-sync is sent only after every informer's event handler has received its initial list
//     (the handler registrations' HasSynced), after all the updates of those lists; it is looked
//     for again as soon as a store has delivered its list (waitSynced), so it follows the last
//     list at once. Before it, the first batch is SyncStatusUpdate{ResyncInProgress}. The graph
//     emits nothing before in-sync, so nothing partial reaches the dataplane.
//   - The pods of the initial list are handed to the handler as podlist.go decodes them
//     (handlerStore.early), not once the list has been read whole: the graph takes them while the
//     rest of the list is transferred (TestPodsDeliveredAsListed). The list's Replace skips the
//     records the store holds already. A relist is never delivered early: it is delivered whole.
//   - Only changes are emitted: resyncs and relists after an outage re-deliver objects without
//     producing updates, and an object that stops being an endpoint or a valid policy produces
//     the matching *Deleted update. For namespaces the Watcher records what it last emitted;
//     for pods (10,000s) and policies it records nothing: the conversion the informer cached
//     with the old version tells what was emitted (an endpoint, a policy in force, or nothing),
//     and its fingerprint is compared with the new version's (podRecord, policyRecord). An API
//     outage emits nothing: the consumer keeps the last state.
//   - After an API outage the Watcher follows changes again within seconds of the API server's
//     return: a reflector retries its list or watch 250 ms after a failure, the wait doubling to
//     2 s and stretched by up to half (retryBackoff; client-go's default grows to 30–60 s, which
//     keeps informers away for up to a minute), and resumes its watch from the last
//     resourceVersion or relists. A connection to an API server that went silent is closed
//     within 11 s (APIDialer: TCP keepalive and user timeout), one to an API server that came
//     back without its state at the next keepalive probe. WatchDown tells how long a resource has
//     had no watch open (a watch that ends at once with nothing received does not end an outage:
//     client-go turns a connection a proxy closes into such a watch), which the agent's /readyz
//     uses; nftpolicy_watch_open, _restarts_total, _lists_total and
//     _last_event_timestamp_seconds{resource} export it, and the log says when an outage begins
//     (the first failure, then once a minute) and ends.
//   - Bad input never stops anything else: an object the converters reject is skipped, logged
//     once per version (kind, namespace, name, reason) and counted in
//     nftpolicy_invalid_objects_total{kind}; a later valid version is picked up. A policy whose
//     new version is invalid is withdrawn (PolicyDeleted), so the replaced rules do not stay
//     in force; this changes only what that policy allowed or isolated. Likewise a pod whose
//     new version cannot be converted is withdrawn (EndpointDeleted).
//   - Event handlers never block on the consumer: updates queue in the Watcher and each send
//     carries everything queued (one batch per burst).
//   - A relist reaches the consumer whole: while a reflector delivers one (handlerStore.Replace
//     after the initial list: its watch could not resume — an expired resourceVersion, 410 Gone,
//     after a compaction or an API server restart — or failed otherwise), the Watcher sends
//     nothing, so the relist's updates, with whatever other resources sent meanwhile, go in one
//     batch and the graph never sees a resource half relisted. Across resources nothing is
//     atomic: each resource's reflector relists on its own, so pods may be relisted (and their
//     batch committed) before policies are; each intermediate view holds every resource as one
//     list, or one watch event, of it left it. A relist is said out loud: one log line of the
//     Watcher's own ("watch could not resume; relisted": the resource, how long its view had
//     been stale — since the last list, event or bookmark received before it — and how many
//     objects the list listed, added, changed and deleted; a warning when it changed anything),
//     nftpolicy_watch_relists_total{resource} and nftpolicy_watch_relist_staleness_seconds.
//     Withdrawing the ClusterNetworkPolicies when their CRD goes, and the list when it returns,
//     are no relists. A list's SourceVersion is the list's resourceVersion, after its updates:
//     the objects of a list come in key order, so the last one's version may be older than
//     others'.
//   - The informer caches hold small objects (the Watcher's transform): pods and policies as the
//     outcome of their conversion, converted once per version (podRecord, 48 bytes: one string
//     holding namespace/name, the cache key, and the resourceVersion; a 64-bit fingerprint of the
//     endpoint, 0 when the pod is none; why it cannot be converted, rarely; policyRecord: the same
//     string, why it is invalid or a fingerprint of the policy; the endpoint or policy itself only
//     until the event handler hands it to the graph, which keeps it; a record is its own
//     metav1.Object whose name is its cache key, so keying it allocates nothing, objectmeta.go);
//     the pod cache keeps of a record only its string and outcome (the fingerprint, no endpoint
//     or invalid), in its map's entry under a key that is a view of that string (podStore: 40
//     bytes an entry, no object of its own);
//     namespaces with metadata name/namespace/labels/resourceVersion only. The strings that repeat
//     across pods (namespace, node, service account, container port names) are interned by the
//     Watcher (intern.go, bounded), so records and the endpoints the graph keeps share one copy
//     instead of one the decoder made per pod. Measured by TestInformerCacheMemory (lists decoded
//     from protobuf, as from the API server): the heap that 10,000 realistic pods, 500 namespaces
//     and 2,000 policies add (caches and the Watcher's records, and with the emitted endpoints
//     and policies kept, as the graph keeps them); the test fails above 50 MiB and logs the
//     figures, which BENCHMARKS.md records.
//
// # Tests
//
// `go test ./internal/sync/` (≈2 minutes, as root): converter tables, LoadDir on testdata/cluster
// checked through the graph's reference evaluator, the watcher on a fake clientset (bad objects)
// and against the real etcd + kube-apiserver of internal/testenv/kube (creates, relabels,
// updates, deletes, an API server restart; pod and policy lists delayed to prove in-sync waits
// for them; two 20 s outages, after each of which a change must reach the update stream within
// 5 s), the reflector store's and watch state's semantics, APIDialer against a silent peer in a
// network namespace, and the cache memory figure (skipped with -short). Calico's API: converter
// tables that read like Calico's reference pages (convertcalico_test.go), LoadDir on
// testdata/calico (Calico's documented samples among them), and the Watcher against its own
// API server with deploy/crds/calico installed after it started (the samples applied with
// strict field validation; creates, updates, deletes, an invalid policy, a missing tier).
package sync
