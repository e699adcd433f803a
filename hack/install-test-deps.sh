#!/usr/bin/env bash
# Installs the Debian packages the tests use: reference DNS servers (NSD, Knot) for
# answer comparisons, third-party DNS clients (dig, kdig) and dnsperf (DoH and DoT
# clients the transport tests drive), curl (its DoH resolver), the proxies
# deployments put in front of a DNS server with PROXY v2 (dnsdist, HAProxy), and
# the resolvers that forward to a DoT server (stubby, Unbound), and systemd for
# systemd-analyze (test/guide verifies the packaged unit), and named-compilezone
# (bind9-utils) and ldns-read-zone (ldnsutils), which put zone files in canonical
# form for the import/export round-trip tests, and keepalived (with iproute2 for
# ip netns) that test/vip supervises with svc vip run. Their packaged
# daemons are never started (hack/apt-install.sh). SKIP_APT=1 skips.
set -euo pipefail
exec "$(dirname "$0")/apt-install.sh" nsd knot knot-dnsutils bind9-dnsutils bind9-utils ldnsutils dnsperf dnsdist haproxy curl stubby unbound systemd keepalived iproute2
