#!/usr/bin/env bash
# make e2e-kind: nftpolicy in a real Kubernetes cluster (kind: 1 control plane, 2 workers,
# dual-stack, kube-proxy in nftables mode, a CNI that does not enforce NetworkPolicy), deployed
# from deploy/, then test/kind/service-check.sh, upstream's `e2e.test --ginkgo.focus=Netpol` and
# network-policy-api's conformance suite (test/kind/conformance.sh). Offline, the agents run with
# automatic host endpoints (test/kind/agent/) and every node is locked down by one
# GlobalNetworkPolicy (test/kind/node-lockdown.yaml, checked by test/kind/node-lockdown-check.sh)
# before the Service check, upstream's cases and the suite, which run under it.
#
# Two paths in one script:
#  - offline (the default; what runs on this project's machines, which reach no container
#    registry and no download site): everything is built here and cached in $NFTPOLICY_CACHE,
#    keyed by version (hack/kind/build-*.sh): Kubernetes $KUBE_VERSION from its Go module, the
#    kind node image and every image the cluster runs, e2e.test. Docker runs as a daemon of this
#    script's own in a network namespace of its own (hack/kind/dockerd.sh): the root network
#    namespace is never touched, and the script checks that at the end. The CNI is KIND_CNI:
#    ptp (the default): the containernetworking ptp plugin with host-local IPAM and a route per
#      node, set up by this script (as kindnet does, without kindnet's policy enforcement);
#    flannel: flannel FLANNEL_VERSION as its DaemonSet (hack/kind/flannel.yaml: kube subnet
#      manager, VXLAN, dual-stack), its CNI configuration delegating to the bridge and host-local
#      plugins (one Linux bridge, cni0, per node).
#  - online (KIND_NODE_IMAGE=kindest/node:vX.Y.Z): the Docker, kind and kubectl on PATH, kind's
#    default CNI (kindnet) with its NetworkPolicy enforcement turned off, and upstream's released
#    e2e.test downloaded for $KUBE_VERSION.
# Everything the script starts (cluster, daemon, namespace) is removed at the end, also on failure;
# KIND_KEEP=1 keeps the cluster and daemon for a look (make kind-clean removes them);
# KIND_CONFORMANCE=0 leaves out the conformance suite (make kind-conformance runs it on a kept cluster);
# --build-only builds and caches everything and starts no cluster (make kind-cache).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
. hack/kind/lib.sh
cluster="${KIND_CLUSTER:-nftpolicy}"
image="${NFTPOLICY_IMAGE:-nftpolicy:e2e-kind}"
report="${REPORT_DIR:-$repo/_artifacts/e2e-kind}"
focus="${E2E_FOCUS:-Netpol}"
# This kernel has no SCTP (CONFIG_IP_SCTP is not set), so the cases that need SCTP connectivity
# ([Feature:SCTPConnectivity]) cannot pass here with any enforcer and are skipped. The two cases
# with "SCTP" in their names that check a plugin without SCTP support (an SCTP-only policy must
# not allow or deny TCP) do run.
skip="${E2E_SKIP:-Feature:SCTPConnectivity}"
nodes="${E2E_PARALLEL:-6}"
# Rolling restarts of the DaemonSet while the upstream tests run (maxSurge 1: the new agent stands
# by beside the old one, then takes over): the first after 30 s, then 50 s after the previous one
# ended, at most this many (upstream's run takes ~4 min here); each must finish, and the tests must stay green. 0 turns them off.
rollouts="${KIND_ROLLOUTS:-3}"
cni="${KIND_CNI:-ptp}"
case $cni in ptp|flannel) ;; *) echo "KIND_CNI=$cni: ptp or flannel" >&2; exit 1 ;; esac
conformance="${KIND_CONFORMANCE:-1}"
start=$(date +%s)
phase() { echo "== $(( $(date +%s) - start )) s: $*"; }
mkdir -p "$report"
rm -f "$report"/nftpolicy-*.log "$report"/denied-*.txt "$report"/node-lockdown-denied.txt "$report"/nft-monitor-*.log

