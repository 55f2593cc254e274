#!/usr/bin/env bash
# Builds, from their Go modules, every binary of the kind path that is not Kubernetes itself, into
# $(tools_dir) (its name carries every version): kind; containerd, ctr and the runc shim;
# crictl; the CNI plugins the nodes use (ptp, host-local, loopback, portmap, and bridge for
# KIND_CNI=flannel); etcd; CoreDNS; and upstream's pause (C, from the k8s.io/kubernetes module).
# Also flanneld and flannel's install-conf into $(flannel_dir). A binary already there is kept.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
out="$(tools_dir)"
mkdir -p "$out"
export CGO_ENABLED=0 GOFLAGS="-mod=mod ${GOFLAGS_EXTRA:-}"

gobuild kind sigs.k8s.io/kind "$KIND_VERSION" sigs.k8s.io/kind
cv=github.com/containerd/containerd/v2/version
ctags="no_aufs no_zfs no_btrfs no_devmapper"
cld="-X $cv.Version=$CONTAINERD_VERSION -X $cv.Revision=module -X $cv.Package=github.com/containerd/containerd/v2"
for b in containerd ctr containerd-shim-runc-v2; do
  gobuild "$b" github.com/containerd/containerd/v2 "$CONTAINERD_VERSION" "github.com/containerd/containerd/v2/cmd/$b" "$cld" "$ctags"
done
gobuild crictl sigs.k8s.io/cri-tools "$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl \
  "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
for p in main/ptp main/bridge main/loopback ipam/host-local meta/portmap; do
  gobuild "${p#*/}" github.com/containernetworking/plugins "$CNI_PLUGINS_VERSION" \
    "github.com/containernetworking/plugins/plugins/$p" \
    "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
done
gobuild etcd go.etcd.io/etcd/server/v3 "v$ETCD_VERSION" . "" "" "$ETCD_MAIN"
gobuild coredns github.com/coredns/coredns "$COREDNS_VERSION" github.com/coredns/coredns
if [ ! -x "$out/pause" ]; then
  src=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  gcc -Os -Wall -static -DVERSION="v$PAUSE_VERSION-nftpolicy" -o "$out/pause.tmp" "$src/build/pause/linux/pause.c"
  strip "$out/pause.tmp"; mv "$out/pause.tmp" "$out/pause"; echo "built pause (gcc, $src/build/pause/linux/pause.c)"
fi
# flanneld as flannel's Makefile builds it (cgo on amd64 for the UDP backend, linked statically;
# netgo and osusergo keep glibc's NSS out of the static binary), in a copy of the module so that
# its own go.mod and go.sum hold, less one import of its main.go: the tencentvpc backend, whose
# module (github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc) the module proxy does not
# serve. The VXLAN backend the kind path runs is flannel's own.
fl="$(flannel_dir)"
if [ ! -x "$fl/flanneld" ] || [ ! -x "$fl/install-conf" ]; then
  src=$(GOFLAGS=-mod=mod go mod download -json "github.com/flannel-io/flannel@$FLANNEL_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  w="$NFTPOLICY_CACHE/build-flanneld-$FLANNEL_VERSION"
  rm -rf "$w"; mkdir -p "$w" "$fl"; cp -r "$src/." "$w/"; chmod -R u+w "$w"
  sed -i '/"github.com\/flannel-io\/flannel\/pkg\/backend\/tencentvpc"/d' "$w/main.go"
  ! grep -q tencentvpc "$w/main.go"
  t0=$(date +%s)
  (cd "$w" && CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo -o "$fl/flanneld.tmp" \
    -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL_VERSION -extldflags=-static" . \
    && go build -trimpath -ldflags "-s -w" -o "$fl/install-conf" ./cmd/install_conf)
  mv "$fl/flanneld.tmp" "$fl/flanneld"
  echo "built flanneld and install-conf (github.com/flannel-io/flannel $FLANNEL_VERSION) in $(( $(date +%s) - t0 )) s"
fi
echo "tools: $out, $fl"
