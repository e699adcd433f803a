#!/usr/bin/env bash
# Installs the third-party DNS clients the transport tests drive.
#
# kdig (knot-dnsutils) and dig (bind9-dnsutils) come from Debian through
# hack/install-test-deps.sh: UDP, TCP, DoT, DoH (HTTP/2 through nghttp2), DoQ
# (kdig +quic) and PROXY v2 (kdig +proxy).
#
# q (github.com/natesales/q), a Go DNS client nobody here wrote, speaks DoQ
# and DoH over HTTP/3 through its own quic-go; it is built from the module
# proxy at a pinned version into ${SERVICE_TOOLS:-$HOME/.cache/service-tools}/bin.
# The proxy here serves the version but not its listing or a checksum-database
# entry, so `go install q@version` refuses it; instead the module is downloaded
# with the checksum database off, its h1 hash is checked against the one pinned
# below, and it is built inside its module directory, where its own go.sum
# pins every dependency.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/install-test-deps.sh"
bin="${SERVICE_TOOLS:-$HOME/.cache/service-tools}/bin"
mkdir -p "$bin"

# build_pinned module version h1-sum name [package]: downloads module@version
# with the checksum database off, checks its h1 hash, builds package (default
# the module root) inside its module directory (its own go.sum pins the
# dependencies) as $bin/name-version.
build_pinned() {
  local mod=$1 version=$2 want=$3 name=$4 pkg=${5:-.}
  if [ ! -x "$bin/$name-$version" ]; then
    echo "hack/install-dns-clients: building $name $version" >&2
    local json sum dir
    json="$(cd / && GOFLAGS=-mod=mod GOSUMDB=off go mod download -json "$mod@$version")"
    sum="$(printf '%s' "$json" | sed -n 's/.*"Sum": "\(.*\)".*/\1/p')"
    dir="$(printf '%s' "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
    if [ "$sum" != "$want" ]; then
      echo "hack/install-dns-clients: $name $version has hash '$sum', want $want" >&2
      exit 1
    fi
    (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$bin/$name-$version.tmp" "$pkg")
    mv "$bin/$name-$version.tmp" "$bin/$name-$version"
  fi
  ln -sf "$name-$version" "$bin/$name"
}

Q_VERSION=v0.19.2
Q_SUM="h1:otsfc8BkdBggt/pWsCNmJvIUFp/0am/fivZzPL2iUTQ="
build_pinned "github.com/natesales/q" "$Q_VERSION" "$Q_SUM" q

# dnsproxy (github.com/AdguardTeam/dnsproxy): AdGuard's DNS proxy, whose
# upstream clients are the ones AdGuard Home forwards through. The tests run
# it with this server as its upstream over every transport. Same download and
# check as q.
DNSPROXY_VERSION=v0.78.0
DNSPROXY_SUM="h1:HkshrCPbnciJzl8LLkOmaO6J+aWNSbatggCx2xBf4B8="
build_pinned "github.com/AdguardTeam/dnsproxy" "$DNSPROXY_VERSION" "$DNSPROXY_SUM" dnsproxy

# dnspyre (github.com/tantalor93/dnspyre), a DNS benchmark over UDP, TCP,
# DoT, DoH (HTTP/1.1, which is its default, HTTP/2 and HTTP/3) and DoQ: the
# tests run it as a client on every transport. Same download and check.
DNSPYRE_VERSION=v3.6.0
DNSPYRE_SUM="h1:Rrxr9FOqtL2qVDXWL8hjNCK+TxTDeKfvbKnN8zuAGEU="
build_pinned "github.com/tantalor93/dnspyre/v3" "$DNSPYRE_VERSION" "$DNSPYRE_SUM" dnspyre

# CoreDNS (github.com/coredns/coredns), the cluster DNS of Kubernetes:
# test/clusterdns runs it with "rewrite edns0 subnet set 32 128" and
# "forward" to a node, as a cluster forwards a stub domain, to check that
# per-client policies see the pods behind it (listeners.ecsClientFrom). Its
# module root is the coredns main package with every in-tree plugin (and
# their cloud SDKs): the first build takes several minutes and about 1 GiB of
# module cache, later runs reuse the binary. Same download and check.
COREDNS_VERSION=v1.14.7
COREDNS_SUM="h1:UPDkn4QN+xyNfjz3U5ldgoLszDYpMZEJoy3+ze9au4Q="
build_pinned "github.com/coredns/coredns" "$COREDNS_VERSION" "$COREDNS_SUM" coredns

# h2spec (github.com/summerwind/h2spec), the HTTP/2 conformance suite (146
# cases of RFC 7540 and RFC 7541): dataplane/transport TestH2Spec runs it
# against the lean HTTP/2 DoH server and the net/http one. Same download and
# check; the main package is cmd/h2spec.
H2SPEC_VERSION=v0.0.0-20200804131034-70ac22940108
H2SPEC_SUM="h1:ecwW3RnjsJlnVZkvXHaxa+Hg0EW+6KF8mFovyFk+WZA="
build_pinned "github.com/summerwind/h2spec" "$H2SPEC_VERSION" "$H2SPEC_SUM" h2spec ./cmd/h2spec

for t in kdig dig; do
  command -v "$t" >/dev/null || { echo "hack/install-dns-clients: $t missing" >&2; exit 1; }
done
