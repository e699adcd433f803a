#!/usr/bin/env bash
# Builds external-dns (sigs.k8s.io/external-dns), the Kubernetes controller
# test/externaldns runs with --provider=webhook against the service's
# webhook provider, from the Go module proxy at a pinned version into
# ${SERVICE_TOOLS:-$HOME/.cache/service-tools}/bin (next to q, dnsproxy and
# CoreDNS from hack/install-dns-clients.sh).
#
# The module is downloaded with the checksum database off (the proxy here
# serves the version but not its checksum-database entry), its h1 hash is
# checked against the one pinned below, and it is built inside its module
# directory, where its own go.sum pins every dependency; nothing is added to
# the service's go.mod. Its main package links every in-tree provider and
# their cloud SDKs: the first build is long (measured: 84 min wall clock,
# 13.5 min CPU, on a 2-core machine shared at load 20 to 30) and takes about
# 1 GiB of module cache; later runs reuse the binary.
#
# vbom.ml/util: an old k8s.io/kubectl in external-dns's module graph
# requires it and its host no longer serves it. A build inside the module
# directory never loads that go.mod (module graph pruning), so no replace
# is needed; a build from another module would need
# `replace vbom.ml/util => <empty local module>`.
set -euo pipefail
bin="${SERVICE_TOOLS:-$HOME/.cache/service-tools}/bin"
mkdir -p "$bin"

EXTERNAL_DNS_VERSION=v0.21.0
EXTERNAL_DNS_SUM="h1:YAC7ERW32eZAjSdhu44taaZGII6nwz2/wteT+BtpFzM="

name=external-dns
if [ ! -x "$bin/$name-$EXTERNAL_DNS_VERSION" ]; then
	echo "hack/build-external-dns: building $name $EXTERNAL_DNS_VERSION (several minutes the first time)" >&2
	json="$(cd / && GOFLAGS=-mod=mod GOSUMDB=off go mod download -json "sigs.k8s.io/external-dns@$EXTERNAL_DNS_VERSION")"
	sum="$(printf '%s' "$json" | sed -n 's/.*"Sum": "\(.*\)".*/\1/p')"
	dir="$(printf '%s' "$json" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
	if [ "$sum" != "$EXTERNAL_DNS_SUM" ]; then
		echo "hack/build-external-dns: $name $EXTERNAL_DNS_VERSION has hash '$sum', want $EXTERNAL_DNS_SUM" >&2
		exit 1
	fi
	(cd "$dir" && GOFLAGS=-mod=mod GOSUMDB=off CGO_ENABLED=0 go build -trimpath -o "$bin/$name-$EXTERNAL_DNS_VERSION.tmp" .)
	mv "$bin/$name-$EXTERNAL_DNS_VERSION.tmp" "$bin/$name-$EXTERNAL_DNS_VERSION"
fi
ln -sf "$name-$EXTERNAL_DNS_VERSION" "$bin/$name"
