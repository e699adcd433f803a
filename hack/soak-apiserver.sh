#!/usr/bin/env bash
# hack/soak-apiserver.sh: restarts a real kube-apiserver (same etcd; every fifth
# time with etcd compacted) SOAK_RESTARTS times (default 20) under a data-plane
# node and two operator replicas, asking DNS every 100 ms throughout. Prints
# the queries sent and failed (goal: 0) and the slowest time from each restart
# to a new record served and to its status written.
set -euo pipefail
cd "$(dirname "$0")/.."
assets="$(hack/kube-testenv.sh)"
export KUBEBUILDER_ASSETS="$assets" SOAK_RESTARTS="${SOAK_RESTARTS:-20}"
go test -count=1 -timeout 60m -run 'TestSoakAPIServerRestarts$' -v ./test/kuberestart | grep -E 'SOAK:|^(--- |ok|FAIL|PASS)|_test\.go:[0-9]+:|did not stop|not true within' | grep -v 'nodetest.go:392'
