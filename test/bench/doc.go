// Package bench holds the benchmarks of `make bench`. Each adds rows to the summary table it
// prints, under the id in that table's first column (the ids below): figures operators care about, measured on the real graph, the real
// nftables dataplane and real traffic in network namespaces this package creates (named with
// testenv.NetnsPrefix, removed at the end of each benchmark).
//
//   - P1 packet path (BenchmarkPacketPath; BenchmarkPacketPathBridge the same with the pods on one
//     bridge, at 1,000 and 10,000 policies): new TCP connections/s and p50 connect latency from 4
//     client pods to a server pod through a node namespace, with 8, 100, 1,000 and 10,000 policies
//     selecting the server (internal/scale.PacketPathPolicies), for nftpolicy's table and for the
//     "chain per policy" table Felix and kube-router write, measured in the same run, each
//     relative to the same table with the server not judged (N = 0); at 1,000 and 10,000 also
//     for ClusterNetworkPolicies (internal/scale.PacketPathClusterPolicies) and for Calico
//     policies in 10 tiers, written as projectcalico.org/v3 objects and converted by
//     internal/sync (calico_test.go).
//     BenchmarkPacketPathCounters: the same at 10,000 policies with the opt-in allow-side counters
//     and deny logging (nft.Config.CountAllowed, DenyLog) against without, the table rewritten
//     between them each round.
//   - P2 incremental (BenchmarkIncremental): one pod joining or leaving one selector with 2,000
//     policies over 2,000 selectors of 100 members programmed (internal/scale.Fanout): graph flush
//     and kernel.Applier.Apply per change, beside the same element change executed with `nft`;
//     BenchmarkIncrementalClusterPolicies and BenchmarkIncrementalCalicoPolicies the same with
//     the policies written as ClusterNetworkPolicies or as Calico policies.
//     BenchmarkAPIToKernel: the same cluster through a real kube-apiserver (internal/testenv/kube)
//     and the agent in process; latency from a label patch to the element in `nft monitor`.
//   - P3 (time) and P4 (memory): the cold start of 100,000 pods, 5,000 policies and 250 local pods
//     (internal/scale.Generate). BenchmarkColdStartAPI, the agent as operators run it: the objects
//     written into a real API server's etcd and the API server restarted over them, then the agent
//     (the product binary, cmd/nftpolicy) from start to its first full commit — time, transactions,
//     elements, its peak RSS, and the CPU time of the agent and of the API server and etcd
//     meanwhile; the same start with --api-compression=false (the initial lists sent plain, not
//     gzipped), and the API server's answer to the pod list alone, both ways.
//     BenchmarkColdStart: the graph and the first full kernel.Applier.Apply in process (the
//     dataplane's part), and the peak RSS of a process doing only that.
//     NFTP_BENCH_AGENT_CPUPROFILE=<file> (or _HEAPPROFILE) also starts the agent built with the
//     tag nftpolicy_profile once, which writes its CPU profile (or its live heap) right after its
//     first commit.
//   - P5 (BenchmarkLargePolicy): one NetworkPolicy of 200 rules × 50 peers over
//     10,000 pods (internal/scale.LargePolicyBench), from its update to its commit.
//   - P6 churn (BenchmarkChurn): P3's cluster through the API server, the agent (the product
//     binary) programming a node namespace, and a writer making 200 pod changes per second
//     (internal/scale.Churn: creates, deletes, relabels) for 60 s: the agent's CPU, commits and
//     resident memory over the window, change → kernel latency (the kernel's element events)
//     for the changes whose effect on the node's table is known, and the API server's and
//     etcd's CPU beside.
//
// Each benchmark runs a fixed workload per call (b.N only raises the sample count), reports its
// figures with b.ReportMetric, and adds them to the summary table that TestMain prints after the
// run, with the machine's description (CPUs, kernel, nft version). BENCH_QUICK=1 runs a subset
// that fits in two minutes. Benchmarks never assert wall-clock figures: the table states each
// target and whether the run met it. An RSS watchdog (BENCH_MAX_RSS_MIB, default 4096) ends a
// run that grows past it — printing the summary so far and removing the namespaces — because the
// machine is shared.
//
// The topology is built here (netns_test.go: a node namespace, pod namespaces on routed veth
// pairs) with `ip`, so the figures depend on nothing but the kernel, `ip`, `nft` and the code
// measured.
//
// The package has only test files besides this one; nothing imports it.
package bench
