#!/usr/bin/env bash
# The kind path (needs Docker, kind, kubectl; not runnable on the development machine, which has
# no Docker engine): a kind cluster whose CNI does not enforce NetworkPolicy, nftpolicy deployed
# from deploy/, and the upstream conformance cases run by e2e.test with --ginkgo.focus=Netpol.
set -euo pipefail
cd "$(dirname "$0")/.."
cluster="${KIND_CLUSTER:-nftpolicy}"
kube_version="${KUBE_VERSION:-v1.36.3}"
image="ghcr.io/nftpolicy/nftpolicy:e2e"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "e2e-kind needs $tool on PATH" >&2; exit 1; }
done

cat > "$work/kind.yaml" <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  ipFamily: dual
nodes:
  - role: control-plane
  - role: worker
  - role: worker
KIND
kind get clusters | grep -qx "$cluster" || kind create cluster --name "$cluster" --config "$work/kind.yaml" --image "kindest/node:$kube_version"

# kindnetd (kind >= v0.24) enforces NetworkPolicy itself unless told not to: turn that off so
# nftpolicy is the only enforcer, then check that no node still has its table.
kubectl -n kube-system get ds kindnet -o json > "$work/kindnet.json"
if ! grep -q -- '--network-policy=false' "$work/kindnet.json"; then
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

# Upstream's e2e.test at the cluster's version.
if [ ! -x "$work/e2e.test" ]; then
  curl -fsSL "https://dl.k8s.io/$kube_version/kubernetes-test-linux-amd64.tar.gz" | tar -xz -C "$work" kubernetes/test/bin/e2e.test
  mv "$work/kubernetes/test/bin/e2e.test" "$work/e2e.test"
fi
"$work/e2e.test" --kubeconfig "${KUBECONFIG:-$HOME/.kube/config}" --provider local \
  --ginkgo.focus='Netpol' --ginkgo.skip='SCTP|Feature:SCTPConnectivity' --ginkgo.v \
  --report-dir "${REPORT_DIR:-$PWD/_artifacts}"
