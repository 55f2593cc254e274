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
. ./probe.sh
ns=nftpolicy-node-lockdown
port="${PORT:-18081}"
agnhost="${AGNHOST_IMAGE:-registry.k8s.io/e2e-test-images/agnhost:2.63.0}"
: "${POD_NETWORK_V4:?}" "${POD_NETWORK_V6:?}"
cluster_nodes node-lockdown

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

echo "node-lockdown: listener on $w1 (hostNetwork, TCP $port); probes from $w2 and $cp"
echo " before the policy:"
for a in "${w1ips[@]}"; do
  expect "$w2" "$a" "$port" open "hostNetwork listener, another worker"
  expect "$cp" "$a" "$port" open "hostNetwork listener, the control plane"
done
sed -e "s#POD_NETWORK_V4#$POD_NETWORK_V4#" -e "s#POD_NETWORK_V6#$POD_NETWORK_V6#" node-lockdown.yaml | kubectl apply -f - >/dev/null
echo " with GlobalNetworkPolicy node-lockdown:"
before=$(denied "$w1" node-lockdown)
for a in "${w1ips[@]}"; do
  expect "$w2" "$a" "$port" closed "hostNetwork listener, another worker"
  expect "$cp" "$a" "$port" closed "hostNetwork listener, the control plane"
  expect "$w1" "$a" "$port" open "hostNetwork listener, its own node (loopback)"
  expect "$cp" "$a" 10250 open "kubelet, the control plane"
  expect "$w2" "$a" 10250 closed "kubelet, another worker"
done
for a in "${cpips[@]}"; do expect "$w2" "$a" 6443 open "API server, a worker"; done
expect_counted "$w1" node-lockdown "$before"
kubectl delete namespace "$ns" --wait=false >/dev/null
echo "node-lockdown: $((checks - fails)) passed, $fails failed (the policy stays in place)"
[ $fails = 0 ]
