#!/usr/bin/env bash
# The Service check of `make e2e-kind`, beside upstream's Netpol cases: a client pod reaches a
# dual-stack Service whose backend pod is isolated by a NetworkPolicy that allows that client
# only. The allowed client must connect, another pod must not, over IPv4 and IPv6, through the
# ClusterIPs and through the NodePort of the backend's node, and both must connect before the
# policy. The backend runs on one worker and the clients on the other, so the packets cross
# nodes and kube-proxy's DNAT (nftables mode) before nftpolicy's forward hooks see them. (A
# NodePort of a node without the backend would forward the packet masqueraded to that node's
# address: Kubernetes does not promise to keep a client's address there, so that is not checked.)
# Last, both the client and the backend are deleted and made again: they come back with new
# addresses and new host interfaces, which the policy (and anti-spoofing) must follow.
# With CNI_MASQUERADES_TO_NODES=1 (KIND_CNI=flannel: flanneld --ip-masq masquerades a pod's
# packets to any address outside the pod network, a node's included) a client reaches the
# NodePort with its node's address, which the policy does not allow: there the allowed client
# must be denied like the other pod once the policy is in place.
# Needs kubectl pointed at the cluster (KUBECONFIG) and the agnhost image on the nodes.
set -euo pipefail
. "$(dirname "$0")/kube-proxy.sh"
ns=nftpolicy-svc-check
agnhost="${AGNHOST_IMAGE:-registry.k8s.io/e2e-test-images/agnhost:2.63.0}"
workers=($(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[*].metadata.name}'))
w1=${workers[0]} w2=${workers[1]}
kubectl delete namespace "$ns" --ignore-not-found --wait >/dev/null
kubectl create namespace "$ns" >/dev/null
pod() { # pod NAME LABEL NODE ARGS...
  local name=$1 label=$2 node=$3; shift 3
  kubectl -n "$ns" run "$name" --image="$agnhost" --image-pull-policy=IfNotPresent --labels="$label" \
    --overrides="{\"spec\":{\"nodeName\":\"$node\"}}" --restart=Never -- "$@" >/dev/null
}
backend() { pod backend app=backend "$w1" netexec --http-port=8080; }
client() { pod client role=client "$w2" pause; }
backend; client
pod other role=other "$w2" pause
nodeport_service "$ns"
kubectl -n "$ns" wait --for=condition=Ready pod --all --timeout=120s >/dev/null
fmt() { case $1 in *:*) echo "[$1]" ;; *) echo "$1" ;; esac; }
mapfile -t ips < <(kubectl -n "$ns" get svc backend -o jsonpath='{range .spec.clusterIPs[*]}{@}{"\n"}{end}')
[ "${#ips[@]}" = 2 ] || { echo "service-check: the Service has no IPv4 and IPv6 ClusterIPs: ${ips[*]}"; exit 1; }

nodeport=$(kubectl -n "$ns" get svc backend -o jsonpath='{.spec.ports[0].nodePort}')
wait_nodeport "$w1" "$nodeport"
mapfile -t nodeips < <(kubectl get node "$w1" -o jsonpath='{range .status.addresses[?(@.type=="InternalIP")]}{.address}{"\n"}{end}')
targets=()   # "what address:port" of each way in
for ip in "${ips[@]}"; do targets+=("ClusterIP $(fmt "$ip"):80"); done
for ip in "${nodeips[@]}"; do targets+=("NodePort $(fmt "$ip"):$nodeport"); done

fails=0; checks=0
# probe FROM ADDR:PORT: 0 when FROM connects within 2 s.
probe() { kubectl -n "$ns" exec "$1" -- /agnhost connect "$2" --timeout=2s --protocol=tcp >/dev/null 2>&1; }
# expect FROM "WHAT ADDR:PORT" allowed|denied: a verdict must hold in 2 probes in a row within 60 s.
expect() {
  local from=$1 what=${2% *} addr=${2#* } want=$3 run=0 got
  checks=$((checks + 1))
  for _ in $(seq 30); do
    if probe "$from" "$addr"; then got=allowed; else got=denied; fi
    if [ "$got" = "$want" ]; then run=$((run + 1)); [ $run = 2 ] && break; else run=0; sleep 1; fi
  done
  if [ $run = 2 ]; then echo "  ok   $from -> backend via $what $addr $want"
  else echo "  FAIL $from -> backend via $what $addr: want $want, got $got"; fails=$((fails + 1)); fi
}
# client_with_policy "WHAT ADDR:PORT": what the policy's allowed client must get there.
client_with_policy() {
  case "${CNI_MASQUERADES_TO_NODES:-0},$1" in 1,NodePort*) echo denied ;; *) echo allowed ;; esac
}
echo "service-check: no policy (backend on $w1, clients on $w2)"
for t in "${targets[@]}"; do expect client "$t" allowed; expect other "$t" allowed; done
kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: backend-from-client}
spec:
  podSelector: {matchLabels: {app: backend}}
  policyTypes: [Ingress]
  ingress:
    - from: [{podSelector: {matchLabels: {role: client}}}]
      ports: [{port: 8080, protocol: TCP}]
YAML
echo "service-check: policy backend-from-client (ingress to app=backend from role=client on 8080 only)"
for t in "${targets[@]}"; do expect client "$t" "$(client_with_policy "$t")"; expect other "$t" denied; done
addrs() { kubectl -n "$ns" get pod "$1" -o jsonpath='{.status.podIPs[*].ip}'; }
before="client $(addrs client), backend $(addrs backend)"
kubectl -n "$ns" delete pod client backend --wait >/dev/null
backend; client
kubectl -n "$ns" wait --for=condition=Ready pod --all --timeout=120s >/dev/null
echo "service-check: client and backend made again (was $before; now client $(addrs client), backend $(addrs backend))"
for t in "${targets[@]}"; do expect client "$t" "$(client_with_policy "$t")"; expect other "$t" denied; done
kubectl delete namespace "$ns" --wait=false >/dev/null
echo "service-check: $((checks - fails)) passed, $fails failed"
[ $fails = 0 ]
