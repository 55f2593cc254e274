#!/usr/bin/env bash
# The preDNAT check of `make e2e-kind`, after the node lockdown: a NodePort restricted by client
# before kube-proxy's DNAT (nftables mode). A dual-stack NodePort Service (nodePort $NODE_PORT)
# with its backend pod (agnhost netexec) on one worker must answer on that worker's addresses
# from the control plane and from the other worker before the policy; with
# nodeport-prednat.yaml (preDNAT, applyOnForward, over the automatic host endpoints) it must
# stay open from the control plane, the allowed client, and be closed from the other worker,
# over IPv4 and IPv6, through kube-proxy's DNAT, and the worker's nftpolicy_denied_packets_total
# of the policy must have grown. The policy is deleted at the end and the NodePort must answer
# the other worker again, so that the rest of the run is what it was without this check; the
# Service and its namespace are deleted too. The only packets the policy may deny are these
# probes: TCP $NODE_PORT (the run's deny gate knows them by that port).
# Needs kubectl pointed at the cluster (KUBECONFIG), docker reaching the kind nodes, and the
# agnhost image on the nodes.
set -euo pipefail
cd "$(dirname "$0")"
. ./probe.sh
. ./kube-proxy.sh
ns=nftpolicy-nodeport-prednat
nodeport="${NODE_PORT:-30081}"
agnhost="${AGNHOST_IMAGE:-registry.k8s.io/e2e-test-images/agnhost:2.63.0}"
cluster_nodes nodeport-prednat
cp4=${cpips[0]} cp6=${cpips[1]}
case $cp4 in *:*) cp4=${cpips[1]} cp6=${cpips[0]} ;; esac

kubectl delete namespace "$ns" --ignore-not-found --wait >/dev/null
kubectl create namespace "$ns" >/dev/null
kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: backend, labels: {app: backend}}
spec:
  nodeName: $w1
  containers:
    - name: netexec
      image: $agnhost
      imagePullPolicy: IfNotPresent
      args: [netexec, --http-port=8080, --udp-port=-1]
YAML
nodeport_service "$ns" "$nodeport"
kubectl -n "$ns" wait --for=condition=Ready pod/backend --timeout=120s >/dev/null
wait_nodeport "$w1" "$nodeport"

echo "nodeport-prednat: NodePort $nodeport of $w1 (backend pod on $w1); probes from $cp and $w2"
echo " before the policy:"
for a in "${w1ips[@]}"; do
  expect "$cp" "$a" "$nodeport" open "NodePort, the control plane"
  expect "$w2" "$a" "$nodeport" open "NodePort, another worker"
done
sed -e "s#CP_V4#$cp4#" -e "s#CP_V6#$cp6#" -e "s#NODE_PORT#$nodeport#g" nodeport-prednat.yaml | kubectl apply -f - >/dev/null
echo " with GlobalNetworkPolicy nodeport-prednat (preDNAT: the control plane allowed, the rest denied):"
before=$(denied "$w1" nodeport-prednat)
for a in "${w1ips[@]}"; do
  expect "$cp" "$a" "$nodeport" open "NodePort, the control plane (allowed before DNAT)"
  expect "$w2" "$a" "$nodeport" closed "NodePort, another worker (denied before DNAT)"
done
expect_counted "$w1" nodeport-prednat "$before"
kubectl delete globalnetworkpolicies.projectcalico.org nodeport-prednat >/dev/null
echo " the policy deleted:"
for a in "${w1ips[@]}"; do expect "$w2" "$a" "$nodeport" open "NodePort, another worker"; done
kubectl delete namespace "$ns" --wait >/dev/null
echo "nodeport-prednat: $((checks - fails)) passed, $fails failed (the policy and the Service deleted)"
[ $fails = 0 ]
