// Package kube runs a real etcd and a real kube-apiserver on the root network namespace's
// loopback (127.0.0.1, free ports) for tests, benchmarks and the demo.
//
// Place in docs/design.md's data flow: it stands in for the cluster's control plane, the source end
// of "API server → sync → graph → nft". internal/sync's informers, the agent and the e2e tests
// talk to it through the ordinary client-go stack, so what they prove holds against the real
// API server's validation, defaulting, admission, RBAC, watch semantics and outages.
//
// Design:
//   - Start makes everything in Go (no openssl): a random admin token in a token file (user
//     "admin", group system:masters), an RSA service-account key pair, and an ECDSA CA that signs
//     the serving certificate, valid for 127.0.0.1, ::1, localhost and Config.ServingIPs. Clients
//     verify TLS against Server.CAData; Kubeconfig writes a file with the CA and the token.
//   - etcd 3.6.8 keeps its data in Dir; kube-apiserver v1.36.3 runs with RBAC,
//     --disable-admission-plugins=ServiceAccount (no controller-manager makes the default
//     ServiceAccounts), service CIDR 10.96.0.0/16. Both are built from their Go modules by
//     `make deps`. etcd 3.6 has the progress notifications (RequestWatchProgress) without which
//     the API server cannot stream lists (WatchList, on by default in v1.36), so a client's
//     streaming list (client-go's WatchListClient) is served as such. There is
//     no scheduler, kubelet or controller: CreatePod binds a pod with spec.nodeName and patches
//     its status subresource the way a kubelet would (phase Running, Ready, podIP, podIPs);
//     SetPodStatus and PatchPodStatus change it later (hostIPs, other phases). A pod needs no
//     Node object. ServiceAccountToken gives a ServiceAccount's token, to run a client with the
//     RBAC it would have in a cluster (deploy_test.go does so for the agent's ClusterRole).
//   - kube-apiserver binds 127.0.0.1 only and advertises 198.51.100.1 (TEST-NET-2, never
//     dialled) as the kubernetes Service endpoint, so it needs no default route on the host.
//   - Ports are chosen by listening on 127.0.0.1:0 and closing; a process that exits during
//     start-up (most likely a port taken meanwhile) makes Start retry once with new ports
//     (TestStartRetriesOnPortClash).
//   - Start returns after /readyz answers 200 and the API server's own bootstrap objects exist
//     (namespaces default, kube-system, kube-public, kube-node-lease; the system priority
//     classes), which it makes up to ~1 s after /readyz: 2.2–3.5 s on this 2-core machine
//     (TestStop logs the figure).
//   - CreateNode registers a Node (labels, podCIDRs, InternalIP addresses, Ready) the same way.
//     InstallClusterNetworkPolicyCRD installs the ClusterNetworkPolicy CRD (standard channel of
//     sigs.k8s.io/network-policy-api, embedded at ClusterNetworkPolicyVersion, the same file as
//     deploy/crds/standard: v1beta1, the storage version, and v1alpha2 served) and returns once
//     both versions are served; the first write of a new CRD kind then takes ~2 s inside the API
//     server. InstallClusterNetworkPolicyExperimentalCRD installs the experimental channel's
//     instead (nodes and domainNames peers, named ports), which the conformance suite's
//     node-peer tests need; InstallClusterNetworkPolicyV1alpha2OnlyCRD the v0.2.0 one, which
//     serves v1alpha2 only (a cluster not upgraded).
//   - Barrier writes one sentinel object per resource an agent watches and returns their
//     resourceVersions: once an agent's table reflects them, it reflects every earlier write.
//   - RestartAPIServer kills kube-apiserver only (SIGKILL, like a crash), waits, and starts it
//     on the same port; etcd keeps the data, so clients and informers resume. BeginOutage does
//     the same in two halves: it returns once the API server is down, and its channel reports
//     the return, for tests that look at clients during the outage.
//
// Invariants:
//   - Every child runs in its own process group with Pdeathsig SIGKILL; Stop kills the groups,
//     waits for them and removes Dir when Start made it. A test binary that dies (panic, timeout,
//     SIGKILL) takes etcd and kube-apiserver with it; its temporary directory (nftp-kube-*, with
//     the owner's pid in owner.pid) is removed by the next Start once that pid is gone.
//     Children are forked from a fresh goroutine, so never from a thread a caller locked (into
//     another network namespace, or one whose exit would fire Pdeathsig early).
//   - Nothing here skips: StartForTest and Require fail the test with "run `make deps`" when
//     a binary is missing. SharedMain starts one Server per test package; when it cannot, the
//     package's tests still run and those needing the Server fail loudly through Require.
//   - No package-level mutable state (the embedded CRD is handed out as a copy); several Servers can run side by side (parallel packages).
//
// The agent of a node runs inside the node's network namespace, whose loopback is not this
// one: reach the API server there through a forwarded port (the certificate is valid for
// 127.0.0.1, so a kubeconfig with server https://127.0.0.1:<forwarded port> verifies) or list
// the node-side address in Config.ServingIPs.
package kube
