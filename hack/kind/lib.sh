# Shared settings of the offline kind path (sourced by hack/e2e-kind.sh and hack/kind/*.sh).
# Every version that a cached artefact depends on is here; an artefact's name carries it, so a
# change of version builds anew and an unchanged one is reused.
NFTPOLICY_CACHE="${NFTPOLICY_CACHE:-/var/cache/nftpolicy}"
KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
CRICTL_VERSION="${CRICTL_VERSION:-v1.37.0}"
CNI_PLUGINS_VERSION="${CNI_PLUGINS_VERSION:-v1.10.0}"
FLANNEL_VERSION="${FLANNEL_VERSION:-v0.28.10}"  # KIND_CNI=flannel
. "$(dirname "${BASH_SOURCE[0]}")/../gobuild.sh"  # ETCD_VERSION, shared with the test harness
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.2}"  # kubeadm v1.36's CoreDNSVersion
PAUSE_VERSION="${PAUSE_VERSION:-3.10.2}"       # kubeadm v1.36's PauseVersion
AGNHOST_VERSION="${AGNHOST_VERSION:-2.63.0}"   # test/utils/image/manifest.go of v1.36
# network-policy-api's conformance suite: the module version go.mod requires, and the agnhost tag
# its base manifests name (conformance/base/manifests.yaml; hack/kind/build-conformance.sh checks
# it), built here from agnhost $AGNHOST_VERSION (hack/kind/build-images.sh).
NETPOL_API_VERSION="${NETPOL_API_VERSION:-$(awk '$1 == "sigs.k8s.io/network-policy-api" {print $2}' "$(dirname "${BASH_SOURCE[0]}")/../../go.mod")}"
CONFORMANCE_AGNHOST_VERSION="${CONFORMANCE_AGNHOST_VERSION:-2.45}"
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# kind's base image's packages (images/base/Dockerfile of kind v0.33) less storage and curl, plus
# Debian's runc (1.1.5) for the node's containerd and socat for port-forwarding.
ROOTFS_PACKAGES="${ROOTFS_PACKAGES:-systemd conntrack iptables nftables iproute2 ethtool util-linux mount kmod libseccomp2 pigz bash ca-certificates jq procps runc socat}"
ROOTFS_KEY="$DEBIAN_SUITE-$(echo "$ROOTFS_PACKAGES" | md5sum | cut -c1-8)"

rootfs_tar() { echo "$NFTPOLICY_CACHE/rootfs-$ROOTFS_KEY.tar"; }
tools_dir() { echo "$NFTPOLICY_CACHE/kind-tools-$KIND_VERSION-containerd-$CONTAINERD_VERSION-crictl-$CRICTL_VERSION-cni-$CNI_PLUGINS_VERSION-etcd-$ETCD_VERSION-coredns-$COREDNS_VERSION-pause-$PAUSE_VERSION"; }
kube_dir() { echo "$NFTPOLICY_CACHE/kube-$KUBE_VERSION"; }
flannel_dir() { echo "$NFTPOLICY_CACHE/flannel-$FLANNEL_VERSION"; }
conformance_dir() { echo "$NFTPOLICY_CACHE/network-policy-api-conformance-$NETPOL_API_VERSION"; }

apt_install() {
  # Debian's packages, started by nothing: a package's service (docker.io's dockerd) must never
  # start in the root network namespace, so policy-rc.d forbids it during the install.
  local had=0
  [ -e /usr/sbin/policy-rc.d ] && had=1 && cp -p /usr/sbin/policy-rc.d /usr/sbin/policy-rc.d.kind-save
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  local rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } || rc=$?
  if [ $had = 1 ]; then mv /usr/sbin/policy-rc.d.kind-save /usr/sbin/policy-rc.d; else rm -f /usr/sbin/policy-rc.d; fi
  return $rc
}

# The kind path's own Docker daemon (hack/kind/dockerd.sh) and the namespace it lives in. The
# name does not start with nftp-: `make clean-netns` removes those.
KIND_NETNS="${KIND_NETNS:-kind-nftpolicy}"
KIND_RUN="${KIND_RUN:-/run/nftpolicy-kind}"
# Debian's docker client (20.10, the daemon's version) before any other on PATH.
docker_cli() { DOCKER_HOST="unix://$KIND_RUN/docker.sock" /usr/bin/docker "$@"; }
# Global sysctls the kubelet sets (pkg/kubelet/cm: protectKernelDefaults off), put back by
# dockerd.sh stop.
KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
# A command in the daemon's network namespace, where the kind nodes and their published ports are.
in_netns() { nsenter --net="/run/netns/$KIND_NETNS" "$@"; }
# The node image's tag: the Kubernetes version and a digest of every other version it holds, and
# NODE_RECIPE, raised when build-images.sh makes the node differently.
NODE_RECIPE=2
node_image() { echo "nftpolicy-kind/node:$KUBE_VERSION-$(echo "$NODE_RECIPE $ROOTFS_KEY $(tools_dir) $AGNHOST_VERSION $CONFORMANCE_AGNHOST_VERSION $(porter_digest)" | md5sum | cut -c1-10)"; }
# The digest of the conformance agnhost image's /agnhost (hack/kind/agnhost-porter-nosctp).
porter_digest() { md5sum < "$(dirname "${BASH_SOURCE[0]}")/agnhost-porter-nosctp" | cut -c1-8; }

# The flannel image of KIND_CNI=flannel (hack/kind/build-images.sh): flanneld, and the CNI
# plugins its DaemonSet installs on the nodes (hack/kind/flannel-cni, bridge); the tag carries
# their versions and the digest of flannel-cni.
flannel_image() { echo "nftpolicy-kind/flannel:$FLANNEL_VERSION-cni-$CNI_PLUGINS_VERSION-$(md5sum < "$(dirname "${BASH_SOURCE[0]}")/flannel-cni" | cut -c1-8)"; }

# nftpolicy_context DIR: the repository's files (tracked and untracked, not ignored) with vendor/,
# the context the Dockerfile is built from here (its build stage reaches no module proxy).
nftpolicy_context() {
  local repo; repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  rm -rf "$1"; mkdir -p "$1"
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$1")
  (cd "$1" && go mod vendor)
}
# The Dockerfile's build stage: the rootfs with this machine's Go, and a Go build cache holding
# nftpolicy's dependencies compiled as the Dockerfile compiles them (-trimpath, CGO_ENABLED=0,
# from /src/vendor), so an image build compiles only nftpolicy's own packages. Keyed by go.sum.
go_image() {
  local repo; repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  echo "nftpolicy-kind/golang:$(go env GOVERSION)-$(md5sum < "$repo/go.sum" | cut -c1-8)"
}
