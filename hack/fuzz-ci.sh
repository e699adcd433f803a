#!/usr/bin/env bash
# Runs the differential and robustness fuzz targets for a fixed time each
# (make test calls it after the unit tests). A failure leaves the input in the
# package's testdata/fuzz/<Target>/ so `go test -run <Target>/<id>` replays it.
# FUZZTIME overrides the per-target time (default 20s).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
t=${FUZZTIME:-20s}
targets=(
	"./dataplane FuzzFastSlowParity"
	"./dataplane FuzzServeWire"
	"./dataplane/transport FuzzDoHParity"
	"./internal/blockpage FuzzBlockPageForm"
	"./internal/api FuzzApplyBody"
	"./dataplane/xfr FuzzXFRRequest"
	"./dataplane/xfr FuzzJournal"
	"./internal/externaldns FuzzDecodeChanges"
	"./internal/publish FuzzPlan"
	"./dataplane/cache FuzzRawSections"
)
for e in "${targets[@]}"; do
	read -r pkg name <<<"$e"
	echo "fuzz $pkg $name for $t"
	"$GO" test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$t" -parallel 2
done
