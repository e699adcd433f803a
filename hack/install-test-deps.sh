#!/usr/bin/env bash
# Installs the Debian packages the tests use: reference DNS servers (NSD, Knot) for
# answer comparisons and third-party DNS clients (dig, kdig). Idempotent; needs root
# (as on CI and the dev machines) or passwordless sudo. Set SKIP_APT=1 to skip.
set -euo pipefail
[ "${SKIP_APT:-0}" = 1 ] && exit 0
pkgs=(nsd knot knot-dnsutils bind9-dnsutils)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo -n"
echo "hack/install-test-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
# Packaged daemons must not start on install (they would take port 53).
printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
$sudo chmod +x /usr/sbin/policy-rc.d
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
$sudo rm -f /usr/sbin/policy-rc.d
