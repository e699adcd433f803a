#!/usr/bin/env bash
# make bench: every performance target of the issues, as Go benchmarks with
# allocations, each reported beside a baseline measured in the same run.
# Long-running by design; not part of make test. BENCHTIME overrides -benchtime.
set -euo pipefail
cd "$(dirname "$0")/.."
bt="${BENCHTIME:-1s}"
out="${BENCH_OUT:-.run/bench-$(date +%Y%m%d-%H%M%S).txt}"
mkdir -p "$(dirname "$out")"
run() {
  local pkg="$1" pattern="$2" extra="${3:-}"
  echo "== $pkg $pattern" | tee -a "$out"
  # One server core where the benchmark allows it: GOMAXPROCS=1 pins the Go
  # scheduler to one thread for the code under test.
  GOMAXPROCS="${BENCH_PROCS:-1}" go test -run '^$' -bench "$pattern" -benchmem -benchtime "$bt" $extra "$pkg" | tee -a "$out"
}
# Data plane: authoritative and cache-hit answers (0 allocs/op), the slow path,
# and the real-socket comparison with a miekg/dns reference responder.
run ./dataplane 'ServeWire|UDPSocketVsMiekg'
# Real-socket throughput, each server in its own process on CPU 0
# (GOMAXPROCS=1), load on CPU 1: authoritative (10k-record zone), cache hit,
# cache miss to a loopback upstream, miekg/dns and a plain socket loop.
echo "== test/bench (UDP throughput)" | tee -a "$out"
go build -o .run/svcbench ./test/bench
.run/svcbench -duration "${BENCH_UDP_DURATION:-2s}" -rounds "${BENCH_UDP_ROUNDS:-5}" | tee -a "$out"
# The workload table of issue #27 item 5: authoritative, cache hit, 1M-name
# block list and cache miss for the service and, where installed, Knot,
# NSD, Unbound, dnsdist and CoreDNS in the same run (dnsperf, server on
# CPU 0, dnsperf on CPU 1), with each side's CPU share, answers per server
# core-second as ratios to the service's, SERVFAIL and lost counts, p99 of
# the cache misses and each server's RSS at rest. Three rounds, peers
# interleaved, each summarised by its median and range: a single run of
# this 2-core machine varies by 5-10%, as much as some of the gaps it
# measures (BENCH_PEERS_ROUNDS overrides).
echo "== hack/bench-peers.sh (workloads x peers)" | tee -a "$out"
go build -o .run/svc-peers ./cmd/svc
SVC=.run/svc-peers ROUNDS="${BENCH_PEERS_ROUNDS:-3}" hack/bench-peers.sh | tee -a "$out"
# Cache-miss flood (issue #20 item 1): 20 s of uncached names from one client
# at a silent upstream while a second client (another /24) asks 1 q/s at a
# responsive group; the server's peak RSS, its RSS after, kernel drops and
# the second client's answered share, beside the same harness built at
# FLOOD_BASE (the commit before the fix) in the same run.
echo "== test/flood (cache-miss flood)" | tee -a "$out"
go build -o .run/flood ./test/flood
flood_base="${FLOOD_BASE:-0dd663e1be46}"
flood_args=()
if git cat-file -e "$flood_base^{commit}" 2>/dev/null; then
  root="$(pwd)"
  d="$(mktemp -d)"
  git archive "$flood_base" | tar -x -C "$d"
  mkdir -p "$d/test/flood"
  cp test/flood/main.go "$d/test/flood/"
  if (cd "$d" && go build -o "$root/.run/flood-base" ./test/flood); then
    flood_args=(-baseline .run/flood-base)
  fi
  rm -rf "$d"
