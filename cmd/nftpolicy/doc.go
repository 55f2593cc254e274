// Command nftpolicy wires the stages of docs/design.md into the agent operators run:
//
//	internal/sync → internal/graph → internal/nft, with internal/ifmon beside
//
// It owns configuration (flags and environment), logging (slog with tint on a terminal, JSON
// otherwise), metrics (client_golang) and health endpoints, and tunes the Go runtime for the agent
// (agent.TuneGoRuntime: GOGC 40 and a soft memory limit of 90% of its container's unless GOGC or
// GOMEMLIMIT is set, and until the first full commit GOGC 100 under a start-up memory limit,
// ended through RunConfig.FirstCommit). Subcommands: run (default), render, explain (one flow's
// verdict and why, internal/explain), trace (real packets through this node's tables,
// internal/trace), cleanup, version, help. The commands are one table (help.go): `nftpolicy
// help`, -h or --help lists them, `nftpolicy help COMMAND` or `nftpolicy COMMAND --help` prints
// one's usage and flags on stdout, and an unknown command prints the list on stderr and exits 2.
// run stops within a second of SIGTERM or SIGINT, leaving its table in force (a second signal
// ends it at once); trace removes its own table and ends at the first signal, the others end at
// it.
package main
