// Command nftpolicy wires the stages of DESIGN.md into the agent operators run:
//
//	internal/sync → internal/graph → internal/nft, with internal/ifmon beside
//
// It owns configuration (flags and environment), logging (slog with tint on a terminal, JSON
// otherwise), metrics (client_golang) and health endpoints, and sets the Go runtime's soft memory
// limit to 90% of its container's unless GOMEMLIMIT is set (memlimit.go). Subcommands: run
// (default), render, cleanup, version.
package main
