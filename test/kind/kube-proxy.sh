# The NodePort Service of the checks of `make e2e-kind` that probe one (nodeport-prednat-check.sh,
# service-check.sh), and what kube-proxy (nftables mode) has programmed of it on a kind node.

# nodeport_service NS [NODEPORT]: applies the dual-stack NodePort Service "backend" of NS: port
# 80 (TCP) to port 8080 of the pods labelled app=backend, on NODEPORT, else on one the API
# server picks.
nodeport_service() {
  local ns=$1 nodeport=${2:+", nodePort: $2"}
  kubectl -n "$ns" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata: {name: backend}
spec:
  type: NodePort
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  selector: {app: backend}
  ports: [{port: 80, targetPort: 8080$nodeport, protocol: TCP}]
YAML
}

# wait_nodeport NODE PORT: waits up to 60 s for NODE's kube-proxy to have programmed NodePort
# PORT (TCP) in both families (its service-nodeports maps). A probe sent before would reach the
# node's input hook without DNAT, where a host endpoint's policy judges the NodePort itself.
wait_nodeport() {
  local node=$1 p=$2 fam ok
  for _ in $(seq 60); do
    ok=1
    for fam in ip ip6; do
      docker exec "$node" nft list map "$fam" kube-proxy service-nodeports 2>/dev/null | grep -q "tcp \. $p " || ok=0
    done
    [ $ok = 1 ] && return 0
    sleep 1
  done
  echo "$node: kube-proxy programmed no NodePort $p in both families within 60 s"; return 1
}
