#!/usr/bin/env bash
# The node lockdown of `make e2e-kind`: applies node-lockdown.yaml, one GlobalNetworkPolicy over
# the agents' automatic host endpoints (--auto-host-endpoints), and proves it holds from another
# node. A hostNetwork listener on one worker (agnhost netexec, TCP $PORT, which the policy does
# not allow) must be reachable from the other worker and from the control plane before the
# policy, and from neither once it is in place, over IPv4 and IPv6, while the worker itself still
# reaches it (loopback is never policed) and what the policy allows stays open: the worker's
# kubelet (10250) from the control plane, the API server (6443) from the workers. Each closed probe
# must also show in the listener node's nftpolicy_denied_packets_total under the policy's tier
# default. The policy stays in place for the rest of the run (upstream's Netpol cases, the Service
# check and the conformance suite must stay green under it). A verdict must hold in 2 probes in
# a row within 60 s, else the check fails.
# Needs kubectl pointed at the cluster (KUBECONFIG), docker reaching the kind nodes, and the
# cluster's pod subnets: POD_NETWORK_V4 and POD_NETWORK_V6.
set -euo pipefail
cd "$(dirname "$0")"
ns=nftpolicy-node-lockdown
port="${PORT:-18081}"
agnhost="${AGNHOST_IMAGE:-registry.k8s.io/e2e-test-images/agnhost:2.63.0}"
: "${POD_NETWORK_V4:?}" "${POD_NETWORK_V6:?}"
workers=($(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[*].metadata.name}'))
cp=$(kubectl get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{.items[0].metadata.name}')
w1=${workers[0]} w2=${workers[1]}
ips() { kubectl get node "$1" -o jsonpath='{range .status.addresses[?(@.type=="InternalIP")]}{.address}{" "}{end}'; }
w1ips=($(ips "$w1")) cpips=($(ips "$cp"))
[ "${#w1ips[@]}" = 2 ] && [ "${#cpips[@]}" = 2 ] || { echo "node-lockdown: $w1 and $cp need an IPv4 and an IPv6 InternalIP: ${w1ips[*]}, ${cpips[*]}"; exit 1; }

kubectl delete namespace "$ns" --ignore-not-found --wait >/dev/null
kubectl create namespace "$ns" >/dev/null
kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: listener}
spec:
  nodeName: $w1
  hostNetwork: true
  containers:
    - name: netexec
      image: $agnhost
      imagePullPolicy: IfNotPresent
      args: [netexec, --http-port=$port, --udp-port=-1]
YAML
kubectl -n "$ns" wait --for=condition=Ready pod/listener --timeout=120s >/dev/null

# probe NODE ADDR PORT: 0 when NODE (its own network namespace, through docker) opens a TCP
# connection to ADDR:PORT within 2 s. The reason of a failure goes to $why: refused or timeout.
probe() {
  local out rc=0
  out=$(docker exec "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/$3" 2>&1) || rc=$?
  case $rc in 0) why=open ;; 124) why=timeout ;; *) case $out in *refused*) why=refused ;; *) why="failed: $out" ;; esac ;; esac
  return $rc
}
fails=0 checks=0
# expect NODE ADDR PORT open|closed WHAT
expect() {
  local from=$1 addr=$2 p=$3 want=$4 what=$5 run=0 got
  checks=$((checks + 1))
  for _ in $(seq 30); do
    if probe "$from" "$addr" "$p"; then got=open; else got=closed; fi
    if [ "$got" = "$want" ]; then run=$((run + 1)); [ $run = 2 ] && break; else run=0; sleep 1; fi
  done
  if [ $run = 2 ]; then echo "  ok   $from -> $addr port $p ($what): $want ($why)"
  else echo "  FAIL $from -> $addr port $p ($what): want $want, got $got ($why)"; fails=$((fails + 1)); fi
}
# denied NODE: the node's agent's nftpolicy_denied_packets_total for the lockdown policy's tier
# default (the agent serves /metrics on the node's loopback, which no host endpoint polices).
denied() {
  docker exec "$1" bash -c "exec 3<>/dev/tcp/127.0.0.1/9464; printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3; cat <&3" |
    awk '/^nftpolicy_denied_packets_total/ && /node-lockdown/ {n += $NF} END {printf "%d\n", n}'
}

echo "node-lockdown: listener on $w1 (hostNetwork, TCP $port); probes from $w2 and $cp"
echo " before the policy:"
for a in "${w1ips[@]}"; do
  expect "$w2" "$a" "$port" open "hostNetwork listener, another worker"
  expect "$cp" "$a" "$port" open "hostNetwork listener, the control plane"
done
sed -e "s#POD_NETWORK_V4#$POD_NETWORK_V4#" -e "s#POD_NETWORK_V6#$POD_NETWORK_V6#" node-lockdown.yaml | kubectl apply -f - >/dev/null
echo " with GlobalNetworkPolicy node-lockdown:"
before=$(denied "$w1")
for a in "${w1ips[@]}"; do
  expect "$w2" "$a" "$port" closed "hostNetwork listener, another worker"
  expect "$cp" "$a" "$port" closed "hostNetwork listener, the control plane"
  expect "$w1" "$a" "$port" open "hostNetwork listener, its own node (loopback)"
  expect "$cp" "$a" 10250 open "kubelet, the control plane"
  expect "$w2" "$a" 10250 closed "kubelet, another worker"
done
for a in "${cpips[@]}"; do expect "$w2" "$a" 6443 open "API server, a worker"; done
after=$(denied "$w1")
checks=$((checks + 1))
if [ "$after" -gt "$before" ]; then
  echo "  ok   $w1 counted the closed probes: nftpolicy_denied_packets_total of node-lockdown $before -> $after"
else
  echo "  FAIL $w1 counted no closed probe: nftpolicy_denied_packets_total of node-lockdown $before -> $after"; fails=$((fails + 1))
fi
kubectl delete namespace "$ns" --wait=false >/dev/null
echo "node-lockdown: $((checks - fails)) passed, $fails failed (the policy stays in place)"
[ $fails = 0 ]
