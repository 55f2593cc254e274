#!/usr/bin/env bash
# Builds the Kubernetes binaries a kind node needs (kubelet, kubeadm, kubectl, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy), upstream's e2e.test, agnhost and the
# ginkgo runner (at the version Kubernetes requires) from the k8s.io/kubernetes Go module, into
# $NFTPOLICY_CACHE/kube-$KUBE_VERSION/, once: a binary already there is kept. As
# hack/build-kube-apiserver.sh, a throwaway module (hack/kube-module.sh) replaces the 33 staging modules by their
# published v0.X.Y; the binaries carry the version as upstream's release builds do (kubeadm
# checks the kubelet's, kind reads the API server's).
set -euo pipefail
. "$(dirname "$0")/../kube-module.sh"
version="${KUBE_VERSION:-v1.36.3}"
cache="${NFTPOLICY_CACHE:-/var/cache/nftpolicy}"
out="$cache/kube-$version"
bins="kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy"
complete=1
for b in $bins e2e.test agnhost ginkgo; do [ -x "$out/$b" ] || complete=0; done
if [ "$complete" = 1 ]; then echo "kubernetes $version: cached in $out"; exit 0; fi

work="$cache/kube-$version.build"   # kept: its go.mod and go.sum are resolved once
mkdir -p "$work" "$out"
cd "$work"
if [ ! -s go.sum ]; then
  n=$(kube_module nftpolicy.local/kube-build "$version")
  cat > main.go <<'GO'
package main

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/test/e2e"
	_ "k8s.io/kubernetes/test/images/agnhost"
)

func main() {}
GO
  echo "kubernetes $version: resolving modules ($n staging modules replaced by their published versions)"
  GOFLAGS=-mod=mod go mod tidy >/dev/null
fi

major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ld="$ld -X $p.gitVersion=$version -X $p.gitMajor=$major -X $p.gitMinor=$minor"
  ld="$ld -X $p.gitTreeState=clean -X $p.buildDate=2026-01-01T00:00:00Z"
done
export GOFLAGS="-mod=mod ${GOFLAGS_EXTRA:-}" CGO_ENABLED=0
t0=$(date +%s)
pkgs=""; for b in $bins; do [ -x "$out/$b" ] || pkgs="$pkgs k8s.io/kubernetes/cmd/$b"; done
if [ -n "$pkgs" ]; then
  echo "kubernetes $version: building$pkgs"
  go build -trimpath -ldflags "$ld" -o "$out/" $pkgs
fi
if [ ! -x "$out/agnhost" ]; then
  echo "kubernetes $version: building agnhost"
  go build -trimpath -ldflags "-s -w" -o "$out/agnhost" k8s.io/kubernetes/test/images/agnhost
fi
if [ ! -x "$out/ginkgo" ]; then
  echo "kubernetes $version: building ginkgo"
  go build -trimpath -ldflags "-s -w" -o "$out/ginkgo" github.com/onsi/ginkgo/v2/ginkgo
fi
if [ ! -x "$out/e2e.test" ]; then
  echo "kubernetes $version: building e2e.test"
  go test -c -trimpath -ldflags "$ld" -o "$out/e2e.test.tmp" k8s.io/kubernetes/test/e2e
  mv "$out/e2e.test.tmp" "$out/e2e.test"
fi
echo "kubernetes $version: built in $(( $(date +%s) - t0 )) s into $out"
