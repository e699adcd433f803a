#!/usr/bin/env bash
# make bench, issue #27 item 5: one table of the four workloads for the
# service and, where installed, Knot, NSD, Unbound, dnsdist and CoreDNS, in
# the same run, all driven by Debian's dnsperf 2.10:
#   auth   10,000 A records of one zone, asked in turn (authoritative)
#   cache  CACHE_NAMES (10,000, as many as the block and auth workloads ask)
#          names forwarded once (warm-up) and then answered from cache
#   block  names of a 1,000,000-name block list (NXDOMAIN or 0.0.0.0)
#   cachebl the cache workload on a service node that also has the block
#          workload's list (the service and svc-nolog only): a node that
#          blocks answers cached names after a lookup in its lists, so
#          block/cachebl compares a blocked answer with a cached one on the
#          same node (item 2), block/cache with a node that blocks nothing
#   miss   a unique name per query, forwarded to a loopback upstream (CoreDNS
#          answering every name from a template): the cache-miss path of
#          item 3; here dnsperf -v records every answer's latency for p99
# The server under test is pinned to CPU 0, dnsperf and the upstream to
# CPU 1 (taskset), so the server's CPU share and dnsperf's tell which side
# limited the rate (~100%: that side). A peer that is not installed is
# skipped. Per row: answers per second, the server's and dnsperf's CPU
# share, answers per server core-second, its ratio to the service's on the
# same workload, queries lost (dnsperf timeout 5 s) and SERVFAIL answers,
# and (miss) p99 latency; with the server's RSS at rest before the load
# and at its end. Each row but miss is then driven a second time, as long,
# by test/bench's batched closed-loop generator (-drive: sendmmsg/recvmmsg,
# 4 sockets x 16 queries in flight, the same query file, on CPU 1), which
# saturates a server where dnsperf may not: its server CPU share, answers
# per server core-second and ratio to the service's are the last three
# columns (bSrvCPU, b/core-s, b/svc; BATCHED=0 leaves them out).
# A second table (issue #27 item 4) is memory at rest: each forwarding
# server started with the cache workload's config, asked one query, left
# alone IDLE_SECONDS, then its RSS split into anonymous and file-backed
# pages (/proc/PID/status), the service's Go heap in use, and the ratio of
# RSS to CoreDNS's.
# Env: SECONDS_PER_RUN (5), SVC (bin/svc), PEERS (svc svc-nolog knot nsd
# unbound dnsdist coredns), WORKLOADS (auth cache block cachebl miss), BLOCK_NAMES (1000000), CACHE_NAMES (10000),
# IDLE_SECONDS (20; 0 leaves the memory table out), ROUNDS (1: every
# workload's rows are run this many times, round after round, and each
# server then gets a summary line per workload: the median answers per
# core-second and the median and range of its per-round ratio to the
# service; this machine's noise between single runs is 5-10%).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
command -v dnsperf >/dev/null || hack/install-bench-deps.sh
secs="${SECONDS_PER_RUN:-5}"
svc="${SVC:-bin/svc}"
[ -x "$svc" ] || go build -o "$svc" ./cmd/svc
svc="$(cd "$(dirname "$svc")" && pwd)/$(basename "$svc")"
peers="${PEERS:-svc svc-nolog knot nsd unbound dnsdist coredns}"
workloads="${WORKLOADS:-auth cache block cachebl miss}"
idle_secs="${IDLE_SECONDS:-20}"
rounds="${ROUNDS:-1}"
nblock="${BLOCK_NAMES:-1000000}"
ncache="${CACHE_NAMES:-10000}"
batched="${BATCHED:-1}"
svcbench=""
if [ "$batched" != 0 ]; then
  svcbench="$(mktemp /tmp/svcbench.XXXXXX)"
  go build -o "$svcbench" ./test/bench
fi
tools="$HOME/.cache/service-tools/bin"
coredns="$(command -v coredns || echo "$tools/coredns")"
work="$(mktemp -d /tmp/svc-bench-peers.XXXXXX)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
  [ -z "$svcbench" ] || rm -f "$svcbench"
}
trap cleanup EXIT
pin0="" pin1=""
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then pin0="taskset -c 0" pin1="taskset -c 1"; fi

