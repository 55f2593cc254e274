# Sourced by the scripts that build Kubernetes binaries from the k8s.io/kubernetes Go module.
#
# kube_module NAME VERSION writes go.mod of a throwaway module NAME in the current directory that
# requires k8s.io/kubernetes VERSION and replaces each of its staging modules (which its own
# go.mod points at ./staging/...) by the published v0.X.Y of kubernetes v1.X.Y. The list comes
# from that go.mod, so it stays right for any version. It prints how many modules it replaced.
kube_module() {
  local name=$1 version=$2 staging="v0.${2#v1.}" gomod mods
  printf 'module %s\n\ngo 1.26\n' "$name" > go.mod
  GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$version" > dl.json
  gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' dl.json)
  mods=$(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => \./staging/.*#\1#p' "$gomod" | sort -u)
  [ -n "$mods" ] || { echo "no staging replaces found in $gomod" >&2; return 1; }
  {
    echo "require k8s.io/kubernetes $version"
    for m in $mods; do echo "replace $m => $m $staging"; done
  } >> go.mod
  echo "$mods" | wc -l
}
