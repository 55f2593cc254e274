#!/usr/bin/env bash
# Builds kube-apiserver from the k8s.io/kubernetes Go module into a cache folder outside the
# repository, keyed by version; does nothing when the binary is already there.
# A throwaway module is used so the product's go.mod never sees k8s.io/kubernetes: that module's
# go.mod replaces every k8s.io/* staging module with ./staging/..., which a module consumer must
# replace with the published versions (v0.X.Y for kubernetes v1.X.Y).
set -euo pipefail
version="${KUBE_VERSION:-v1.36.3}"
cache="${NFTPOLICY_CACHE:-/var/cache/nftpolicy}"
out="$cache/kube-apiserver-$version/kube-apiserver"
if [ -x "$out" ]; then
  echo "kube-apiserver $version: cached at $out"
  exit 0
fi
staging="v0.${version#v1.}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > go.mod <<MOD
module nftpolicy.local/kube-apiserver-build

go 1.26
MOD
# The list of staging modules comes from kubernetes' own go.mod, so it stays right for any version.
GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" > dl.json
gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' dl.json)
mods=$(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => \./staging/.*#\1#p' "$gomod" | sort -u)
[ -n "$mods" ] || { echo "no staging replaces found in $gomod" >&2; exit 1; }
{
  echo "require k8s.io/kubernetes $version"
  for m in $mods; do echo "replace $m => $m $staging"; done
} >> go.mod
echo 'package main' > main.go
echo "building kube-apiserver $version ($(echo "$mods" | wc -l) staging modules replaced by $staging)"
GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kube-apiserver@$version" >/dev/null 2>&1 || true
mkdir -p "$(dirname "$out")"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$out.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$out.tmp" "$out"
echo "kube-apiserver $version: built at $out"