# Ports free for both TCP and UDP (a server binds either on some of them).
read -r p_up p_srv p_api p_ops p_met p_int p_bp p_http < <(python3 - <<'PY'
import socket
held, ports = [], []
while len(ports) < 8:
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.bind(("127.0.0.1", 0))
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        u.bind(("127.0.0.1", t.getsockname()[1]))
    except OSError:
        t.close(); continue
    held += [t, u]; ports.append(t.getsockname()[1])
print(" ".join(map(str, ports)))
PY
)

# ---------------------------------------------------------------- data
python3 - "$work" "$nblock" "$ncache" <<'PY'
import random, sys
w, nblock, ncache = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(27)
with open(f"{w}/bench.zone", "w") as z, open(f"{w}/q-auth.txt", "w") as q, open(f"{w}/unbound-auth.conf", "w") as u:
    z.write("$ORIGIN bench.\n$TTL 300\n@ SOA ns1.bench. hostmaster.bench. 1 3600 600 86400 300\n@ NS ns1.bench.\nns1 A 192.0.2.53\n")
    u.write('local-zone: "bench." static\n')
    for i in range(10000):
        z.write(f"h{i} A 192.0.2.{i%250+1}\n")
        u.write(f'local-data: "h{i}.bench. 300 IN A 192.0.2.{i%250+1}"\n')
    for i in random.sample(range(10000), 10000):
        q.write(f"h{i}.bench. A\n")
with open(f"{w}/objects.yaml", "w") as o:
    o.write("apiVersion: service.io/v1alpha1\nkind: DNSZone\nmetadata:\n  name: bench\nspec:\n  defaultTTL: 300\n  nameServers: [ns1.bench.]\n")
    # A DNSRecordSet holds at most 1,000 endpoints: ten of them, and ns1.
    o.write("---\napiVersion: service.io/v1alpha1\nkind: DNSRecordSet\nmetadata:\n  name: bench-ns\n  namespace: default\nspec:\n  zoneRef: {name: bench}\n  endpoints:\n    - {dnsName: ns1.bench, recordType: A, targets: [192.0.2.53]}\n")
    for k in range(10):
        o.write(f"---\napiVersion: service.io/v1alpha1\nkind: DNSRecordSet\nmetadata:\n  name: bench-hosts-{k}\n  namespace: default\nspec:\n  zoneRef: {{name: bench}}\n  endpoints:\n")
        for i in range(k*1000, (k+1)*1000):
            o.write(f"    - {{dnsName: h{i}.bench, recordType: A, targets: [192.0.2.{i%250+1}]}}\n")
with open(f"{w}/q-cache.txt", "w") as q:
    for i in range(ncache):
        q.write(f"c{i}.cache.up. A\n")
with open(f"{w}/q-cache.txt") as a, open(f"{w}/q-cachebl.txt", "w") as b:
    b.write(a.read())
with open(f"{w}/blocklist.txt", "w") as b, open(f"{w}/hosts", "w") as h, open(f"{w}/unbound-block.conf", "w") as u:
    for i in range(nblock):
        b.write(f"b{i}.ads{i%997}.blk\n")
        h.write(f"0.0.0.0 b{i}.ads{i%997}.blk\n")
        u.write(f'local-zone: "b{i}.ads{i%997}.blk." always_nxdomain\n')
with open(f"{w}/q-block.txt", "w") as q:
    for i in random.sample(range(nblock), min(nblock, 10000)):
        q.write(f"b{i}.ads{i%997}.blk. A\n")
with open(f"{w}/q-miss.txt", "w") as q:
    for i in range(3000000):
        q.write(f"m{i}-{random.randrange(1<<30)}.miss.up. A\n")
PY

# The upstream of cache and miss: CoreDNS answering every name under up.
cat >"$work/Corefile.up" <<EOF
up.:$p_up {
    bind 127.0.0.1
    template IN A {
        answer "{{ .Name }} 60 IN A 192.0.2.1"
    }
}
EOF
if [[ " $workloads " == *" cache"* || " $workloads " == *" miss "* || "$idle_secs" != 0 ]]; then
  [ -x "$coredns" ] || { echo "bench-peers: the cache and miss upstream needs CoreDNS ($coredns; hack/install-dns-clients.sh)" >&2; exit 1; }
  $pin1 "$coredns" -conf "$work/Corefile.up" >"$work/up.log" 2>&1 &
  pids+=($!)
