// Package nfttest holds the fixtures the tests of internal/nft (the builder, without a kernel)
// and internal/nft/kernel (the applier, in network namespaces) share: the scenarios of the
// golden and traffic tests with their pods and truth tables, the graph messages of a scenario,
// and a generator of random cluster changes that RunCluster applies step by step, comparing the
// incremental table with a fresh Builder's after every step.
//
// It is used by tests only; nothing in it touches the kernel (a Target that does is the
// caller's).
package nfttest
