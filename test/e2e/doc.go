// Package e2e holds the end-to-end suite: the upstream Kubernetes NetworkPolicy connectivity
// cases (test/e2e/network/netpol) transcribed into table-driven tests that run on the local
// cluster harness (internal/testenv: nodes and pods as network namespaces, a real etcd and
// kube-apiserver), with one agent process per node namespace, over IPv4 and IPv6.
package e2e