fi
# The block list of the service, served over HTTP as a list source is.
(cd "$work" && exec python3 -m http.server "$p_http" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)

# ---------------------------------------------------------------- servers
# start_<peer> <workload>: start the peer for the workload in the
# background, set pid; return 1 when it cannot serve the workload.
start_svc() {
  mkdir -p "$work/svc-objects"
  rm -rf "$work/svc-data" "$work/svc-objects"/*
  case "$1" in
    auth) cp "$work/objects.yaml" "$work/svc-objects/" ;;
    block | cachebl) cat >"$work/svc-objects/block.yaml" <<EOF
apiVersion: service.io/v1alpha1
kind: BlockList
metadata:
  name: bench
  namespace: default
spec:
  response: nxdomain
  sources:
  - name: million
    url: http://127.0.0.1:$p_http/blocklist.txt
    format: domains
EOF
      ;;
  esac
  # The config and settings files get a directory of their own: the node
  # watches the directory of each, and dnsperf -v writes $work/out.
  mkdir -p "$work/svc-etc"
  cat >"$work/svc-etc/service.yaml" <<EOF
node:
  dataDir: $work/svc-data
listeners:
  dns:
    - address: 127.0.0.1:$p_srv
      protocols: [udp]
  api: {address: "127.0.0.1:$p_api"}
  ops: {address: "127.0.0.1:$p_ops"}
  metrics: {address: "127.0.0.1:$p_met"}
  internal: {address: "127.0.0.1:$p_int"}
  blockPage: {http: "127.0.0.1:$p_bp"}
settingsFile: $work/svc-etc/settings.yaml
objectsDir: $work/svc-objects
auth:
  adminSocket: {path: $work/service.sock}
upstreams:
  groups:
    default:
      servers: [127.0.0.1:$p_up]
EOF
  # The block list is served from loopback, which list URLs may not name
  # unless allowed.
  SERVICE_BLOCKING__ALLOWLOCALLISTURLS=true SERVICE_QUERYLOG__ENABLED="${svc_querylog:-true}" \
    $pin0 "$svc" serve --config "$work/svc-etc/service.yaml" >"$work/${svc_name:-svc}.log" 2>&1 &
  pid=$!
}
# svc-nolog: the service with querylog.enabled=false. The service's
# default logs every answer to its indexed, searchable query log on the
# same core (measured at ~20% of the server's CPU on auth); Knot, NSD,
# Unbound and dnsdist log no queries by default. This row is the
# like-for-like engine comparison.
start_svc-nolog() { svc_querylog=false svc_name=svc-nolog start_svc "$@"; }
start_knot() {
  command -v knotd >/dev/null && [ "$1" = auth ] || return 1
  mkdir -p "$work/knot"; rm -rf "$work/knot"/*
  cat >"$work/knot.conf" <<EOF
server:
    listen: 127.0.0.1@$p_srv
    rundir: $work/knot
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
database:
    storage: $work/knot
template:
  - id: default
    storage: $work
    semantic-checks: off
zone:
  - domain: bench.
    file: bench.zone
log:
  - target: stderr
    any: warning
EOF
  $pin0 knotd -c "$work/knot.conf" >"$work/knot.log" 2>&1 &
  pid=$!
}
start_nsd() {
  command -v nsd >/dev/null && [ "$1" = auth ] || return 1
  mkdir -p "$work/nsd"; rm -rf "$work/nsd"/*
  cp "$work/bench.zone" "$work/nsd/"
  cat >"$work/nsd.conf" <<EOF
server:
	ip-address: 127.0.0.1@$p_srv
	port: $p_srv
	do-ip6: no
	username: ""
	chroot: ""
	zonesdir: "$work/nsd"
	pidfile: "$work/nsd/nsd.pid"
	database: ""
	xfrdfile: "$work/nsd/xfrd.state"
	zonelistfile: "$work/nsd/zone.list"
	xfrdir: "$work/nsd"
	server-count: 1
	minimal-responses: yes
	verbosity: 0
remote-control:
	control-enable: no
zone:
	name: bench.
	zonefile: bench.zone
EOF
  $pin0 nsd -d -c "$work/nsd.conf" >"$work/nsd.log" 2>&1 &
  pid=$!
}
start_unbound() {
  command -v unbound >/dev/null || return 1
  local extra=""
  case "$1" in
    auth) extra="include: $work/unbound-auth.conf" ;;
    block) extra="include: $work/unbound-block.conf" ;;
  esac
  cat >"$work/unbound.conf" <<EOF
server:
	interface: 127.0.0.1@$p_srv
	port: $p_srv
	num-threads: 1
	do-daemonize: no
	username: ""
	chroot: ""
	directory: "$work"
	pidfile: "$work/unbound.pid"
	use-syslog: no
	logfile: ""
	verbosity: 0
	do-ip6: no
	access-control: 127.0.0.0/8 allow
	do-not-query-localhost: no
	module-config: "iterator"
	$extra
remote-control:
	control-enable: no
forward-zone:
	name: "."
	forward-addr: 127.0.0.1@$p_up
EOF
  $pin0 unbound -d -c "$work/unbound.conf" >"$work/unbound.log" 2>&1 &
  pid=$!
}
start_dnsdist() {
  command -v dnsdist >/dev/null && [ "$1" != auth ] || return 1
  local block=""
  if [ "$1" = block ]; then
    block="smn = newSuffixMatchNode()
for l in io.lines('$work/blocklist.txt') do smn:add(newDNSName(l)) end
addAction(SuffixMatchNodeRule(smn), RCodeAction(DNSRCode.NXDOMAIN))"
  fi
  cat >"$work/dnsdist.conf" <<EOF
setLocal('127.0.0.1:$p_srv')
setSecurityPollSuffix('')
newServer({address='127.0.0.1:$p_up', healthCheckMode='lazy'})
pc = newPacketCache(100000)
getPool(''):setCache(pc)
$block
EOF
  $pin0 dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
  pid=$!
}
start_coredns() {
  [ -x "$coredns" ] || return 1
  case "$1" in
    auth) printf 'bench.:%s {\n  bind 127.0.0.1\n  file %s/bench.zone\n}\n' "$p_srv" "$work" >"$work/Corefile" ;;
    block) printf '.:%s {\n  bind 127.0.0.1\n  hosts %s/hosts {\n    no_reverse\n    fallthrough\n  }\n  forward . 127.0.0.1:%s\n}\n' "$p_srv" "$work" "$p_up" >"$work/Corefile" ;;
    *) printf '.:%s {\n  bind 127.0.0.1\n  forward . 127.0.0.1:%s\n  cache\n}\n' "$p_srv" "$p_up" >"$work/Corefile" ;;
  esac
  $pin0 "$coredns" -conf "$work/Corefile" >"$work/coredns.log" 2>&1 &
  pid=$!
}

# ready <workload>: wait (bounded) until the server answers the workload's
# first query as it should.
ready() {
  local q want
  case "$1" in
    auth) q="h1.bench."; want="status: NOERROR" ;;
    # cachebl: the list is loaded (the cache is warmed after).
    block | cachebl) q="$(head -1 "$work/q-block.txt" | cut -d' ' -f1)"; want="status: NXDOMAIN|0\.0\.0\.0" ;;
    *) q="ready.cache.up."; want="status: NOERROR" ;;
  esac
  for _ in $(seq 600); do
    if dig +time=1 +tries=1 -p "$p_srv" @127.0.0.1 "$q" A 2>/dev/null | grep -Eq "$want"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.2
  done
  return 1
}
# tree: the server's pid and its descendants; for NSD also those of the
# main process its pidfile names (a reload forks a new main, whose children
# serve).
tree() {
  local p=$1 c
  echo "$p"
  for c in $(pgrep -P "$p" || true); do tree "$c"; done
  if [ "$p" = "$pid" ] && [ "$s" = nsd ] && [ -s "$work/nsd/nsd.pid" ]; then
    c=$(cat "$work/nsd/nsd.pid")
    [ "$c" != "$pid" ] && kill -0 "$c" 2>/dev/null && tree "$c"
  fi
  return 0
}
# quiet: wait (at most 30 s) until the server's CPU use falls under 5% of
# a CPU over half a second, so that start-up work (applying and compiling
# objects, list downloads) is not measured as serving.
quiet() {
  local a b
  for _ in $(seq 60); do
    a=$(ticks); sleep 0.5; b=$(ticks)
    [ $((b - a)) -le $((hz / 40)) ] && return 0
  done
}
# ticks: user+system clock ticks of the server and its descendants.
ticks() {
  local t=0 p v
  for p in $(tree "$pid" | sort -u); do
    # utime+stime, counted after the ")" that ends the name: NSD's names
    # ("nsd: server 1") hold spaces.
    v=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12+$13}')
    t=$((t + ${v:-0}))
  done
  echo "$t"
}
rss() { # RSS (or the /proc/PID/status field $1) of the server and its descendants, MiB
  local k=0 p v key="${1:-VmRSS}"
  for p in $(tree "$pid" | sort -u); do
    v=$(awk -v k="$key:" '$1 == k {print $2}' "/proc/$p/status" 2>/dev/null)
    k=$((k + ${v:-0}))
  done
  echo $((k / 1024))
}
hz=$(getconf CLK_TCK)

printf '%-8s %-9s %9s %7s %8s %11s %7s %7s %8s %8s %7s %7s %7s %8s %7s %9s %6s\n' workload server answers/s srvCPU dnsperf ans/core-s /svc lost SERVFAIL p99ms rssMiB loadMiB logDrop opsP99ms bSrvCPU b/core-s b/svc | tee "$work/table"
declare -A base pers ratios bbase bpers bratios
# median of the numbers given; "-" for none.
median() {
  printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (!NR) {print "-"; exit} if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
# Rounds outermost: each round runs every workload, so a drift of the
# machine's speed over the run (minutes) falls on all workloads alike, as
# block/cache below needs.
for round in $(seq "$rounds"); do
  for w in $workloads; do
  for s in $peers; do
    pid=""
    if [ "$w" = cachebl ] && [ "$s" != svc ] && [ "$s" != svc-nolog ]; then continue; fi
    if ! "start_$s" "$w"; then continue; fi
    pids+=("$pid")
    if ! ready "$w"; then
      echo "bench-peers: $s did not become ready for $w; its log:" >&2
      tail -5 "$work/$s.log" >&2 || true
      kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
      continue
    fi
    quiet
    idle=$(rss)
    args=(-s 127.0.0.1 -p "$p_srv" -d "$work/q-$w.txt" -c 10 -q 200 -t 5)
    if [ "$w" = cache ] || [ "$w" = cachebl ]; then # warm: every name once
      dnsperf "${args[@]}" -n 1 >/dev/null 2>&1 || true
    fi
    verbose=()
    [ "$w" = miss ] && verbose=(-v)
    # The service's ops endpoint asked every 100 ms during the load: how
    # long the node's other goroutines (API, probes) wait for a core that
    # answers UDP at full rate.
    probe="" ops99="-"
    : >"$work/ops.ms"
    if [ "$s" = svc ] || [ "$s" = svc-nolog ]; then
      ( while :; do $pin1 curl -s -o /dev/null -m 2 -w '%{time_total}\n' "http://127.0.0.1:$p_ops/healthz/live" >>"$work/ops.ms" || true; sleep 0.1; done ) &
      probe=$!
    fi
    c0=$(ticks); t0=$(date +%s.%N)
    cpu="$( { TIMEFORMAT='%U %S'; time $pin1 dnsperf "${args[@]}" -l "$secs" "${verbose[@]}" >"$work/out" 2>&1; } 2>&1 )"
    t1=$(date +%s.%N); c1=$(ticks)
    if [ -n "$probe" ]; then
      kill "$probe" 2>/dev/null || true; wait "$probe" 2>/dev/null || true
      ops99=$(sort -g "$work/ops.ms" | awk '{a[NR]=$1} END {i=int(NR*0.99); if (i<1) i=1; if (NR) printf "%.1f", a[i]*1000; else print "-"}')
    fi
    loaded=$(rss)
    drops="-"
    if [ "$s" = svc ]; then # query-log rows dropped (a full buffer)
      drops=$(curl -s "http://127.0.0.1:$p_met/metrics" | awk '$1 == "service_querylog_dropped_rows_total" {printf "%.0f", $2}')
    fi
    bcpu="-" bper="-" br="-"
    if [ -n "$svcbench" ] && [ "$w" != miss ]; then
      if $pin1 "$svcbench" -drive "127.0.0.1:$p_srv" -queries "$work/q-$w.txt" -duration "${secs}s" \
        -pids "$(tree "$pid" | sort -u | tr '\n' ' ')" >"$work/bout" 2>&1; then
        bcpu=$(sed -n 's/.*server CPU \([0-9]*\)%.*/\1/p' "$work/bout")%
        bper=$(sed -n 's/.* \([0-9]*\) answers per server core-second.*/\1/p' "$work/bout")
        [ "$s" = svc ] && bbase[$w]=$bper
        [ -n "${bbase[$w]:-}" ] && [ -n "$bper" ] && br=$(echo "$bper / ${bbase[$w]}" | bc -l | xargs printf '%.2f')
        bpers[$w.$s]+="$bper "
        [ "$br" != "-" ] && bratios[$w.$s]+="$br "
      else
        echo "bench-peers: the batched generator failed on $s $w:" >&2
        tail -3 "$work/bout" >&2 || true
      fi
    fi
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
    qps=$(sed -n 's/.*Queries per second: *\([0-9.]*\).*/\1/p' "$work/out")
    done_=$(sed -n 's/.*Queries completed: *\([0-9]*\).*/\1/p' "$work/out")
    lost=$(sed -n 's/.*Queries lost: *\([0-9]*\).*/\1/p' "$work/out")
    sf=$(sed -n 's/.*SERVFAIL \([0-9]*\).*/\1/p' "$work/out"); sf=${sf:-0}
    p99="-"
    if [ "$w" = miss ]; then
      p99=$(awk '$1==">" {print $NF}' "$work/out" | sort -g | awk '{a[NR]=$1} END {if (NR) printf "%.1f", a[int(NR*0.99)]*1000; else print "-"}')
    fi
    wall=$(echo "$t1 - $t0" | bc -l)
    srv=$(echo "($c1 - $c0) / $hz / $wall" | bc -l)
    gen=$(echo "$cpu" | awk -v w="$wall" '{printf "%.3f", ($1+$2)/w}')
    per=$(echo "${done_:-0} / (($c1 - $c0) / $hz + 0.0001)" | bc -l)
    [ "$s" = svc ] && base[$w]=$per
    r="-"
    [ -n "${base[$w]:-}" ] && r=$(echo "$per / ${base[$w]}" | bc -l | xargs printf '%.2f')
    printf '%-8s %-9s %9.0f %6.0f%% %7.0f%% %11.0f %7s %7s %8s %8s %7s %7s %7s %8s %7s %9s %6s\n' "$w" "$s" "${qps:-0}" "$(echo "$srv*100" | bc -l)" "$(echo "$gen*100" | bc -l)" "$per" "$r" "${lost:-?}" "$sf" "$p99" "$idle" "$loaded" "${drops:-?}" "$ops99" "$bcpu" "${bper:--}" "$br" | tee -a "$work/table"
    pers[$w.$s]+="$per "
    [ "$r" != "-" ] && ratios[$w.$s]+="$r "
  done
  done
done
# summary <workload> <server> <generator> <per-round answers per
# core-second> <per-round ratios>: the median and the ratio's range.
summary() {
  [ -n "$4" ] || return 0
  local lo hi
  lo=$(printf '%s\n' $5 | sort -g | head -1)
  hi=$(printf '%s\n' $5 | sort -g | tail -1)
  printf '%-8s %-9s %s, median of %d rounds: %.0f answers per core-second, /svc %s (rounds %s-%s)\n' "$1" "$2" "$3" \
    "$(wc -w <<<"$4")" "$(median $4)" "$(median $5)" "${lo:--}" "${hi:--}" | tee -a "$work/table"
}
# blockover <cache workload> <server> <generator> <block's per-round
# answers per core-second> <the cache workload's>: item 2's ratio of
# medians.
blockover() {
  [ -n "$4" ] && [ -n "$5" ] || return 0
  printf 'block/%-7s %-9s %.2f by %s (answers per core-second, medians: block %.0f, %s %.0f; the cache workloads ask %s names, the block workload 10,000)\n' "$1" "$2" \
    "$(awk -v b="$(median $4)" -v c="$(median $5)" 'BEGIN {print b / c}')" "$3" "$(median $4)" "$1" "$(median $5)" "$ncache" | tee -a "$work/table"
}
if [ "$rounds" -gt 1 ]; then
  for w in $workloads; do
    for s in $peers; do
      summary "$w" "$s" dnsperf "${pers[$w.$s]:-}" "${ratios[$w.$s]:-}"
      summary "$w" "$s" "batched generator" "${bpers[$w.$s]:-}" "${bratios[$w.$s]:-}"
    done
  done
fi
# Item 2: a blocked answer's cost against a cached one's, both workloads
# asking 10,000 names (the block list's and the cache's), same run: on a
# node without the list (cache) and on the node that blocks (cachebl).
for c in cache cachebl; do
  for s in svc svc-nolog; do
    blockover "$c" "$s" dnsperf "${pers[block.$s]:-}" "${pers[$c.$s]:-}"
    blockover "$c" "$s" "the batched generator" "${bpers[block.$s]:-}" "${bpers[$c.$s]:-}"
  done
done
echo "(server on CPU 0, dnsperf and the upstream on CPU 1; ${secs}s per row; dnsperf -c 10 -q 200; ans/core-s = answers per second of server CPU; /svc = that ratio to the service's; bSrvCPU, b/core-s, b/svc = the same row driven by test/bench's batched generator (-drive, 4 sockets x 16 in flight, CPU 1) for ${secs}s more; rssMiB = server RSS once ready and quiet, before the load (the service settles its memory in the seconds after: see the memory table), loadMiB = at the end of the load; p99 from dnsperf -v on miss only; logDrop = query-log rows the service dropped for a full buffer; opsP99ms = p99 of the service's /healthz/live answered during the load, asked every 100 ms)"

[ "$idle_secs" = 0 ] && exit 0
# Memory at rest: the cache workload's config, one query answered, then
# nothing for idle_secs. The service's heap is read from its metrics after
# the RSS, so the scrape's own pages are not counted.
echo
printf '%-6s %-8s %7s %8s %8s %8s %9s\n' memory server rssMiB anonMiB fileMiB heapMiB /coredns | tee -a "$work/table"
declare -A rest
lines=()
for s in $peers; do
  pid=""
  if ! "start_$s" cache; then continue; fi
  pids+=("$pid")
  if ! ready cache; then
    echo "bench-peers: $s did not become ready at rest; its log:" >&2
    tail -5 "$work/$s.log" >&2 || true
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
    continue
  fi
  quiet
  sleep "$idle_secs"
  all=$(rss VmRSS) anon=$(rss RssAnon) file=$(rss RssFile) heap="-"
  if [ "$s" = svc ]; then
    heap=$(curl -s "http://127.0.0.1:$p_met/metrics" | awk '$1 == "go_memstats_heap_inuse_bytes" {printf "%.0f", $2 / 1048576}')
  fi
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  rest[$s]=$all
  lines+=("$s $all $anon $file ${heap:--}")
done
for l in "${lines[@]}"; do
  read -r s all anon file heap <<<"$l"
  r="-"
  [ -n "${rest[coredns]:-}" ] && r=$(echo "$all / ${rest[coredns]}" | bc -l | xargs printf '%.2f')
  printf '%-6s %-8s %7s %8s %8s %8s %9s\n' rest "$s" "$all" "$anon" "$file" "$heap" "$r" | tee -a "$work/table"
done
echo "(each server with the cache workload's config, one query answered, then ${idle_secs}s at rest; rssMiB = VmRSS = anonMiB (RssAnon) + fileMiB (RssFile, the mapped pages of the binary and libraries); heapMiB = the service's go_memstats_heap_inuse_bytes; /coredns = rssMiB over CoreDNS's)"