fi
.run/flood -duration "${FLOOD_DURATION:-20s}" "${flood_args[@]}" | tee -a "$out"
run ./dataplane/authority 'Lookup|Compile$'
run ./dataplane/authority 'CompileMillion' '-benchtime 1x'
# Block lists: compile 1M domains and 100k adblock rules, match, swap
# (SwapTenLists: Match p99 while ten 1M-domain lists are rebuilt and swapped,
# beside the p99 without swaps, and the live-heap peak of a rebuild in lists).
# MatchFiveLabels also measures the previous Match (legacy/) as its baseline.
run ./dataplane/blocklist 'Compile1MDomains|Compile100kAdblock|Swap' '-benchtime 1x'
run ./dataplane/blocklist 'MatchFiveLabels' '-benchtime 2000000x -count 3'
run ./dataplane/upstream 'ForwardUDP|Route'
run ./dataplane/ratelimit 'Check'
# DoH over HTTP/2 under an HPACK bomb (issue #20 item 3): one abusive
# connection (100 oversized header blocks, closed with GOAWAY) beside one
# ordinary answer, same run.
run ./dataplane/transport 'DoH2HPACKBomb'
# Store: apply and list 10,000 record sets.
run ./internal/store/sqlite 'Apply10k|ListPaged' '-benchtime 1x'
for p in ./internal/querylog ./dataplane/transport; do
  [ -d "$p" ] && run "$p" '.'
done
# Query log: DNS throughput through a real dataplane.Server, log on vs off.
run ./test/querylog 'DNSLogOnOff' '-benchtime 200000x'

# Transports in process: queries per second and server CPU per answer over
# DoT and DoH against UDP in the same run (the load generator is a child
# process; the server keeps every CPU, so no GOMAXPROCS=1 here), and
# SVC_BENCH_IDLE (10,000) idle DoT, DoQ and DoH (HTTP/2, HTTP/1.1)
# connections: bytes per connection, and a new client still answered.
echo "== test/transport (transport ratio, idle connections)" | tee -a "$out"
go test -run '^$' -bench 'TransportRatio|IdleConns' -benchtime 1x -timeout 30m ./test/transport | tee -a "$out"

# Transports and the query log from outside: dnsperf against a real node
# (UDP, DoT, DoH over HTTP/2; UDP with the query log on and off).
echo "== hack/bench-transports.sh (dnsperf)" | tee -a "$out"
SVC=bin/svc hack/bench-transports.sh | tee -a "$out"
# Zone transfers (issue #22): a full AXFR of the same 1,000,000-record zone
# from the service's transfer server and from Knot 3 as a primary, each in
# its own process, with one TSIG-verifying client: time per transfer, RSS
# after the load and peak RSS during the transfers of both, as ratios.
echo "== test/xfr (AXFR of ${XFR_BENCH_RECORDS:-1000000} records vs Knot)" | tee -a "$out"
XFR_BENCH_RECORDS="${XFR_BENCH_RECORDS:-1000000}" go test -run '^$' -bench 'AXFRVersusKnot' -benchmem -benchtime "${XFR_BENCH_TIME:-2x}" -timeout 60m ./test/xfr | tee -a "$out"
# Dashboard (issue #19): first paint of the overview and the query log in
# Chromium on a 10-million-row query log (filled through the query log's
# writer, cached in ~/.cache/service-dashboard-bench for 6 hours), the
# server's time per call and the first load's gzipped size.
echo "== test/dashboard (first paint, 10M rows)" | tee -a "$out"
go test -run '^$' -bench 'FirstPaint10M' -benchtime 1x -timeout 30m ./test/dashboard | grep -v 'level=' | tee -a "$out"
# Edge (issue #25): one node asked the same cached name directly and through
# svc edge run (dnsdist, resolver pool, nothing cached at the edge) in the
# same run, 8 concurrent UDP clients each way for BENCH_EDGE_DURATION:
# queries per second both ways and the latency the edge adds (p50, p99).
echo "== test/edge (edge vs direct)" | tee -a "$out"
BENCH_EDGE_DURATION="${BENCH_EDGE_DURATION:-5s}" go test -run '^$' -bench 'EdgeVsDirect' -benchtime 1x -timeout 10m ./test/edge | grep -v 'level=' | tee -a "$out"
echo "results: $out"
