#!/usr/bin/env bash
# Says whether the offline kind path's cache is warm: every binary built, the rootfs made and the
# images built for the current versions. Prints what is missing and exits 1 when it is not.
# `.ci/run` runs `make e2e-kind` only on a warm cache (a cold one takes over an hour to build).
# The images are looked up in the stamp build-images.sh writes, not in the daemon, which need
# not be running.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
missing=""
for b in kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy e2e.test agnhost ginkgo; do
  [ -x "$(kube_dir)/$b" ] || missing="$missing kube/$b"
done
for b in kind containerd ctr containerd-shim-runc-v2 crictl ptp bridge loopback host-local portmap etcd coredns pause; do
  [ -x "$(tools_dir)/$b" ] || missing="$missing tools/$b"
done
for b in flanneld install-conf; do
  [ -x "$(flannel_dir)/$b" ] || missing="$missing flannel/$b"
done
[ -x "$(conformance_dir)/conformance.test" ] || missing="$missing network-policy-api-conformance"
[ -s "$(rootfs_tar)" ] || missing="$missing rootfs"
grep -qxF "$(node_image)" "$NFTPOLICY_CACHE/kind-images.built" 2>/dev/null || missing="$missing node-image"
grep -qxF "$(flannel_image)" "$NFTPOLICY_CACHE/kind-images.built" 2>/dev/null || missing="$missing flannel-image"
if [ -n "$missing" ]; then echo "kind cache cold in $NFTPOLICY_CACHE, missing:$missing"; exit 1; fi
# The Dockerfile's build stage depends on go.sum; a changed go.sum rebuilds it within the run
# (about 10 minutes here), which does not make the cache cold.
note=""
grep -qxF "$(go_image)" "$NFTPOLICY_CACHE/kind-images.built" 2>/dev/null || note="; go.sum changed: the build stage $(go_image) is made first (~10 min)"
echo "kind cache warm in $NFTPOLICY_CACHE ($(node_image), $(flannel_image)$note)"
