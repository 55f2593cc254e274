#!/usr/bin/env bash
# start | stop | env: a Docker daemon of the kind path's own, in a network namespace of its own,
# so that nothing it does (docker0, the kind bridge, iptables rules, the API server's published
# port on 127.0.0.1) lands in the root network namespace.
#
# It is entered with nsenter --net=/run/netns/NAME: `ip netns exec` would also remount /sys,
# which hides the cgroup mounts (dockerd then exits with "Devices cgroup isn't mounted"). Its
# data root is in $NFTPOLICY_CACHE (the built images stay there between runs); its exec root,
# socket and pidfile in $KIND_RUN. The default runtime is runc-nocap, which takes out of
# privileged containers the capabilities this machine's bounding set lacks (CAP_SYS_RESOURCE).
# start records the global sysctls a kubelet sets (vm.overcommit_memory, kernel.panic, ...), and
# stop, which removes everything start and kind made, restores them.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
repo="$(cd "$(dirname "$0")/../.." && pwd)"

start() {
  if [ -S "$KIND_RUN/docker.sock" ] && docker_cli version >/dev/null 2>&1; then
    echo "dockerd: already running in netns $KIND_NETNS"; return 0
  fi
  command -v dockerd >/dev/null || { echo "dockerd: installing docker.io"; apt_install docker.io; }
  mkdir -p "$KIND_RUN" "$NFTPOLICY_CACHE/docker"
  # The kubelets in kind's nodes set global (not per-namespace) sysctls; stop puts them back.
  [ -s "$KIND_RUN/sysctls.saved" ] || for s in $KUBELET_SYSCTLS; do echo "$s=$(sysctl -n "$s")"; done > "$KIND_RUN/sysctls.saved"
  CGO_ENABLED=0 go build -C "$repo" -o "$KIND_RUN/runc-nocap" ./hack/kind/runc-nocap
  ip netns list | awk '{print $1}' | grep -qx "$KIND_NETNS" || ip netns add "$KIND_NETNS"
  nsenter --net="/run/netns/$KIND_NETNS" ip link set lo up
  # dockerd's own sysctls (ip_forward, bridge-nf-call) are per network namespace. It outlives
  # this script's caller when the cluster is kept, so it inherits no descriptor beyond 0-2 (a
  # caller's flock on one would stay held by dockerd and containerd).
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec nsenter --net="/run/netns/$KIND_NETNS" setsid dockerd \
      --host "unix://$KIND_RUN/docker.sock" --pidfile "$KIND_RUN/docker.pid" \
      --data-root "$NFTPOLICY_CACHE/docker" --exec-root "$KIND_RUN/exec" \
      --add-runtime "nocap=$KIND_RUN/runc-nocap" --default-runtime nocap \
      --storage-driver overlay2 --iptables=true --log-level warn
  ) > "$KIND_RUN/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 60); do
    docker_cli version >/dev/null 2>&1 && { echo "dockerd: running in netns $KIND_NETNS ($(docker_cli version -f '{{.Server.Version}}'))"; return 0; }
    sleep 1
  done
  echo "dockerd: did not start; its log:" >&2; tail -20 "$KIND_RUN/dockerd.log" >&2; return 1
}

stop() {
  if [ -S "$KIND_RUN/docker.sock" ] && docker_cli version >/dev/null 2>&1; then
    ids=$(docker_cli ps -aq)
    [ -z "$ids" ] || docker_cli rm -f -v $ids >/dev/null || true
    for n in $(docker_cli network ls -q --filter type=custom); do docker_cli network rm "$n" >/dev/null || true; done
  fi
  if [ -s "$KIND_RUN/docker.pid" ]; then
    pid=$(cat "$KIND_RUN/docker.pid")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
  fi
  # What a killed daemon may leave: mounts under its roots, its containerd, the namespace.
  for m in $(awk '{print $5}' /proc/self/mountinfo | grep -E "^($KIND_RUN|$NFTPOLICY_CACHE/docker)/" | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  if [ -s "$KIND_RUN/exec/containerd/containerd.pid" ]; then
    kill "$(cat "$KIND_RUN/exec/containerd/containerd.pid")" 2>/dev/null || true
  fi
  ip netns list | awk '{print $1}' | grep -qx "$KIND_NETNS" && ip netns del "$KIND_NETNS"
  if [ -s "$KIND_RUN/sysctls.saved" ]; then
    while read -r kv; do sysctl -q -w "$kv" >/dev/null || true; done < "$KIND_RUN/sysctls.saved"
  fi
  rm -rf "$KIND_RUN"
  echo "dockerd: stopped, netns $KIND_NETNS removed"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
