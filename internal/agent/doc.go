// Package agent is the loop that joins the stages of docs/design.md inside the running agent:
//
//	sources (internal/sync, internal/ifmon) ──[]model.Update──► Loop ──► graph ──[]dataplane.Message──► Programmer (nft)
//
// One goroutine owns the graph and the Programmer (what programs the kernel's table), so neither
// needs locks; its state is the unexported loop type, whose methods are the loop's steps. The
// graph is told the state is complete only once every source has reported in-sync
// (Config.Sources: the API watcher and the interface monitor's first dump), so the first commit
// holds the interfaces of the pods already running. Updates that arrive together are coalesced
// into one graph flush and one netlink transaction. With Config.CommitInterval set, commits of
// changes are paced once the full state is committed (pacer): a burst at least
// Config.CommitQuiet (5 ms) after the previous one is a lone change and commits at once; bursts
// that come closer together wait in the graph for one commit per interval — fewer commits under
// churn, at most the interval added to a change's latency. By default every burst commits at
// once. A failed apply is retried by a full resync
// with exponential backoff; a periodic resync repairs drift. The loop also drives the agent's
// metrics (Metrics) and health (Health): /healthz fails after FailureThreshold consecutive
// failures, and nothing else (an API outage leaves the table in force, and a restart would not
// help); /readyz turns ready once the first full apply after in-sync has committed, and fails
// while the last apply failed, or while an apply has run, or a watch of the API server been
// closed, for longer than Health.StaleAfter. A nil Metrics or Health in Config is replaced by one
// that nothing exports or serves, so the loop records to both unconditionally. Run returns
// within shutdownGrace (100 ms) of its context's end, leaving an apply that still runs to end with
// the process: the kernel's table is the last committed transaction either way. The
// model.SourceVersion updates of a batch are not fed to the graph: once the batch is committed (or
// changed nothing, and no apply is failing), their versions are published as
// nftpolicy_source_resource_version — the table reflects every change of that resource up to it. A
// batch's updates are dropped from it as the graph takes them (feed): a cold start's first batch is
// the whole cluster, and what the graph does not keep of it must not stay live until the batch
// ends. Config.FirstCommit is called once, when that first full apply has committed: the binary
// ends TuneGoRuntime's start-up settings there (goruntime.go), which trade the collector's work
// during the cold start for nothing at its peak. Before the graph's first full flush the loop
// runs one collection (runtime.GC, O(the live heap)): what the initial lists left (the
// cluster's endpoints as the sources handed them over, which the graph keeps packed) is freed
// before the flush's messages, the desired table and the first commit's batch are made, so that
// the cold start's peak is the state plus those, not those plus the lists' garbage wherever the
// collector happened to run last (BENCHMARKS.md's P4).
//
// Changes by others: Run starts the nft table monitor, whose reports (Config.TableChanges)
// say that another process changed the table, or that changes may have gone unreported. The loop
// answers the reports queued together at once, with one Repair (the desired table written whole,
// no read-back: the kernel has said that it changed) when one of them names a change, else with
// one Resync, and logs the committing process's pid and command and what it changed;
// nftpolicy_table_foreign_changes_total and nftpolicy_table_events_lost_total count the reports,
// nftpolicy_drift_repairs_total{trigger} the repairs (event, periodic, retry). Before in-sync a
// report is only logged: the first commit replaces the table. The periodic resync stays, for what
// no report covers.
//
// Bridge CNIs (bridgenf.go): pods on a bridge are policed in the inet table only while
// br_netfilter passes bridged traffic to it (net.bridge.bridge-nf-call-iptables, -ip6tables, per
// namespace). The agent never writes them; when the interface monitor reports pods behind bridge
// ports it reads them, exports nftpolicy_bridge_netfilter{family} and logs an error for one that
// is off. RunConfig.Bridges (--bridge) restricts the bridges the monitor looks behind.
//
// Domain names (domainnames.go): with RunConfig.DNSGroup the agent observes the DNS answers to
// its node's pods (internal/fqdn: the hold's own table, the Observer, Heartbeat and Injector)
// and, after each apply, hands the Observer the patterns whose sets the table declares.
//
// One agent per table (lock.go): Run takes an exclusive flock on RunConfig.LockFile (per table,
// LockPath) before the loop may write. While another agent holds it the loop stands by
// (Config.Programming): it feeds the graph and has the Programmer build the table from what the
// graph flushes without writing it (Programmer.Build: the nft builder alone), turns ready once in
// sync, and writes nothing — no Apply, Resync or Repair; table-change reports (the other agent's
// commits) are only counted. Once the lock is taken the table is written at once: the first
// commit, the table whole in one transaction (Repair), which replaces the other agent's. The lock
// is released only once the loop has stopped (an apply that outlives Run keeps it until the
// process ends), and CleanupOnExit removes the table only while the lock is held. The servers
// listen with SO_REUSEPORT, so that the standing-by agent serves on the same addresses as the one
// it replaces. nftpolicy_lock_held and nftpolicy_lock_wait_seconds follow the lock.
package agent