if [ -n "${KIND_NODE_IMAGE:-}" ]; then
  # ---- online path ----
  [ "$cni" = ptp ] || { echo "KIND_CNI=$cni: the online path runs kind's own CNI (kindnet)" >&2; exit 1; }
  for tool in docker kind kubectl curl; do
    command -v "$tool" >/dev/null || { echo "e2e-kind (online) needs $tool on PATH" >&2; exit 1; }
  done
  work=$(mktemp -d)
  trap '[ -n "${KIND_KEEP:-}" ] || kind delete cluster --name "$cluster" >/dev/null 2>&1; rm -rf "$work"' EXIT
  cat > "$work/kind.yaml" <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: dual
  kubeProxyMode: nftables
nodes: [{role: control-plane}, {role: worker}, {role: worker}]
KIND
  kind create cluster --name "$cluster" --config "$work/kind.yaml" --image "$KIND_NODE_IMAGE" --wait 120s
  # kindnetd enforces NetworkPolicy itself unless told not to: turn that off so that nftpolicy is
  # the only enforcer, then check that no node still has its table.
  if ! kubectl -n kube-system get ds kindnet -o json | grep -q -- '--network-policy=false'; then
    if kubectl -n kube-system get ds kindnet -o jsonpath='{.spec.template.spec.containers[0].args}' | grep -q .; then
      op='[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--network-policy=false"}]'
    else
      op='[{"op":"add","path":"/spec/template/spec/containers/0/args","value":["--network-policy=false"]}]'
    fi
    kubectl -n kube-system patch ds kindnet --type=json -p "$op"
  fi
  kubectl -n kube-system rollout status ds/kindnet --timeout=180s
  for node in $(kind get nodes --name "$cluster"); do
    docker exec "$node" nft delete table inet kube-network-policies 2>/dev/null || true
  done
  docker build -t "$image" --build-arg VERSION="$(git describe --always --dirty)" .
  kind load docker-image "$image" --name "$cluster"
  kubectl apply -f deploy/rbac.yaml
  sed "s#ghcr.io/nftpolicy/nftpolicy:latest#$image#" deploy/daemonset.yaml | kubectl apply -f -
  kubectl -n kube-system rollout status ds/nftpolicy --timeout=180s
  curl -fsSL "https://dl.k8s.io/$KUBE_VERSION/kubernetes-test-linux-amd64.tar.gz" \
    | tar -xz -C "$work" kubernetes/test/bin/e2e.test kubernetes/test/bin/ginkgo
  "$work/kubernetes/test/bin/ginkgo" --nodes="$nodes" "$work/kubernetes/test/bin/e2e.test" -- \
    --kubeconfig "${KUBECONFIG:-$HOME/.kube/config}" --provider=skeleton --num-nodes=2 \
    --ginkgo.focus="$focus" --ginkgo.skip="$skip" --report-dir "$report"
  bash test/kind/service-check.sh
  bash hack/kind/build-conformance.sh
  bash test/kind/conformance.sh "$(conformance_dir)/conformance.test" "$report"
  exit 0
fi

