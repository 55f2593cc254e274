# Probes between the kind nodes, sourced by the node checks of `make e2e-kind`
# (node-lockdown-check.sh, nodeport-prednat-check.sh). Each probe runs in a node's own network
# namespace (docker exec) and opens a TCP connection; a verdict must hold in 2 probes in a row
# within 60 s. The caller reads $checks and $fails at its end.
fails=0 checks=0

# node_ips NODE: the node's InternalIPs, as the Node lists them.
node_ips() { kubectl get node "$1" -o jsonpath='{range .status.addresses[?(@.type=="InternalIP")]}{.address}{" "}{end}'; }

# cluster_nodes CHECK: the checks' nodes: cp (the control plane), w1 and w2 (the workers), and
# the InternalIPs of w1 and cp in w1ips and cpips; CHECK exits unless each has an IPv4 and an
# IPv6 one.
cluster_nodes() {
  local workers
  workers=($(kubectl get nodes -l '!node-role.kubernetes.io/control-plane' -o jsonpath='{.items[*].metadata.name}'))
  cp=$(kubectl get nodes -l node-role.kubernetes.io/control-plane -o jsonpath='{.items[0].metadata.name}')
  w1=${workers[0]} w2=${workers[1]}
  w1ips=($(node_ips "$w1")) cpips=($(node_ips "$cp"))
  [ "${#w1ips[@]}" = 2 ] && [ "${#cpips[@]}" = 2 ] ||
    { echo "$1: $w1 and $cp need an IPv4 and an IPv6 InternalIP: ${w1ips[*]}, ${cpips[*]}"; exit 1; }
}

# probe NODE ADDR PORT: 0 when NODE (its own network namespace, through docker) opens a TCP
# connection to ADDR:PORT within 2 s. The reason of a failure goes to $why: refused or timeout.
probe() {
  local out rc=0
  out=$(docker exec "$1" timeout 2 bash -c "exec 3<>/dev/tcp/$2/$3" 2>&1) || rc=$?
  case $rc in 0) why=open ;; 124) why=timeout ;; *) case $out in *refused*) why=refused ;; *) why="failed: $out" ;; esac ;; esac
  return $rc
}

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

# denied NODE POLICY: the node's agent's nftpolicy_denied_packets_total for the reasons naming
# GlobalNetworkPolicy POLICY (the agent serves /metrics on the node's loopback, which no host
# endpoint polices).
denied() {
  docker exec "$1" bash -c "exec 3<>/dev/tcp/127.0.0.1/9464; printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3; cat <&3" |
    awk -v p="GlobalNetworkPolicy/$2 " '/^nftpolicy_denied_packets_total/ && index($0, p) {n += $NF} END {printf "%d\n", n}'
}

# expect_counted NODE POLICY BEFORE: the node counted packets denied by POLICY since BEFORE
# (denied's figure before the probes that POLICY must close).
expect_counted() {
  local after
  after=$(denied "$1" "$2")
  checks=$((checks + 1))
  if [ "$after" -gt "$3" ]; then
    echo "  ok   $1 counted the closed probes: nftpolicy_denied_packets_total of $2 $3 -> $after"
  else
    echo "  FAIL $1 counted no closed probe: nftpolicy_denied_packets_total of $2 $3 -> $after"; fails=$((fails + 1))
  fi
}
