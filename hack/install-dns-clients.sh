#!/usr/bin/env bash
# Installs third-party DNS clients for the transport tests.
#
# kdig (knot-dnsutils) and dig (bind9-dnsutils) come from Debian through
# hack/install-test-deps.sh; kdig 3.2 also speaks DoQ (+quic) and PROXY v2
# (+proxy), so test/transport needs nothing else for UDP, TCP, DoT, DoH and DoQ.
# DoH3 is tested with quic-go's own HTTP/3 client (a module dependency).
#
# This script additionally tries a Go DNS client (dnslookup) from the module
# proxy into ${SERVICE_TOOLS:-$HOME/.cache/service-tools}/bin for manual
# checks. The proxy used here refused it (403), so failure is not fatal.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/install-test-deps.sh"
bin="${SERVICE_TOOLS:-$HOME/.cache/service-tools}/bin"
mkdir -p "$bin"
DNSLOOKUP_VERSION="${DNSLOOKUP_VERSION:-v1.11.1}"
if [ ! -x "$bin/dnslookup" ]; then
  if ! GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/ameshkov/dnslookup@${DNSLOOKUP_VERSION}" 2>/dev/null; then
    echo "install-dns-clients: dnslookup@${DNSLOOKUP_VERSION} not available from the module proxy; DoQ/DoH3 tests use kdig +quic and quic-go" >&2
  fi
fi
for t in kdig dig; do
  command -v "$t" >/dev/null || { echo "install-dns-clients: $t missing" >&2; exit 1; }
done
