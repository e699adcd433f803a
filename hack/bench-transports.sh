#!/usr/bin/env bash
# Transport and query-log throughput measured from outside with Debian's
# dnsperf 2.10 (as the issues ask): one node (bin/svc, SQLite store, the dev
# zones of hack/dev/objects.d) with UDP, TCP, DoT and DoH listeners on
# loopback and a self-signed certificate made here. Rounds interleave the
# modes; the table gives medians and ratios to Do53 UDP from the same run.
#   udp   dnsperf -m udp, 10 clients, 200 in flight
#   dot   dnsperf -m dot, 100 connections
#   doh   dnsperf -m doh (HTTP/2, GET: dnsperf's default), 100 connections
#   doh-post  the same with POST
#   udp+log / udp-nolog: the same UDP load against the node with the query
#   log on and off (querylog.enabled), the on/off ratio of issue #9.
# Two arrangements of the 2+ CPUs, both printed:
#   split   the node on CPU 0 and dnsperf on CPU 1 (taskset), as test/bench
#           does: dnsperf's own TLS work takes nothing from the node, so the
#           ratios compare what the node does per answer;
#   shared  neither pinned: node, query-log writer and dnsperf share every
#           CPU (the writer can use what dnsperf leaves).
# On one CPU only the shared arrangement runs.
# Env: ROUNDS (3), SECONDS_PER_RUN (5), SVC (bin/svc), TLS_Q (400: dnsperf
# -q for DoT and DoH, the queries in flight over the 100 connections; 100
# is one per connection, dnsperf's default).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v dnsperf >/dev/null || hack/install-bench-deps.sh
rounds="${ROUNDS:-3}"
secs="${SECONDS_PER_RUN:-5}"
tls_q="${TLS_Q:-400}"
svc="${SVC:-bin/svc}"
[ -x "$svc" ] || go build -o "$svc" ./cmd/svc
work="$(mktemp -d /tmp/svc-bench-transports.XXXXXX)"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

