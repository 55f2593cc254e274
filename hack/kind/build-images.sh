#!/usr/bin/env bash
# Builds, in the kind path's own Docker daemon (hack/kind/dockerd.sh start), every image the
# offline cluster runs, from the cached root filesystem and binaries; nothing is pulled. An image
# whose tag exists is kept (tags carry the versions):
#   nftpolicy-kind/rootfs:KEY       debootstrap's tarball, imported
#   nftpolicy-kind/static:1         scratch with /etc/passwd, CA certificates and /tmp (as distroless/static)
#   $(go_image)                     the rootfs with this machine's Go and a warm build cache: the
#                                   Dockerfile's build stage
#   registry.k8s.io/{kube-apiserver,kube-controller-manager,kube-scheduler,kube-proxy}:KUBE_VERSION,
#   registry.k8s.io/etcd:ETCD-0, registry.k8s.io/coredns/coredns:V, registry.k8s.io/pause:V,
#   registry.k8s.io/e2e-test-images/agnhost:V  under upstream's names, so kubeadm and e2e.test
#                                   find them without a registry
#   registry.k8s.io/e2e-test-images/agnhost:CONFORMANCE_AGNHOST_VERSION  the tag
#                                   network-policy-api's conformance suite names, agnhost V
#                                   with hack/kind/agnhost-porter-nosctp as /agnhost
#   $(flannel_image)                KIND_CNI=flannel: the rootfs (iptables, nftables, iproute2)
#                                   with flanneld and install-conf in /opt/bin, and the CNI
#                                   plugins its DaemonSet installs on the nodes in /opt/cni-plugins
#                                   (hack/kind/flannel-cni as flannel, bridge); loaded into the
#                                   cluster by hack/e2e-kind.sh, not part of the node image
#   $(node_image)                   the kind node: kind v0.33's base image recipe on the rootfs, the
#                                   binaries, and the images above in its containerd
set -euo pipefail
. "$(dirname "$0")/lib.sh"
kind_src=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
kube="$(kube_dir)"; tools="$(tools_dir)"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT

have() { docker_cli image inspect "$1" >/dev/null 2>&1; }
# build TAG DIR: docker build of a prepared context (its Dockerfile), quietly.
build() {
  echo "image $1"
  docker_cli build -q -t "$1" "$2" >/dev/null
}

rootfs_image="nftpolicy-kind/rootfs:$ROOTFS_KEY"
have "$rootfs_image" || { echo "image $rootfs_image (import)"; docker_cli import "$(rootfs_tar)" "$rootfs_image" >/dev/null; }

static_image=nftpolicy-kind/static:1
if ! have "$static_image"; then
  d=$work/static; mkdir -p "$d/etc/ssl/certs" "$d/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' > "$d/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n' > "$d/etc/group"
  echo 'hosts: files dns' > "$d/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/"
  chmod 1777 "$d/tmp"
  printf 'FROM scratch\nCOPY . /\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n' > "$d/Dockerfile"
  build "$static_image" "$d"
fi

go_img="$(go_image)"
if ! have "$go_img"; then
  d=$work/golang; mkdir -p "$d"; cp -a "$(go env GOROOT)" "$d/go"
  rm -rf "$d/go/pkg/linux_amd64_race" "$d/go/test" "$d/go/doc"
  nftpolicy_context "$d/src"
  cat > "$d/Dockerfile" <<DOCKERFILE
FROM $rootfs_image
COPY go /usr/local/go
ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin GOTOOLCHAIN=local
COPY src /src
RUN cd /src && CGO_ENABLED=0 go build -trimpath -o /dev/null ./cmd/nftpolicy && rm -rf /src
DOCKERFILE
  build "$go_img" "$d"
  # Older build stages (an earlier go.sum or Go) are ~700 MB each: keep only this one.
  for old in $(docker_cli images --format '{{.Repository}}:{{.Tag}}' nftpolicy-kind/golang); do
    [ "$old" = "$go_img" ] || docker_cli rmi "$old" >/dev/null || true
  done
fi

