#!/usr/bin/env bash
# hack/kube-testenv.sh: builds a real kube-apiserver, etcd, kubectl and helm from the Go module
# proxy for controller-runtime envtest (setup-envtest downloads prebuilt binaries, which these
# machines cannot reach). Prints the directory for KUBEBUILDER_ASSETS as its last stdout line.
# First run on 2 cores with empty caches: 7-12 min; later runs: under a second.
# Environment:
#   KUBE_TESTENV_DIR    where the binaries go (default: $HOME/.cache/kube-testenv/<k8s version>)
#   KUBE_TESTENV_HELM   set to 0 to skip helm
# Needs: Go >= 1.26 on PATH and the Go module proxy (whatever GOPROXY points at).
set -euo pipefail

K8S_VERSION=1.37.1   # k8s.io/kubernetes: kube-apiserver, kubectl (staging modules at v0.37.1)
ETCD_VERSION=3.7.3   # go.etcd.io/etcd/server/v3 (Kubernetes 1.37 is released against etcd 3.7)
HELM_VERSION=3.22.0  # helm.sh/helm/v3

DIR="${KUBE_TESTENV_DIR:-$HOME/.cache/service-kube-testenv/$K8S_VERSION}"

log() { echo "hack/kube-testenv: $*" >&2; }
# have BIN WANT ARGS...: $DIR/BIN exists and `BIN ARGS...` prints WANT.
# (grep reads all output: `grep -q` could SIGPIPE the binary and fail the check under pipefail.)
have() { local bin="$DIR/$1" want="$2"; shift 2; [ -x "$bin" ] && "$bin" "$@" 2>/dev/null | grep -F -- "$want" >/dev/null; }
# quiet CMD...: run CMD, show its output only if it fails.
quiet() { "$@" >"$WORK/log" 2>&1 || { cat "$WORK/log" >&2; return 1; }; }

command -v go >/dev/null || { log "Go (>= 1.26) is not on PATH"; exit 1; }
mkdir -p "$DIR" && DIR="$(cd "$DIR" && pwd)"
exec 9>"$DIR/.lock"
flock 9                      # concurrent callers wait for one build
rm -rf "$DIR"/.build.*       # leftovers of an interrupted run

# Build in a scratch dir next to $DIR (so the final mv is atomic), isolated from the
# caller's module, workspace and GOFLAGS; CGO off gives static binaries.
WORK="$(mktemp -d "$DIR/.build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
mkdir "$WORK/bin"
export GOWORK=off GOFLAGS= CGO_ENABLED=0

if ! have kube-apiserver "v$K8S_VERSION" --version || ! have kubectl "v$K8S_VERSION" version --client; then
  log "building kube-apiserver and kubectl v$K8S_VERSION (5-10 min on 2 cores with empty Go caches)"
  mkdir "$WORK/k8s" && cd "$WORK/k8s"
  # k8s.io/kubernetes points its staging modules (k8s.io/api, k8s.io/apiserver, ...) at ./staging/...
  # Replace directives of a dependency are ignored, so repeat each one here, mapped to its
  # published release (v1.X.Y -> v0.X.Y).
  quiet go mod download -json "k8s.io/kubernetes@v$K8S_VERSION"
  gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "$WORK/log")"
  {
    printf 'module kube-testenv/k8s\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    sed -n "s#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 v0.${K8S_VERSION#1.}#p" "$gomod"
    echo ')'
  } >go.mod
  quiet go get "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@v$K8S_VERSION"
  major="${K8S_VERSION%%.*}"; minor="${K8S_VERSION#*.}"; minor="${minor%%.*}"
  v=k8s.io/component-base/version   # what --version and the /version endpoint report
  ldflags="-s -w -X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=$major -X $v.gitMinor=$minor -X $v.gitTreeState=clean"
  for cmd in kube-apiserver kubectl; do
    go build -trimpath -ldflags "$ldflags" -o "$WORK/bin/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  done
fi

if ! have etcd "etcd Version: $ETCD_VERSION" --version; then
  log "building etcd v$ETCD_VERSION (about 1 min)"
  mkdir "$WORK/etcd" && cd "$WORK/etcd"
  # etcd's server module has local replace directives, which `go install module@version`
  # refuses; its main package (the module root) builds fine as a dependency.
  printf 'module kube-testenv/etcd\n\ngo 1.26.0\n' >go.mod
  quiet go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$WORK/bin/etcd" go.etcd.io/etcd/server/v3
fi

if [ "${KUBE_TESTENV_HELM:-1}" != 0 ] && ! have helm "v$HELM_VERSION" version --short; then
  log "building helm v$HELM_VERSION (about 1 min)"
  GOBIN="$WORK/bin" quiet go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
fi

cd "$DIR"
for f in "$WORK"/bin/*; do [ -e "$f" ] && mv -f "$f" "$DIR/"; done
log "ready: $(ls "$DIR" | tr '\n' ' ')"
echo "$DIR"
