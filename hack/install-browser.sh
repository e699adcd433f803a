#!/usr/bin/env bash
# Installs what the dashboard's browser tests (test/dashboard) need:
#   - Chromium from Debian (hack/apt-install.sh; SKIP_APT=1 skips);
#   - axe-core and htm from the npm registry at the versions
#     web/package-lock.json pins (npm ci in web/, no install scripts run).
#     axe-core is injected into the pages by the tests; htm is the source of
#     the vendored web/static/vendor/preact-htm.js, which
#     internal/dashboard's test compares with it. SKIP_NPM=1 skips.
# Nothing here is needed to build or run svc: the dashboard is embedded.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
web="$here/../web"
pkgs=(chromium)
command -v npm >/dev/null || pkgs+=(npm)
"$here/apt-install.sh" "${pkgs[@]}"
[ "${SKIP_NPM:-0}" = 1 ] && exit 0
# npm ci only when the lockfile changed since the last install.
stamp="$web/node_modules/.installed-lock.sha256"
want="$(sha256sum "$web/package-lock.json" | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$web/node_modules/axe-core/axe.min.js" ]; then
  exit 0
fi
echo "hack/install-browser: npm ci in web/ (axe-core, htm)" >&2
(cd "$web" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
echo "$want" > "$stamp"
