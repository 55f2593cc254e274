#!/usr/bin/env bash
# Builds kube-apiserver from the k8s.io/kubernetes Go module into a cache folder outside the
# repository, keyed by version; does nothing when the binary is already there.
# A throwaway module is used so the product's go.mod never sees k8s.io/kubernetes: that module's
# go.mod replaces every k8s.io/* staging module with ./staging/..., which a module consumer must
# replace with the published versions (v0.X.Y for kubernetes v1.X.Y).
set -euo pipefail
. "$(dirname "$0")/kube-module.sh"
version="${KUBE_VERSION:-v1.36.3}"
cache="${NFTPOLICY_CACHE:-/var/cache/nftpolicy}"
out="$cache/kube-apiserver-$version/kube-apiserver"
if [ -x "$out" ]; then
  echo "kube-apiserver $version: cached at $out"
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
n=$(kube_module nftpolicy.local/kube-apiserver-build "$version")
echo 'package main' > main.go
echo "building kube-apiserver $version ($n staging modules replaced by their published versions)"
GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kube-apiserver@$version" >/dev/null 2>&1 || true
mkdir -p "$(dirname "$out")"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$out.tmp" "$out"
echo "kube-apiserver $version: built at $out"
