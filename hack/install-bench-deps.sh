#!/usr/bin/env bash
# Installs what make bench needs beyond the test dependencies: Debian's
# dnsperf 2.10 (UDP, DoT and DoH load), bc and taskset (util-linux).
# Idempotent; needs root or passwordless sudo. SKIP_APT=1 skips.
set -euo pipefail
[ "${SKIP_APT:-0}" = 1 ] && exit 0
pkgs=(dnsperf bc util-linux openssl)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo -n"
echo "hack/install-bench-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
