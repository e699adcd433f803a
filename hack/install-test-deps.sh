#!/usr/bin/env bash
# Installs the Debian packages the tests use: reference DNS servers (NSD, Knot) for
# answer comparisons and third-party DNS clients (dig, kdig) and dnsperf (DoH and DoT clients the transport tests drive). SKIP_APT=1 skips.
set -euo pipefail
exec "$(dirname "$0")/apt-install.sh" nsd knot knot-dnsutils bind9-dnsutils dnsperf
