# Shared by the scripts that build a tool from its Go module (sourced, not run).
# ETCD_VERSION is the etcd of both the test harness (hack/build-etcd.sh) and the kind path
# (hack/kind/build-tools.sh): kubeadm v1.36's DefaultEtcdVersion 3.6.8-0.
ETCD_VERSION="${ETCD_VERSION:-3.6.8}"
NFTPOLICY_CACHE="${NFTPOLICY_CACHE:-/var/cache/nftpolicy}"

# ETCD_MAIN is the etcd command, as go.etcd.io/etcd/v3's main.go: that module's go.mod replaces
# its sibling modules with ../, so the server module is built through a main package of our own.
ETCD_MAIN='package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

// The etcd command, as go.etcd.io/etcd/v3'"'"'s main.go.
func main() { etcdmain.Main(os.Args) }'

# gobuild NAME MODULE VERSION PACKAGE [LDFLAGS] [TAGS] [MAIN.GO]: builds PACKAGE of MODULE@VERSION
# into $out/NAME in a throwaway module under $NFTPOLICY_CACHE (the tool's own go.mod requirements
# are honoured, its replaces are not); with MAIN.GO, that file is the main package built. Does
# nothing when $out/NAME is there. Only Go modules are fetched, through the module proxy.
gobuild() {
  local name=$1 mod=$2 ver=$3 pkg=$4 ld=${5:-} tags=${6:-} main=${7:-}
  [ -x "$out/$name" ] && return 0
  local w="$NFTPOLICY_CACHE/build-$name-$ver"
  mkdir -p "$w" "$out"
  (
    export CGO_ENABLED=0 GOFLAGS="-mod=mod ${GOFLAGS_EXTRA:-}"
    cd "$w"
    printf 'module nftpolicy.local/build-%s\n\ngo 1.26\n' "$name" > go.mod
    if [ -n "$main" ]; then printf '%s\n' "$main" > main.go; pkg=.; fi
    go get "$mod@$ver" >/dev/null 2>"$w/get.log" || { cat "$w/get.log" >&2; exit 1; }
    [ -z "$main" ] || go mod tidy >/dev/null 2>&1 || true
    t0=$(date +%s)
    go build -trimpath -tags "$tags" -ldflags "-s -w $ld" -o "$out/$name.tmp" "$pkg"
    mv "$out/$name.tmp" "$out/$name"
    echo "built $name ($mod $ver) in $(( $(date +%s) - t0 )) s"
  )
}