# component IMAGE BASE FILE... [-- DOCKERFILE-LINES]: BASE plus binaries in /usr/local/bin.
component() {
  local tag=$1 base=$2; shift 2
  have "$tag" && return 0
  local d=$work/c; rm -rf "$d"; mkdir -p "$d/bin"
  while [ $# -gt 0 ] && [ "$1" != -- ]; do cp "$1" "$d/bin/"; shift; done
  [ "${1:-}" = -- ] && shift
  { echo "FROM $base"; echo "COPY bin/ /usr/local/bin/"; for l in "$@"; do echo "$l"; done; } > "$d/Dockerfile"
  build "$tag" "$d"
}
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  component "registry.k8s.io/$c:$KUBE_VERSION" "$static_image" "$kube/$c"
done
# kube-proxy runs nft (nftables mode), iptables and conntrack: the rootfs has them.
component "registry.k8s.io/kube-proxy:$KUBE_VERSION" "$rootfs_image" "$kube/kube-proxy"
component "registry.k8s.io/etcd:$ETCD_VERSION-0" "$static_image" "$tools/etcd"
component "registry.k8s.io/coredns/coredns:$COREDNS_VERSION" "$static_image" "$tools/coredns" -- 'ENTRYPOINT ["/usr/local/bin/coredns"]'
if ! have "registry.k8s.io/pause:$PAUSE_VERSION"; then
  d=$work/pause; mkdir -p "$d"; cp "$tools/pause" "$d/"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$d/Dockerfile"
  build "registry.k8s.io/pause:$PAUSE_VERSION" "$d"
fi
# agnhost: e2e.test execs /agnhost in it; the rootfs gives it a shell and the usual tools.
if ! have "registry.k8s.io/e2e-test-images/agnhost:$AGNHOST_VERSION"; then
  d=$work/agnhost; mkdir -p "$d"; cp "$kube/agnhost" "$d/"
  printf 'FROM %s\nCOPY agnhost /agnhost\nENTRYPOINT ["/agnhost"]\nCMD ["pause"]\n' "$rootfs_image" > "$d/Dockerfile"
  build "registry.k8s.io/e2e-test-images/agnhost:$AGNHOST_VERSION" "$d"
fi
# agnhost under the tag network-policy-api's conformance suite names (hack/kind/build-conformance.sh
# checks it): agnhost $AGNHOST_VERSION, whose /agnhost is hack/kind/agnhost-porter-nosctp (agnhost
# itself, but for porter on a kernel without SCTP).
# The image is labelled with the wrapper's digest, and made again when the wrapper changes.
conformance_agnhost="registry.k8s.io/e2e-test-images/agnhost:$CONFORMANCE_AGNHOST_VERSION"
if [ "$(docker_cli image inspect -f '{{index .Config.Labels "nftpolicy-kind.porter"}}' "$conformance_agnhost" 2>/dev/null)" != "$(porter_digest)" ]; then
  d=$work/agnhost-conformance; mkdir -p "$d"; cp "$kube/agnhost" "$(dirname "$0")/agnhost-porter-nosctp" "$d/"
  printf 'FROM %s\nCOPY agnhost /usr/local/lib/agnhost/agnhost\nCOPY agnhost-porter-nosctp /agnhost\nLABEL nftpolicy-kind.porter=%s\nENTRYPOINT ["/agnhost"]\nCMD ["pause"]\n' \
    "$rootfs_image" "$(porter_digest)" > "$d/Dockerfile"
  build "$conformance_agnhost" "$d"
fi
fl_img="$(flannel_image)"
if ! have "$fl_img"; then
  d=$work/flannel; mkdir -p "$d/bin" "$d/cni"
  cp "$(flannel_dir)"/{flanneld,install-conf} "$d/bin/"
  cp "$(dirname "$0")/flannel-cni" "$d/cni/flannel"; cp "$tools/bridge" "$d/cni/"
  printf 'FROM %s\nCOPY bin/ /opt/bin/\nCOPY cni/ /opt/cni-plugins/\nENTRYPOINT ["/opt/bin/flanneld"]\n' "$rootfs_image" > "$d/Dockerfile"
  build "$fl_img" "$d"
  # Older flannel images (other versions or another flannel-cni): keep only this one.
  for old in $(docker_cli images --format '{{.Repository}}:{{.Tag}}' nftpolicy-kind/flannel); do
    [ "$old" = "$fl_img" ] || docker_cli rmi "$old" >/dev/null || true
  done
fi

baked_images="registry.k8s.io/kube-apiserver:$KUBE_VERSION registry.k8s.io/kube-controller-manager:$KUBE_VERSION
registry.k8s.io/kube-scheduler:$KUBE_VERSION registry.k8s.io/kube-proxy:$KUBE_VERSION registry.k8s.io/etcd:$ETCD_VERSION-0
registry.k8s.io/coredns/coredns:$COREDNS_VERSION registry.k8s.io/pause:$PAUSE_VERSION
registry.k8s.io/e2e-test-images/agnhost:$AGNHOST_VERSION $conformance_agnhost"

node="$(node_image)"
if ! have "$node"; then
  d=$work/node; mkdir -p "$d/bin" "$d/cni" "$d/kube"
  cp -r "$kind_src/images/base/files" "$d/files"; chmod -R u+w "$d/files"
  # containerd: no fuse-overlayfs (not built: nothing here is rootless), upstream's pause version,
  # and restrict_oom_score_adj: lowering a process's oom_score_adj needs CAP_SYS_RESOURCE, which
  # this machine's nodes lack, so runc failed every pod sandbox (pause asks for -998) with "can't
  # get final child's PID from pipe: EOF"; restricted, containerd clamps it to its own (0), as
  # kind does in rootless nodes.
  sed -i -e '/^\[proxy_plugins/,/^$/d' -e "s#registry.k8s.io/pause:[0-9.]*#registry.k8s.io/pause:$PAUSE_VERSION#" \
    -e 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$d/files/etc/containerd/config.toml"
  grep -q 'restrict_oom_score_adj = true' "$d/files/etc/containerd/config.toml"
  rm -f "$d/files/etc/systemd/system/containerd-fuse-overlayfs.service"
  cp "$tools"/{containerd,ctr,containerd-shim-runc-v2,crictl} "$d/bin/"
  cp "$tools"/{ptp,loopback,host-local,portmap} "$d/cni/"
  cp "$kube"/{kubelet,kubeadm,kubectl} "$d/kube/"
  cat > "$d/Dockerfile" <<DOCKERFILE
FROM $rootfs_image
COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/etc/ /etc/
COPY bin/ /usr/local/bin/
COPY cni/ /opt/cni/bin/
COPY kube/ /usr/bin/
RUN chmod 0755 /kind /kind/bin /kind/bin/* /usr/local/bin/* \
 && find /etc/containerd /etc/default /etc/sysctl.d /etc/systemd/system /etc/crictl.yaml -type f -exec chmod 0644 {} + \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service \
 && mkdir -p /etc/kubernetes/manifests \
 && ctr oci spec | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
      | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \
 && echo $KUBE_VERSION > /kind/version \
 && containerd --version && runc --version | head -1 && kubelet --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
DOCKERFILE
  build "$node.stage" "$d"
  # As `kind build node-image`: the images go into the node's containerd, unpacked at first use.
  id=$(docker_cli run -d --entrypoint=sleep --security-opt seccomp=unconfined "$node.stage" infinity)
  trap 'docker_cli rm -f -v "$id" >/dev/null 2>&1; rm -rf "$work"' EXIT
  docker_cli exec "$id" bash -c 'nohup containerd > /var/log/containerd-build.log 2>&1 &'
  for i in $(seq 30); do docker_cli exec "$id" ctr version >/dev/null 2>&1 && break; sleep 1; done
  # One archive per image: ctr loses the first image's name when one archive holds several.
  for img in $baked_images; do
    docker_cli save "$img" | docker_cli exec -i "$id" ctr --namespace=k8s.io images import \
      --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null 2>&1
  done
  inside=$(docker_cli exec "$id" ctr --namespace=k8s.io images list -q 2>/dev/null)
  for img in $baked_images; do
    grep -qxF "$img" <<<"$inside" || { echo "node image: $img missing from its containerd" >&2; exit 1; }
  done
  echo "  in node's containerd: $(echo $baked_images)"
  docker_cli exec "$id" pkill containerd; sleep 2
  docker_cli commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' "$id" "$node" >/dev/null
  docker_cli rm -f -v "$id" >/dev/null; trap 'rm -rf "$work"' EXIT
  docker_cli rmi "$node.stage" >/dev/null
  echo "image $node"
  # Older node images (other versions or recipes) are ~1.5 GB each: keep only this one.
  for old in $(docker_cli images --format '{{.Repository}}:{{.Tag}}' nftpolicy-kind/node); do
    [ "$old" = "$node" ] || docker_cli rmi "$old" >/dev/null || true
  done
fi
docker_cli image prune -f >/dev/null
# For hack/kind/cache-state.sh: which images this data root holds.
{ echo "$node"; echo "$go_img"; echo "$fl_img"; } > "$NFTPOLICY_CACHE/kind-images.built"
