#!/usr/bin/env bash
# Builds the conformance suite of sigs.k8s.io/network-policy-api at $NETPOL_API_VERSION (the
# version go.mod requires) into $(conformance_dir)/conformance.test, once: `go test -c` of the
# module's conformance package, unmodified, with the module's own go.mod and go.sum (a copy of
# the module, since the module cache is read-only). The suite's manifests are embedded in it.
# Also checks that the suite's base manifests name the agnhost tag build-images.sh builds for
# them ($CONFORMANCE_AGNHOST_VERSION).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out="$(conformance_dir)"
src=$(cd "$(dirname "$0")/../.." && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/network-policy-api@$NETPOL_API_VERSION" \
  | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -d "$src/conformance" ] || { echo "network-policy-api $NETPOL_API_VERSION: no conformance/ in $src" >&2; exit 1; }
want="registry.k8s.io/e2e-test-images/agnhost:$CONFORMANCE_AGNHOST_VERSION"
named=$(grep -rhoE 'registry\.k8s\.io/e2e-test-images/agnhost:[0-9.]+' "$src/conformance/base" | sort -u)
if [ "$named" != "$want" ]; then
  echo "network-policy-api $NETPOL_API_VERSION's conformance manifests name $(echo $named), not $want: set CONFORMANCE_AGNHOST_VERSION in hack/kind/lib.sh" >&2
  exit 1
fi
if [ -x "$out/conformance.test" ]; then echo "network-policy-api $NETPOL_API_VERSION conformance suite: cached in $out"; exit 0; fi
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cp -r "$src/." "$work/"; chmod -R u+w "$work"
mkdir -p "$out"
t0=$(date +%s)
(cd "$work" && CGO_ENABLED=0 go test -c -trimpath -o "$out/conformance.test.tmp" ./conformance/)
mv "$out/conformance.test.tmp" "$out/conformance.test"
echo "network-policy-api $NETPOL_API_VERSION conformance suite: built in $(( $(date +%s) - t0 )) s into $out"