# ---- offline path ----
[ "$(id -u)" = 0 ] || { echo "e2e-kind needs root (its own Docker daemon in its own network namespace)" >&2; exit 1; }
# The root network namespace: links, routes, nftables, iptables (each may be empty). The global
# sysctls the kubelets set are put back by hack/kind/dockerd.sh stop.
snap() {
  ip -o link | sed 's/ qlen [0-9]*//' || true; echo; ip route || true; echo; ip -6 route || true
  echo; nft list ruleset || true; echo
  if command -v iptables-save >/dev/null; then
    { iptables-save; ip6tables-save; } 2>/dev/null | { grep -v '^#' || true; } | sed 's/\[[0-9:]*\]//'
  fi
}
snap > "$report/root-netns.before"
# kind mounts the host's /lib/modules into its nodes; Docker makes the folder when it is missing
# (this machine's kernel has its modules built in): it is removed again at the end.
libmodules_existed=0; [ -e /lib/modules ] && libmodules_existed=1
export KUBECONFIG="$KIND_RUN/kubeconfig" DOCKER_HOST="unix://$KIND_RUN/docker.sock"
finish() {
  rc=$?
  set +e
  if [ -z "${KIND_KEEP:-}" ]; then
    [ -x "$(tools_dir)/kind" ] && [ -S "$KIND_RUN/docker.sock" ] && PATH="$KIND_RUN/bin:$PATH" "$(tools_dir)/kind" delete cluster --name "$cluster" >/dev/null 2>&1
    bash hack/kind/dockerd.sh stop
    [ $libmodules_existed = 1 ] || rmdir /lib/modules 2>/dev/null
    snap > "$report/root-netns.after"
    if diff -u "$report/root-netns.before" "$report/root-netns.after" > "$report/root-netns.diff"; then
      echo "root network namespace: links, routes, nftables and iptables unchanged; no container, daemon or namespace left"
    else
      echo "root network namespace CHANGED during e2e-kind:"; cat "$report/root-netns.diff"; [ $rc != 0 ] || rc=1
    fi
  else
    echo "KIND_KEEP: cluster and daemon left running; KUBECONFIG=$KUBECONFIG, enter with nsenter --net=/run/netns/$KIND_NETNS"
  fi
  echo "e2e-kind: $(( $(date +%s) - start )) s, exit $rc"
  exit $rc
}
trap finish EXIT

phase "build (cached in $NFTPOLICY_CACHE)"
for p in conntrack nft:nftables debootstrap dockerd:docker.io jq:jq; do
  command -v "${p%%:*}" >/dev/null || apt_install "${p##*:}"
done
nice -n 15 bash hack/kind/build-rootfs.sh
# The two long Go builds side by side: each has serial stretches (linking) the other fills.
nice -n 15 bash hack/kind/build-tools.sh & tools_pid=$!
nice -n 15 bash hack/kind/build-kube.sh
wait $tools_pid
nice -n 15 bash hack/kind/build-conformance.sh
kube="$(kube_dir)"; tools="$(tools_dir)"
phase "docker daemon in netns $KIND_NETNS"
bash hack/kind/dockerd.sh start
# kind runs `docker`: Debian's client, the daemon's version, first on PATH.
mkdir -p "$KIND_RUN/bin"; ln -sf /usr/bin/docker "$KIND_RUN/bin/docker"
export PATH="$KIND_RUN/bin:$tools:$kube:$PATH"
# The API server's port is published on the namespace's 127.0.0.1: kubectl runs there.
kubectl() { in_netns "$kube/kubectl" "$@"; }
phase "images"
nice -n 15 bash hack/kind/build-images.sh
node_img="$(node_image)"
if [ "${1:-}" = --build-only ]; then phase "built (--build-only)"; exit 0; fi

phase "nftpolicy image from the Dockerfile (build stage: this machine's Go, modules vendored; runtime: scratch)"
ctx="$KIND_RUN/context"; nftpolicy_context "$ctx"
docker build -q -t "$image" --build-arg VERSION="$(git describe --always --dirty)" \
  --build-arg GO_IMAGE="$(go_image)" --build-arg RUNTIME_IMAGE=scratch "$ctx" >/dev/null
docker image prune -f >/dev/null
rm -rf "$ctx"

phase "kind cluster $cluster ($node_img)"
cat > "$KIND_RUN/kind.yaml" <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: dual
  kubeProxyMode: nftables
  disableDefaultCNI: true
nodes: [{role: control-plane}, {role: worker}, {role: worker}]
kubeadmConfigPatches:
  - |
    # this machine's cgroups are v1 (hybrid); the kubelet refuses them unless told
    kind: KubeletConfiguration
    failCgroupV1: false
