# nftpolicy — every target a developer or CI needs. `make test` installs what it needs first.
SHELL := /bin/bash
GO ?= go
KUBE_VERSION ?= v1.36.3
NFTPOLICY_CACHE ?= /var/cache/nftpolicy
KUBE_APISERVER ?= $(NFTPOLICY_CACHE)/kube-apiserver-$(KUBE_VERSION)/kube-apiserver
# etcd's version is hack/gobuild.sh's ETCD_VERSION, shared with the kind path.
ETCD_VERSION ?= $(shell . hack/gobuild.sh && echo $$ETCD_VERSION)
NFTPOLICY_ETCD ?= $(NFTPOLICY_CACHE)/etcd-v$(ETCD_VERSION)/etcd
STATICCHECK_VERSION ?= v0.8.2
APT_PACKAGES := nftables iproute2 conntrack
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
TEST_TIMEOUT ?= 30m
# The e2e tests run again with pods on a bridge (NFTPOLICY_CNI=bridge): the upstream NetworkPolicy
# cases and the ClusterNetworkPolicy conformance ports.
BRIDGE_E2E ?= ^(TestConformance|TestCNPConformance)$$
export KUBE_APISERVER NFTPOLICY_ETCD NFTPOLICY_CACHE KUBE_VERSION ETCD_VERSION

.PHONY: all deps apt-deps kube-apiserver etcd build test vet unit e2e bench fuzz demo lint tidy-check clean clean-netns e2e-kind kind-cache kind-cache-state kind-conformance kind-clean

all: build

## deps: install what the tests need, only what is missing (idempotent).
deps: apt-deps kube-apiserver etcd

apt-deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else echo "apt packages present: $(APT_PACKAGES)"; fi

kube-apiserver:
	@KUBE_VERSION=$(KUBE_VERSION) NFTPOLICY_CACHE=$(NFTPOLICY_CACHE) bash hack/build-kube-apiserver.sh

etcd:
	@ETCD_VERSION=$(ETCD_VERSION) NFTPOLICY_CACHE=$(NFTPOLICY_CACHE) bash hack/build-etcd.sh

## build: the static agent binary in bin/.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nftpolicy ./cmd/nftpolicy

vet:
	$(GO) vet ./...

## test: deps + vet + every test (unit, privileged integration on the real kernel and API server, e2e).
test: deps vet
	@[ "$$(id -u)" = 0 ] || { echo "make test needs root (network namespaces, nftables)"; exit 1; }
	@nft list ruleset > .root-ruleset.before; : > .test-names
	NFTPOLICY_NAME_LOG=$(CURDIR)/.test-names $(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./...
	NFTPOLICY_CNI=bridge NFTPOLICY_NAME_LOG=$(CURDIR)/.test-names $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run '$(BRIDGE_E2E)' ./test/e2e/
	@$(MAKE) --no-print-directory clean-netns-check NAMES=.test-names
	@nft list ruleset | diff -u .root-ruleset.before - \
	  || { echo "the tests changed the root network namespace's nftables ruleset"; rm -f .root-ruleset.before; exit 1; }
	@rm -f .root-ruleset.before; echo "root namespace: nftables ruleset unchanged, no namespaces of this run left"

## unit: tests that need neither root nor the API server.
unit:
	$(GO) test -count=1 ./internal/model/... ./internal/selector/... ./internal/graph/...

e2e: deps build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v ./test/e2e/...
	NFTPOLICY_CNI=bridge $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -v -run '$(BRIDGE_E2E)' ./test/e2e/

## bench: the performance figures of BENCHMARKS.md with ratios against baselines measured in the
## same run; BENCH_QUICK=1 for the short subset (about two minutes). Built as the product ships
## (CGO_ENABLED=0), and so is the agent binary the cold-start and churn benchmarks build and run.
bench: deps
	CGO_ENABLED=0 BENCH_QUICK=$(BENCH_QUICK) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./test/bench/

## fuzz: each fuzz target for FUZZ_TIME (60 s; the seed corpora run in `make test`). FUZZ_FLAGS go
## to go test; by default inputs are not minimised: the targets that generate a case from their
## input find a new interesting input every few runs, and minimising each (go's default: up to
## 60 s) took most of their time (FuzzCompile: 138 runs in two minutes). A failing input is
## written out as found. Add e.g. -parallel 1 on shared cores.
FUZZ_FLAGS ?= -fuzzminimizetime 0
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $${FUZZ_TIME:-60s} $(FUZZ_FLAGS) $$pkg || exit 1; \
	  done; done

demo: deps build
	$(GO) run ./cmd/nftpolicy-demo -agent bin/nftpolicy

lint: vet
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## tidy-check: fail when go.mod or go.sum is not as `go mod tidy` would write it.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

clean:
	rm -rf bin/

## clean-netns: remove leftover network namespaces of the harness (prefix nftp-).
clean-netns:
	@for ns in $$(ip netns list 2>/dev/null | awk '{print $$1}' | grep '^nftp-'); do ip netns del $$ns && echo "removed $$ns"; done; true

## clean-netns-check: fail (and remove them) when namespaces named in $(NAMES), the names one
## `make test` run created, are left; namespaces of other runs on this machine are not its own.
clean-netns-check:
	@left=$$(ip netns list 2>/dev/null | awk '{print $$1}' | grep -Fxf $(NAMES) || true); rm -f $(NAMES); \
	if [ -n "$$left" ]; then echo "tests left network namespaces behind:" $$left; \
	  for ns in $$left; do ip netns del $$ns && echo "removed $$ns"; done; exit 1; fi

## e2e-kind: nftpolicy in a kind cluster (dual-stack, kube-proxy nftables), upstream's Netpol
## e2e cases, a Service check and network-policy-api's conformance suite. Offline by default: everything is built here, cached in
## $(NFTPOLICY_CACHE) (the first run takes over an hour), with a Docker daemon of its own in a
## network namespace of its own (docs/kind.md). KIND_NODE_IMAGE=kindest/node:vX takes the online path.
## KIND_CNI: ptp (per-pod interfaces and routes) or flannel (VXLAN, one bridge per node).
KIND_CNI ?= ptp
export KIND_CNI
e2e-kind:
	@[ "$$(id -u)" = 0 ] || [ -n "$$KIND_NODE_IMAGE" ] || { echo "make e2e-kind needs root"; exit 1; }
	bash hack/e2e-kind.sh

## kind-cache: build everything e2e-kind needs, without a cluster; kind-cache-state: is it built?
kind-cache:
	bash hack/e2e-kind.sh --build-only

kind-cache-state:
	@bash hack/kind/cache-state.sh

## kind-conformance: network-policy-api's conformance suite again, on a kept (KIND_KEEP=1) cluster.
kind-conformance:
	@. hack/kind/lib.sh && export KUBECONFIG=$$KIND_RUN/kubeconfig DOCKER_HOST=unix://$$KIND_RUN/docker.sock \
	  PATH=$$(kube_dir):$$PATH && in_netns bash test/kind/conformance.sh "$$(conformance_dir)/conformance.test" $(CURDIR)/_artifacts/e2e-kind

## kind-clean: remove a kept (KIND_KEEP=1) or killed run's cluster, Docker daemon and namespace.
kind-clean:
	bash hack/kind/dockerd.sh stop
