#!/usr/bin/env bash
# Installs the named Debian packages that are missing. Idempotent; needs root
# (as on CI and the dev machines) or passwordless sudo. SKIP_APT=1 skips.
# Packaged daemons are kept from starting on install (NSD and Knot would take
# port 53).
set -euo pipefail
[ "${SKIP_APT:-0}" = 1 ] && exit 0
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo -n"
echo "hack/apt-install: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
$sudo chmod +x /usr/sbin/policy-rc.d
trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
