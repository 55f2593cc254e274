// Package agentproc runs the nftpolicy agent as the product runs: the binary, one process inside
// a node's network namespace of the local cluster harness (internal/testenv/netns), watching the
// harness's API server (internal/testenv/kube) through a forwarder on the node's loopback, as a
// node reaches its API server. The agent-process test, the e2e conformance suite and `make demo`
// use it.
//
// Invariants: every process dies with the test process (Pdeathsig; the starting thread must not
// exit before, so callers do not start agents from locked OS threads); Stop leaves the agent's
// table in place unless it runs with --cleanup-on-exit, as the product does on SIGTERM.
package agentproc
