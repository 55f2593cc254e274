// Package chaos is the fault suite: continuous probes between the pods of a 2-node cluster
// while the agent, the API server, the table and the input are broken on purpose, each step
// judged against the expected truth table.
//
// Place in the data flow: outside it, end to end, like test/e2e. The cluster is the local
// harness (internal/testenv): nodes and pods as network namespaces (netns), a real etcd and
// kube-apiserver (kube, started once for the package by TestMain), and on each node the agent
// binary as the product runs (agentproc), with anti-spoofing over the harness's veths and every
// other flag at its default — the resync interval included. Pods, namespaces and policies go in
// through the API server; connectivity comes out of real sockets.
//
// # Pieces (all test files)
//
//   - cluster_test.go: the fixture — nodes a and b; six probed pods serving TCP 80 (x/web-a,
//     x/cli-a, y/cli-a on a; x/web-b, x/cli-b, y/other-b on b); three policies (x/web-ingress:
//     web pods accept clients of x and y; y/isolate-other: y/other-b accepts nothing;
//     y/client-egress: clients of y send to web pods of x only), so that the table has allowed
//     and denied cells, same-node and cross-node, by ingress and by egress; the expected truth
//     tables, written by hand; agents started and restarted (each with a log of its own); the
//     table of a node as `nft list` prints it, normalized.
//   - prober_test.go: the prober and its judge (below).
//   - chaos_test.go: TestChaos and the faults of steps 1–4.
//   - odd_test.go: step 5, the burst of odd objects.
//   - overlap_test.go: step 6, two agents on one node.
//   - paused_test.go: step 7, an agent paused through an API server restart.
//   - reuse_test.go: step 8, IP reuse.
//   - upgrade_test.go: step 9, upgrade and downgrade, and the previous release it builds.
//
// # Probing and judging
//
// Every cell — an ordered pair of distinct probed pods, over IPv4 and over IPv6: 60 cells — is
// probed in a loop of its own (netns.ProbeSpec, TCP, a 2 s timeout, 250 ms between probes) from
// the fixture's start to the test's end, and every probe is kept with its start and end. The
// expectation is a timeline of phases: from a phase's time on, every cell expects the phase's
// truth table; a phase may name cells that settle — those whose expectation it changes, or
// those a fault touches — whose probes overlapping its settle window are not judged. A step
// judges every probe that started within it: a leak is a probe that connected where the table
// says blocked, a drop one that failed where it says connected. Before it judges, a step waits
// until every cell has been probed after the step's last settle window, so each cell is judged
// after the fault as well; a cell with no judged probe fails the step. After each step both
// agents must still run (no crash). Settle windows are the acceptance's bounds, or end when the
// agents have committed a change (kube.Server.Barrier, agentproc.Process.WaitCaughtUp): a table
// that is still wrong after them shows as leaks or drops.
//
// # Steps (in order, on one fixture; each logs its figures, and the test's last lines all)
//
//  1. Agent SIGKILL and restart: node a's agent is killed, stays down 2 s and is started again.
//     Nothing settles: the table stays in force throughout (its normalized listing is checked
//     equal while the agent is down and after the restart). Figure: the restart's time to
//     /readyz.
//  2. API server outage: kube-apiserver is killed, stays down 20 s and is started again
//     (kube.Server.RestartAPIServer); nothing settles meanwhile. At its return, y/isolate-other
//     is deleted and x/cli-b relabelled app=other; both agents must have committed the change
//     (a barrier written after it) within 5 s of the return — the acceptance's bound — and the
//     cells it changes settle until then. Figures: when the probes first saw every changed cell
//     right, when the agents committed.
//  3. Table flushed: `nft flush table inet nftpolicy` in node a's namespace. The agent must
//     repair the table within 1 s of the change — the acceptance's bound, timed by
//     agentproc.TimeRepair between the two transactions as the kernel reports them, so that no
//     process start-up counts — and its listing must then equal the one before. The cells from
//     or to node a's pods settle from nft's start to 1 s after the change. Figure: the repair's
//     time.
//  4. Table deleted: the same with `nft delete table inet nftpolicy` on node b.
//  5. Odd objects: a burst of API-valid oddities (pods without IPs, pods holding another pod's
//     address, pods of a node that does not exist, a pod with 100 container ports, a namespace
//     with 60 more labels, 63-character label values, a NetworkPolicy of 200 rules of 50 peers,
//     a named port that names nothing; odd_test.go lists them) that changes no cell, so nothing
//     settles; then a new policy selecting by a 63-character label value, whose changed cells
//     settle until both agents have committed it. Each agent must log one line per object it
//     rejects, as many as nftpolicy_invalid_objects_total counts. Figures: the commit times and
//     the rejected objects.
//  6. Two agents on one node: a second agent starts on node a beside the running one, sharing
//     its lock file (its servers on other ports, so that the test asks each), and must turn ready
//     in standby; for 5 s no transaction touches the table, the second commits and repairs
//     nothing, the first repairs nothing. Then the first is stopped (SIGTERM) and the second takes
//     over: its first commit leaves the table equal to the one before, and it commits the
//     cluster's writes (barrier). Nothing settles. Figure: the handover, from the first agent's
//     exit to the second's first commit, as the kernel reports it (overlap_test.go).
//  7. Paused agent: node b's agent is stopped (SIGSTOP) while 30 pods of a node that does not
//     exist are created, 10 of them relabelled and 10 deleted, and the API server restarts;
//     continued (SIGCONT), it must commit every write (barrier) and log that it relisted, as
//     many relists as it counts. Nothing settles (no probed cell changes). Figure: the
//     convergence after SIGCONT and the relist lines (paused_test.go).
//  8. IP reuse: a pod netns on node a, outside the six probed pods, whose pod object is
//     x/reuse-<i> (app=client: the web pods accept it). 20 times, that object is deleted and at
//     once y/reuse-<i> (app=other: the web pods refuse it) created with the same addresses, on
//     the same interface — every other time the other way round, the new pod known before the
//     old one's delete; once both agents have committed, an x/reuse-<i+1> is put back. From
//     just before each swap the reused address probes x/web-a (same node) and x/web-b (the
//     other node) over both families every 4 ms, each probe a new connection, for 600 ms. A
//     leak is a probe that connected though it started after the swap's first write returned;
//     a swap's leak window is how long after the swap's first event (as a watch of the test
//     process saw it: within a few ms of the agents) the last one started, 0 without one. No
//     probe started after both agents committed the swap (barrier) may connect, and the
//     windows' p99 must be within 20 ms — the acceptance's bound. The probed pods' cells are
//     judged throughout as in every step. Figures: swaps with a leak, the window's p50, p99
//     and max, and each agent's mean event → commit over the step (its
//     nftpolicy_event_to_commit_seconds).
//  9. Upgrade and downgrade: node a's agent is stopped (SIGTERM, its table stays) and the
//     previous release started in its place (a downgrade: another layout, other set names),
//     then that one stopped and the current binary started (the upgrade). Nothing settles:
//     each agent must replace the other's table with its first transaction (the table deleted
//     and added in one), and the table after the upgrade must equal the one before. The
//     previous release is the commit previousRelease (upgrade_test.go), built once per machine
//     from a temporary git worktree into $NFTPOLICY_CACHE/nftpolicy-<commit> (CGO_ENABLED=0;
//     the clone needs that commit: a shallow one fails the step). Figures: each replacement's
//     time from the process's start, the transactions until /readyz, the time to /readyz.
//
// A step that leaves the fixture wrong (a table not restored 10 s after the fault, a change not
// committed a minute after the API server's return) has failed by then; it restarts the agents
// concerned, so that the later steps are judged on their own.
//
// # Invariants
//
//   - The only wall-clock assertions are the acceptance's bounds, 5 s, 1 s and 20 ms, each
//     failing with the measured figure. Every other wait is a timeout that fails as "never".
//   - Expected tables never come from the agent; its metrics only say when it has committed,
//     and the probes after that are judged.
//   - The suite deletes its pods and policies at its end, so a second run on the same API
//     server starts clean (namespaces stay: nothing here deletes them; their labels are reset).
//
// # Running
//
//	go test -count=1 -v ./test/chaos/     # as root, after `make deps`; part of `make test`
package chaos
