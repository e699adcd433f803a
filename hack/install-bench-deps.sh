#!/usr/bin/env bash
# Installs what make bench needs beyond the test dependencies: Debian's
# dnsperf 2.10 (UDP, DoT and DoH load), bc, openssl and taskset (util-linux).
set -euo pipefail
exec "$(dirname "$0")/apt-install.sh" dnsperf bc openssl util-linux
