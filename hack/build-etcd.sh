#!/usr/bin/env bash
# Builds etcd from its Go module (go.etcd.io/etcd/server/v3, ETCD_VERSION of hack/gobuild.sh) into
# $NFTPOLICY_CACHE/etcd-vVERSION/etcd, the etcd the test harness runs (internal/testenv/kube);
# does nothing when the binary is already there.
set -euo pipefail
. "$(dirname "$0")/gobuild.sh"
out="$NFTPOLICY_CACHE/etcd-v$ETCD_VERSION"
if [ -x "$out/etcd" ]; then
  echo "etcd v$ETCD_VERSION: cached at $out/etcd"
  exit 0
fi
echo "building etcd v$ETCD_VERSION"
gobuild etcd go.etcd.io/etcd/server/v3 "v$ETCD_VERSION" . "" "" "$ETCD_MAIN"
echo "etcd v$ETCD_VERSION: built at $out/etcd"