KIND
kind delete cluster --name "$cluster" >/dev/null 2>&1 || true   # a kept one (KIND_KEEP=1)
in_netns kind create cluster --name "$cluster" --config "$KIND_RUN/kind.yaml" --image "$node_img" --retain=false
# The cluster's pod subnets (kubeadm's podSubnet, one per family): flannel's networks, and the
# pods the node lockdown policy admits to the conformance suite's host-network servers.
pod_subnet=$(kubectl -n kube-system get cm kubeadm-config -o jsonpath='{.data.ClusterConfiguration}' | awk '$1 == "podSubnet:" {print $2}')
net4=${pod_subnet%%,*} net6=${pod_subnet##*,}
case "$net4,$net6" in *:*,*:*|*.*,*.*|,*|*,) echo "pod subnets: \"$pod_subnet\": not one of each family" >&2; exit 1 ;; esac
if [ "$cni" = ptp ]; then
  phase "CNI: ptp + host-local on every node, a route to every other node's pod CIDRs"
  nodes_list=$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
  declare -A v4 v6 cidr4 cidr6
  for n in $nodes_list; do
    for a in $(kubectl get node "$n" -o jsonpath='{range .status.addresses[?(@.type=="InternalIP")]}{.address}{" "}{end}'); do
      case $a in *:*) v6[$n]=$a ;; *) v4[$n]=$a ;; esac
    done
    for c in $(kubectl get node "$n" -o jsonpath='{.spec.podCIDRs[*]}'); do
      case $c in *:*) cidr6[$n]=$c ;; *) cidr4[$n]=$c ;; esac
    done
  done
  for n in $nodes_list; do
    docker exec -i "$n" sh -c 'cat > /etc/cni/net.d/10-ptp.conflist' <<CNI
{
  "cniVersion": "1.0.0",
  "name": "ptp",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "mtu": 1500,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}],
        "ranges": [[{"subnet": "${cidr4[$n]}"}], [{"subnet": "${cidr6[$n]}"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
    for m in $nodes_list; do
      [ "$m" = "$n" ] && continue
      docker exec "$n" ip route replace "${cidr4[$m]}" via "${v4[$m]}"
      docker exec "$n" ip -6 route replace "${cidr6[$m]}" via "${v6[$m]}"
    done
  done
else
  phase "CNI: flannel $FLANNEL_VERSION (kube subnet manager, VXLAN, dual-stack), bridge + host-local"
  # flannel's networks are the cluster's pod subnets, which contain every node's podCIDRs.
  in_netns kind load docker-image "$(flannel_image)" --name "$cluster"
  sed -e "s#FLANNEL_IMAGE#$(flannel_image)#" -e "s#POD_NETWORK_V4#$net4#" -e "s#POD_NETWORK_V6#$net6#" hack/kind/flannel.yaml | kubectl apply -f -
  kubectl -n kube-flannel rollout status ds/kube-flannel-ds --timeout=300s
fi
kubectl wait --for=condition=Ready node --all --timeout=180s
kubectl -n kube-system rollout status deploy/coredns --timeout=180s

phase "Calico's CRDs (deploy/crds/calico/), nftpolicy DaemonSet (test/kind/agent/: deploy/ with --auto-host-endpoints --log-denied, image $image)"
kubectl apply --server-side -f deploy/crds/calico/ >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null
in_netns kind load docker-image "$image" --name "$cluster"
kubectl kustomize test/kind/agent | sed "s#ghcr.io/nftpolicy/nftpolicy:latest#$image#" | kubectl apply -f -
kubectl -n kube-system rollout status ds/nftpolicy --timeout=180s
# follow_agents follows the log of each agent pod not followed yet into nftpolicy-<pod>.log until
# the pod ends, so that the logs (and the denied packets they name) of the agents a rollout
# replaces are kept too.
follow_agents() {
  local pod f
  for pod in $(kubectl -n kube-system get pods -l app.kubernetes.io/name=nftpolicy -o name); do
    f="$report/nftpolicy-${pod#pod/}.log"
    [ -e "$f" ] && continue
    kubectl -n kube-system logs -f "$pod" > "$f" 2>&1 &
    echo $! >> "$KIND_RUN/log-followers"
  done
}
rm -f "$KIND_RUN/log-followers"
follow_agents
# Every change to each node's nftables tables (nft monitor in the node's network namespace), one
# line each after the time it was read (bash's EPOCHREALTIME), into nft-monitor-<node>.log: the
# transactions a denied packet can be set beside (the deny log's lines carry their time too).
# The monitor's pid is kept in the node, which stops it at the end.
for n in $(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'); do
  docker exec "$n" bash -c 'nft monitor > >(while IFS= read -r l; do printf "%s %s\n" "$EPOCHREALTIME" "$l"; done) &
    echo $! > /run/nftpolicy-e2e-monitor.pid; wait' > "$report/nft-monitor-$n.log" 2>&1 &
done

rc=0
# The NodePort of the preDNAT check (in the static band of the NodePort range, which dynamic
# allocation leaves to last): the only port its policy may deny (the deny gate at the end).
prednat_port=30081
phase "node lockdown: GlobalNetworkPolicy node-lockdown over the automatic host endpoints"
POD_NETWORK_V4=$net4 POD_NETWORK_V6=$net6 in_netns bash test/kind/node-lockdown-check.sh || rc=1
phase "preDNAT: GlobalNetworkPolicy nodeport-prednat restricts NodePort $prednat_port by client before kube-proxy's DNAT"
NODE_PORT=$prednat_port in_netns bash test/kind/nodeport-prednat-check.sh || rc=1
phase "service check"
masq=0; [ "$cni" = ptp ] || masq=1   # flanneld --ip-masq: pods reach a NodePort as their node
CNI_MASQUERADES_TO_NODES=$masq in_netns bash test/kind/service-check.sh || rc=1
phase "upstream e2e.test --ginkgo.focus=$focus --ginkgo.skip=$skip ($nodes parallel nodes)"
# restart_agents rolls the DaemonSet out again and again while the tests run, logging each
# rollout's start, end and the agents' handover lines to rollouts.log; a rollout that does not
# finish within 5 minutes writes FAILED.
restart_agents() {
  sleep 30
  for i in $(seq 1 "$rollouts"); do
    t0=$(date +%s)
    echo "rollout $i: restart at $(date -u +%T)"
    kubectl -n kube-system rollout restart ds/nftpolicy
    if kubectl -n kube-system rollout status ds/nftpolicy --timeout=300s; then
      echo "rollout $i: done in $(( $(date +%s) - t0 )) s"
      follow_agents
    else
      echo "rollout $i: FAILED"
    fi
    [ "$i" = "$rollouts" ] || sleep 50
  done
} > "$report/rollouts.log" 2>&1
restart_pid=
[ "$rollouts" = 0 ] || { restart_agents & restart_pid=$!; }
e2e_rc=0
in_netns "$kube/ginkgo" --nodes="$nodes" --timeout=90m --no-color --silence-skips "$kube/e2e.test" -- \
  --kubeconfig="$KUBECONFIG" --provider=skeleton --num-nodes=2 \
  --ginkgo.focus="$focus" --ginkgo.skip="$skip" --report-dir="$report" > "$report/e2e.log" 2>&1 || e2e_rc=$?
grep -E '^\[FAIL\]|^  \[FAIL\]|^Ran [0-9]+ of|Passed \| [0-9]+ Failed' "$report/e2e.log" || tail -30 "$report/e2e.log"
[ $e2e_rc = 0 ] || rc=1
if [ -n "$restart_pid" ]; then
  # the tests may end before the last rollout is due: stop waiting for it, keep the ones made
  pkill -P "$restart_pid" sleep 2>/dev/null || true
  wait "$restart_pid" || true
  cat "$report/rollouts.log"
  done_n=$(grep -c ': done in' "$report/rollouts.log" || true)
  if grep -q FAILED "$report/rollouts.log" || [ "$done_n" = 0 ]; then
    echo "rolling restarts during the tests: $done_n done, FAILED"; rc=1
  else
    echo "rolling restarts during the tests: $done_n done, every one finished"
  fi
fi
if [ "$conformance" != 0 ]; then
  phase "network-policy-api $NETPOL_API_VERSION conformance suite (profile ClusterNetworkPolicy)"
  in_netns bash test/kind/conformance.sh "$(conformance_dir)/conformance.test" "$report" || rc=1
else
  phase "conformance suite left out (KIND_CONFORMANCE=0)"
fi
while read -r pid; do kill "$pid" 2>/dev/null || true; done < <(cat "$KIND_RUN/log-followers" 2>/dev/null)
for n in $(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'); do
  docker exec "$n" bash -c 'kill "$(cat /run/nftpolicy-e2e-monitor.pid)"' 2>/dev/null || true
done
for pod in $(kubectl -n kube-system get pods -l app.kubernetes.io/name=nftpolicy -o name); do
  kubectl -n kube-system logs "$pod" > "$report/nftpolicy-${pod#pod/}.log" 2>&1 || true
done
# What the node checks' policies denied: the packets the agents logged as denied by
# GlobalNetworkPolicy node-lockdown or nodeport-prednat (--log-denied, within its rate per
# reason) through the whole run, every agent of every rollout, by policy, source, destination and
# port, then the deny counters of the agents running at the end (since their rollout), kept in
# denied-<node>.txt. The checks' own probes are the only packets the cluster sends that these
# policies may deny: of node-lockdown, TCP 18081 and the kubelet's 10250 from a worker; of
# nodeport-prednat, its NodePort. Any other port means the cluster needed something the policy
# does not allow, and fails the run; 10250 from the control plane, which node-lockdown allows,
# is reported as a warning.
echo "node lockdown: packets logged as denied by GlobalNetworkPolicy node-lockdown and nodeport-prednat (count, policy, source -> destination protocol port):"
cat "$report"/nftpolicy-*.log | grep '^{' | jq -r 'select(.msg == "packet denied")
  | (.reason | capture("GlobalNetworkPolicy/(?<p>node-lockdown|nodeport-prednat) ") | .p) as $p
  | "\($p) \(.src) -> \(.dst) \(.protocol) \(.port // "")"' 2>/dev/null | sort | uniq -c | sort -rn > "$report/node-lockdown-denied.txt" || true
sed 's/^/  /' "$report/node-lockdown-denied.txt"
if grep -Ev " node-lockdown .* tcp (18081|10250)$| nodeport-prednat .* tcp $prednat_port$" "$report/node-lockdown-denied.txt" > /dev/null; then
  echo "node lockdown: FAILED: the policies denied what the cluster sent (above, not the checks' probes: node-lockdown TCP 18081 or 10250, nodeport-prednat TCP $prednat_port)"; rc=1
fi
for a in $(kubectl get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{range .items[*].status.addresses[?(@.type=="InternalIP")]}{.address}{" "}{end}'); do
  if grep -F " node-lockdown $a -> " "$report/node-lockdown-denied.txt" | grep -q ' tcp 10250$'; then
    echo "node lockdown: WARNING: packets from the control plane ($a) to a kubelet (10250), which the policy allows, were denied (above; their times in the agents' logs, the nodes' table changes in nft-monitor-<node>.log)"
  fi
done
echo "node lockdown: nftpolicy_denied_packets_total of node-lockdown at the end"
for n in $(kubectl get nodes -o jsonpath='{.items[*].metadata.name}'); do
  docker exec "$n" bash -c "exec 3<>/dev/tcp/127.0.0.1/9464; printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3; cat <&3" 2>/dev/null |
    grep '^nftpolicy_denied_packets_total' > "$report/denied-$n.txt" || true
  grep 'node-lockdown' "$report/denied-$n.txt" | sed "s/^/  $n: /" || true
done
if [ "$cni" = flannel ]; then
  for pod in $(kubectl -n kube-flannel get pods -l app=flannel -o name); do
    kubectl -n kube-flannel logs "$pod" > "$report/flannel-${pod#pod/}.log" 2>&1 || true
  done
fi
exit $rc
