#!/usr/bin/env bash
# hack/gen-internal-schemas.sh: writes the CRD manifests of the installable kinds
# (api/v1alpha1) into config/crd/bases and the CRD-shaped schemas of the internal
# kinds (api/v1alpha1/iam: never installed) into config/crd/internal, which
# internal/validation embeds for in-process validation.
# Usage: hack/gen-internal-schemas.sh [output root, default: config/crd]
# (internal/validation's drift test runs it into a temp dir.)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-config/crd}"
GO="${GO:-go}"
CONTROLLER_GEN=(env GOFLAGS= "$GO" run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0)
mkdir -p "$OUT/bases" "$OUT/internal"
"${CONTROLLER_GEN[@]}" crd paths=./api/v1alpha1 output:crd:artifacts:config="$OUT/bases"
"${CONTROLLER_GEN[@]}" crd paths=./api/v1alpha1/iam output:crd:artifacts:config="$OUT/internal"