# Ports: a free block found by the kernel, so a `make run` node does not clash.
read -r p_dns p_dot p_doh p_api p_ops p_met p_int p_bp < <(python3 - <<'PY'
import socket
socks=[socket.socket() for _ in range(8)]
for s in socks: s.bind(("127.0.0.1",0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
)
cat > "$work/service.yaml" <<YAML
node:
  dataDir: $work/data
listeners:
  dns:
    - address: 127.0.0.1:$p_dns
      protocols: [udp, tcp]
  dot:
    - address: 127.0.0.1:$p_dot
      tls: {certFile: $work/cert.pem, keyFile: $work/key.pem}
  doh:
    - address: 127.0.0.1:$p_doh
      tls: {certFile: $work/cert.pem, keyFile: $work/key.pem}
  api:
    address: 127.0.0.1:$p_api
  ops:
    address: 127.0.0.1:$p_ops
  metrics:
    address: 127.0.0.1:$p_met
  internal:
    address: 127.0.0.1:$p_int
  blockPage:
    http: 127.0.0.1:$p_bp
settingsFile: $work/settings.yaml
objectsDir: hack/dev/objects.d
auth:
  adminSocket:
    path: $work/service.sock
upstreams:
  groups:
    default:
      servers: [127.0.0.1:9]
YAML
# The cached workload: names the dev zones answer (authoritative answers are
# served from the same prebuilt wire as cache hits).
printf '%s\n' 'nas.home.lan A' 'router.home.lan A' 'x.apps.home.lan A' 'home.lan MX' 'nas.home.lan AAAA' >"$work/queries.txt"

start() { # $1: querylog.enabled
  rm -rf "$work/data"
  SERVICE_QUERYLOG__ENABLED="$1" $nodepin "$svc" serve --config "$work/service.yaml" >"$work/node.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$p_ops/healthz/ready" >/dev/null && return 0
    sleep 0.1
  done
  echo "bench-transports: node did not become ready" >&2; cat "$work/node.log" >&2; exit 1
}
stop() { kill -INT "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
cputicks() { awk '{print $14+$15}' "/proc/$pid/stat"; } # the node's user+system time
perf() { # mode args...: prints "qps lost node-µs-per-answer node-%CPU dnsperf-%CPU"
  local c0 c1 t0 t1 cpu
  c0=$(cputicks)
  t0=$(date +%s.%N)
  # bash's time reports the user and system CPU dnsperf used: with the
  # node's, it tells which side limited the rate (about 100% of a CPU: that
  # side).
  cpu="$( { TIMEFORMAT='%U %S'; time $perfpin dnsperf -s 127.0.0.1 -d "$work/queries.txt" -l "$secs" "$@" >"$work/dnsperf.out" 2>&1; } 2>&1 )"
  t1=$(date +%s.%N)
  c1=$(cputicks)
  local out; out="$(cat "$work/dnsperf.out")"
  local lost; lost="$(printf '%s\n' "$out" | sed -n 's/.*Queries lost: *\([0-9]*\).*/\1/p')"
  local done; done="$(printf '%s\n' "$out" | sed -n 's/.*Queries completed: *\([0-9]*\).*/\1/p')"
  local wall; wall=$(echo "$t1 - $t0" | bc -l)
  printf '%s\n' "$out" | sed -n 's/.*Queries per second: *\([0-9.]*\).*/\1/p' | tr -d '\n'
  echo " $lost $(echo "($c1 - $c0) * 10000 / ${done:-1}" | bc) $(echo "($c1 - $c0) / $wall" | bc) $(echo "$cpu" | awk -v w="$wall" '{printf "%.0f", ($1+$2)*100/w}')"
}
declare -A res cpus
add() { res[$1]="${res[$1]:-} $2"; cpus[$1]="${cpus[$1]:-} $(echo "$3" | cut -d" " -f4,5 | tr ' ' '/')"; }
show() { echo "round $1 $(printf '%-16s' "$2") ${3%% *} qps (lost $(echo $3 | cut -d" " -f2), node CPU $(echo $3 | cut -d" " -f3) µs/answer, node $(echo $3 | cut -d" " -f4)% and dnsperf $(echo $3 | cut -d" " -f5)% of a CPU)"; }
arrangements="shared"
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then arrangements="split shared"; fi
for r in $(seq "$rounds"); do
  for a in $arrangements; do
    nodepin="" perfpin=""
    if [ "$a" = split ]; then nodepin="taskset -c 0" perfpin="taskset -c 1"; fi
    start false
    q=$(perf -p "$p_dns" -m udp -c 10 -q 200); add "udp/$a" "${q%% *}" "$q"; show "$r" "udp/$a" "$q"
    q=$(perf -p "$p_dot" -m dot -c 100 -q "$tls_q"); add "dot/$a" "${q%% *}" "$q"; show "$r" "dot/$a" "$q"
    q=$(perf -p "$p_doh" -m doh -c 100 -q "$tls_q" -O doh-method=GET -O "doh-uri=https://127.0.0.1:$p_doh/dns-query"); add "doh/$a" "${q%% *}" "$q"; show "$r" "doh/$a" "$q"
    q=$(perf -p "$p_doh" -m doh -c 100 -q "$tls_q" -O doh-method=POST -O "doh-uri=https://127.0.0.1:$p_doh/dns-query"); add "doh-post/$a" "${q%% *}" "$q"; show "$r" "doh-post/$a" "$q"
    q=$(perf -p "$p_dns" -m udp -c 10 -q 200); add "udp-nolog/$a" "${q%% *}" "$q"; show "$r" "udp-nolog/$a" "$q"
    stop
    start true
    q=$(perf -p "$p_dns" -m udp -c 10 -q 200); add "udp+log/$a" "${q%% *}" "$q"; show "$r" "udp+log/$a" "$q"
    echo "round $r query log: $(curl -s "http://127.0.0.1:$p_met/metrics" | grep -E '^service_querylog_(written|dropped)_rows_total' | tr '\n' ' ')"
    stop
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for a in $arrangements; do
  u=$(echo "${res[udp/$a]}" | median)
  nl=$(echo "${res[udp-nolog/$a]}" | median)
  echo
  echo "$a: mode   qps (median of $rounds)   ratio         CPU used, node/dnsperf (% of one CPU, each round)"
  for m in udp dot doh doh-post; do
    v=$(echo "${res[$m/$a]}" | median)
    printf '%-10s %12.0f   %.2f of udp   %s\n' "$m" "$v" "$(echo "$v / $u" | bc -l)" "${cpus[$m/$a]# }"
  done
  v=$(echo "${res[udp+log/$a]}" | median)
  printf '%-10s %12.0f   %.2f of udp-nolog (%0.f)\n' "udp+log" "$v" "$(echo "$v / $nl" | bc -l)" "$nl"
done
