// Package e2e is the end-to-end suite: the upstream Kubernetes NetworkPolicy connectivity cases
// (kubernetes/kubernetes test/e2e/network/netpol/network_policy.go, every It of "Netpol": 42 on
// TCP, 3 on UDP, 3 on SCTP) transcribed into one table, run against the local cluster harness
// (internal/testenv: nodes and pods as network namespaces, a real etcd and kube-apiserver) with
// the agent enforcing on every node, over IPv4 and IPv6; and the ClusterNetworkPolicy conformance
// tests of sigs.k8s.io/network-policy-api v0.3.0 (conformance/tests: all 30 of its tests, 112
// subtests, objects created as v1beta1) on the same runner, in the suite's own world.
//
// Place in docs/design.md's data flow: outside it, end to end. Policies, namespaces and pods go in
// through the API server exactly as a cluster's users write them; connectivity comes out of real
// sockets between pod namespaces. Nothing here looks at the agent's internals.
//
// # Pieces (all test files)
//
//   - model_test.go: upstream's model — namespaces x, y, z (labelled ns=<name>; the API server
//     adds kubernetes.io/metadata.name), pods a, b, c in each (pod=<name>), container ports
//     serve-<port>-<proto> for 80 and 81 on TCP, UDP and SCTP — and upstream's policy builders.
//   - cases_test.go, beyond_test.go: the case table. A Case is an upstream It: its text, its pod
//     topology, its steps (create or update policies built with k8s.io/api types, delete all
//     policies, add namespace or pod labels) and after each step the expected tables, written
//     with upstream's calls (NewReachability all-true, Expect, ExpectPeer, ExpectAllIngress,
//     ExpectAllEgress). ipBlock cases build their CIDRs from the pods' real addresses through a
//     View. Model9 holds the calls the 9-pod model needs beyond upstream's trimmed topologies.
//   - reachability_test.go: the truth tables and the failure report (expected, observed and
//     comparison tables as upstream prints them; loopback ignored as upstream does).
//   - oracle_test.go: a reference NetworkPolicy evaluator, pure Go, apimachinery selectors.
//   - table_test.go: TestCaseTable replays every case on the evaluator, IPv4 and IPv6, on
//     upstream's topology and on the 9-pod model, and requires the upstream tables; it needs
//     neither root nor a cluster and catches transcription errors.
//   - sctp_test.go, sctp_probe_test.go: the raw-socket SCTP prober and its root test.
//   - main_test.go: TestMain starts the package's one kube-apiserver (kube.SharedMain).
//   - runner_test.go: the runner, over a fabric (the network under test).
//   - runner_oracle_test.go: TestRunnerOnOracle, the runner on a fabric whose connectivity is
//     the evaluator's verdict on the API server's stored state: proves the runner and that every
//     policy is valid and, as stored and defaulted, still gives upstream's tables. Needs the API
//     server binaries, not root.
//   - runner_e2e_test.go, enforcer_e2e_test.go: TestConformance, the runner on the netns cluster
//     with the agent on every node: the nftpolicy binary, one process per node namespace.
//   - cnp_model_test.go: the ClusterNetworkPolicy suite's world (houses, their StatefulSets' pods,
//     the hostNetwork centaurs) and manifests, read from the module's conformance.Manifests.
//   - cnp_cases_test.go: its tests as a table: per subtest steps, each upstream's changes (swap
//     rules, change an action, a priority or a port, insert a rule, delete a NetworkPolicy, set
//     or remove a pod label, replace a namespace's labels) and then its pokes, and the changes
//     of upstream's t.Cleanup.
//   - cnp_table_test.go: TestCNPCaseTable parses the module's test sources and requires the
//     same tests, subtests and pokes, split into steps where upstream's changes fall between
//     pokes, with the same label changes; needs neither root nor a cluster.
//   - cnp_e2e_test.go: TestCNPConformance, the tests on the netns cluster with the agent on
//     every node, the experimental CRD installed and the Node objects registered.
//   - calico_cases_test.go: the Calico cases, each manifests of projectcalico.org/v3 (and for
//     one case NetworkPolicies and ClusterNetworkPolicies) as a user writes them, a template
//     for the pods' addresses and the ICMP family, with its expected matrices (upstream's
//     calls) and pokes (pings, connections from a fixed source port); among them the samples of
//     Calico's "Get started with Calico network policy", "Global network policy" and "Tier"
//     pages, unchanged.
//   - calico_e2e_test.go: TestCalico, the cases on the netns cluster with the agent on every
//     node, deploy/crds/calico and the ClusterNetworkPolicy CRD installed, in the 9-pod model
//     whose pods also serve TCP 6379, carry the samples' role labels and run as service
//     accounts sa-<pod name>. Objects go in through the dynamic client with strict field
//     validation; the agents must report the written resourceVersions of Calico's resources
//     as well as Barrier's before the traffic is checked; every matrix and poke that validated
//     is checked against nftpolicy explain.
//
// # Invariants
//
//   - Expected tables are upstream's: a case never takes its expectation from the evaluator; the
//     evaluator only has to agree with it.
//   - Loopback (a pod to itself) is never compared (upstream ignoreLoopback, k/k #95879).
//   - Every case starts from no policy and the base labels, and from a verified all-reachable
//     matrix, so no case depends on another's leftovers.
//   - SCTP is probed with raw packets: this kernel has no CONFIG_IP_SCTP (no SCTP socket can
//     connect) but has SCTP conntrack, so sctp_test.go sends a valid SCTP INIT from a raw socket
//     in the client's namespace and watches for it with a raw socket in the server's. The INIT
//     is the packet policy judges, so the SCTP cases run on real packets through the real
//     ruleset (TestSCTPProbe proves the prober against an nftables SCTP drop).
//   - No NetworkPolicy case needs Services, DNS or hostNetwork: upstream probes a pod's Service
//     ClusterIP, this suite the pod IP, which leaves every expected table unchanged (the ipBlock
//     cases already use pod IPs upstream). The ClusterNetworkPolicy suite pokes pod IPs upstream
//     too; its hostNetwork pods serve in their node's namespace on the node's addresses.
//   - ClusterNetworkPolicy subtests run in order on the state the earlier ones of their test
//     left, as upstream's do; a test starts from no policy (no NetworkPolicy, no
//     ClusterNetworkPolicy but Barrier's sentinel) and the base labels. Pokes are upstream's
//     pairs, not matrices; after each step's changes are committed by every agent, its pokes
//     run until all match or 10 s pass (upstream PokeServer's retry budget). A blocked poke is a timeout or a refusal alike (upstream
//     requires a timeout); SCTP pokes are raw INITs as above.
//
// # Runner design
//
// One API server for the package (kube.SharedMain in TestMain). Each runner test builds a world
// once (for the netpol cases namespaces x, y, z and the 9 pods; for the ClusterNetworkPolicy
// tests the houses' 8 pods and the 2 hostNetwork pods), pods alternating between nodes a and b
// so every table mixes same-node and cross-node paths; each pod serves its world's TCP and UDP
// ports (80 and 81 for the netpol model) and is created through the API with its addresses as
// status (an earlier harness's pods are replaced, and a harness deletes its pods when its test
// ends). On the netns fabric an Enforcer (newEnforcer, enforcer_e2e_test.go) builds the agent
// once and starts it as a process inside each node's namespace (`ip netns exec`), with
// --anti-spoofing, reaching the API server through a forwarder on the node's loopback, and waits
// for its /readyz; after each step's writes the runner waits until every agent has committed
// them (kube.Server.Barrier). Each validation probes the 9×9 matrix (1 s connect timeout) and
// repeats until the table matches or 10 s pass (upstream's retry budget), then fails with the
// tables. Between cases: delete all policies, restore labels, wait for the all-reachable matrix.
// The runner tests fail (never skip) without the API server binaries; TestConformance and
// TestCNPConformance also without root or without an Enforcer.
//
// The netns cluster's pod layout is NFTPOLICY_CNI's (podLayout): ptp, the default, gives each pod
// a veth and host route; bridge puts each node's pods on one bridge, so that same-node traffic is
// bridged and judged through br_netfilter, and anti-spoofing runs on the bridge ports (the
// harness's ports are named nftp<n> in both layouts). `make e2e` and `make test` run
// TestConformance and TestCNPConformance in both.
//
// # Running
//
//	go test -run 'CaseTable|Compare|Doc' ./test/e2e/  # the table on the evaluator (no root, no binaries)
//	go test ./test/e2e/                  # everything: TestRunnerOnOracle, TestSCTPProbe,
//	                                     # TestConformance and TestCNPConformance on the local
//	                                     # cluster (root, make deps)
//	go test -run CNP ./test/e2e/         # the ClusterNetworkPolicy suite only (~6 min: 3 per family)
//	go test -run 'TestCalico$' ./test/e2e/  # the Calico cases only (~1 min)
//	make e2e                             # the same, verbose
//
// # Cases
//
// IDs 1–48 are upstream's, in upstream order (the numbering of the conformance research notes);
// 101–105 go beyond upstream (endPort, ingress ipBlock with except, several ports and protocols
// in one rule, relabelling a pod or namespace out of a selector).
//
//	001 should support a 'default-deny-ingress' policy
//	002 should support a 'default-deny-all' policy
//	003 should enforce policy to allow traffic from pods within server namespace based on PodSelector
//	004 should enforce policy to allow ingress traffic for a target
//	005 should enforce policy to allow ingress traffic from pods in all namespaces
//	006 should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector
//	007 should enforce policy based on PodSelector with MatchExpressions
//	008 should enforce policy based on NamespaceSelector with MatchExpressions
//	009 should enforce policy based on PodSelector or NamespaceSelector
//	010 should enforce policy based on PodSelector and NamespaceSelector
//	011 should enforce policy based on Multiple PodSelectors and NamespaceSelectors
//	012 should enforce policy based on any PodSelectors
//	013 should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector
//	014 should enforce policy based on Ports
//	015 should enforce multiple, stacked policies with overlapping podSelectors
//	016 should support allow-all policy
//	017 should allow ingress access on one named port
//	018 should allow ingress access from namespace on one named port
//	019 should allow egress access on one named port
//	020 should enforce updated policy
//	021 should allow ingress access from updated namespace
//	022 should allow ingress access from updated pod
//	023 should deny ingress from pods on other namespaces
//	024 should deny ingress access to updated pod
//	025 should deny egress from pods based on PodSelector
//	026 should deny egress from all pods in a namespace
//	027 should work with Ingress, Egress specified together
//	028 should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)
//	029 should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector
//	030 should enforce ingress policy allowing any port traffic to a server on a specific protocol
//	031 should enforce multiple ingress policies with ingress allow-all policy taking precedence
//	032 should enforce multiple egress policies with egress allow-all policy taking precedence
//	033 should stop enforcing policies after they are deleted
//	034 should allow egress access to server in CIDR block
//	035 should enforce except clause while egress access to server in CIDR block
//	036 should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed
//	037 should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector
//	038 should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP
//	039 should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP
//	040 should not allow access by TCP when a policy specifies only UDP
//	041 should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label
//	042 should enforce policy based on NamespaceSelector with MatchExpressions using default ns label
//	043 using UDP should support a 'default-deny-ingress' policy
//	044 using UDP should enforce policy based on Ports
//	045 using UDP should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector
//	046 using SCTP should support a 'default-deny-ingress' policy
//	047 using SCTP should enforce policy based on Ports
//	048 using SCTP should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector
//	101 beyond upstream should allow ingress on a port range (endPort) of one protocol
//	102 beyond upstream should enforce except clause while ingress access from CIDR block
//	103 beyond upstream should allow several ports on different protocols in one egress rule
//	104 beyond upstream should deny ingress from a pod relabelled out of the peer selector
//	105 beyond upstream should deny ingress from a namespace relabelled out of the namespace selector
//
// # ClusterNetworkPolicy conformance tests
//
// Upstream's ShortNames, in its registration order, with their subtest counts (24 Standard,
// feature ClusterNetworkPolicy; 6 Experimental: named ports, egress node peers). TestDocListsCNPTests
// keeps the list true.
//
//	CNPAdminTierEgressNamedPort           1  Experimental (ClusterNetworkPolicyNamedPorts)
//	CNPAdminTierEgressNodePeers           3  Experimental (ClusterNetworkPolicyEgressNodePeers)
//	CNPAdminTierIngressNamedPort          1  Experimental (ClusterNetworkPolicyNamedPorts)
//	CNPAdminTierEgressInlineCIDRPeers     2
//	CNPAdminTierEgressSCTP                6
//	CNPAdminTierEgressTCP                 7
//	CNPAdminTierEgressUDP                 6
//	CNPAdminTierGress                     6
//	CNPAdminTierIngressSCTP               6
//	CNPAdminTierIngressTCP                7
//	CNPAdminTierIngressUDP                6
//	CNPAdminTierIntegration               6
//	CNPAdminTierPodSelector               3
//	CNPAdminTierPortRange                 2
//	CNPAdminTierPriorityField             3
//	CNPAdminTierSamePriority              3
//	CNPBaselineTierEgressNamedPort        1  Experimental (ClusterNetworkPolicyNamedPorts)
//	CNPBaselineTierEgressNodePeers        2  Experimental (ClusterNetworkPolicyEgressNodePeers)
//	CNPBaselineTierIngressNamedPort       1  Experimental (ClusterNetworkPolicyNamedPorts)
//	CNPBaselineTierEgressInlineCIDRPeers  2
//	CNPBaselineTierEgressSCTP             4
//	CNPBaselineTierEgressTCP              5
//	CNPBaselineTierEgressUDP              4
//	CNPBaselineTierGress                  4
//	CNPBaselineTierIngressSCTP            4
//	CNPBaselineTierIngressTCP             5
//	CNPBaselineTierIngressUDP             4
//	CNPBaselineTierPodSelector            3
//	CNPBaselineTierPortRange              2
//	CNPBaselineTierSamePriority           3
package e2e
