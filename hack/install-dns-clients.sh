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

Q_VERSION=v0.19.2
Q_SUM="h1:otsfc8BkdBggt/pWsCNmJvIUFp/0am/fivZzPL2iUTQ="
if [ ! -x "$bin/q-$Q_VERSION" ]; then
  echo "hack/install-dns-clients: building q $Q_VERSION" >&2
  json="$(cd / && GOFLAGS=-mod=mod GOSUMDB=off go mod download -json "github.com/natesales/q@$Q_VERSION")"
  sum="$(printf '%s' "$json" | sed -n 's/.*"Sum": "\(.*\)".*/\1/p')"
  dir="$(printf '%s' "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  if [ "$sum" != "$Q_SUM" ]; then
    echo "hack/install-dns-clients: q $Q_VERSION has hash '$sum', want $Q_SUM" >&2
    exit 1
  fi
  (cd "$dir" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$bin/q-$Q_VERSION.tmp" .)
  mv "$bin/q-$Q_VERSION.tmp" "$bin/q-$Q_VERSION"
fi
ln -sf "q-$Q_VERSION" "$bin/q"

for t in kdig dig; do
  command -v "$t" >/dev/null || { echo "hack/install-dns-clients: $t missing" >&2; exit 1; }
done
