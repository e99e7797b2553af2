#!/usr/bin/env bash
# bench.sh — `make bench`: sluice, HAProxy and nginx side by side on loopback.
#
# Every proxy gets one worker on core 0 (sluice GOMAXPROCS=1, nginx
# worker_processes 1, HAProxy nbthread 1) and forwards to the same backend
# (bench/backend, 100-byte bodies, GOMAXPROCS=1) on core 1, where the load
# generators run too. The proxies run one at a time, freshly started, in a
# rotating order, for BENCH_ROUNDS rounds; bench/report prints the medians and
# writes bench/results/latest.{md,json} and cpu.png.
#
# Phases:
#   1. throughput: fresh proxy → VmRSS per idle keep-alive connection
#      (bench/idleconns; read once VmRSS stopped falling, for sluice after
#      a garbage collection, so up to about 2 minutes per reading; read
#      after half of the connections and after all of them (--halves), each
#      half opened over 15 s so TCP keep-alive probes do not come in one
#      burst; sluice's rounds take up to about 5 minutes here)
#      → wrk -t1 -c64 warm-up → wrk -t1 -c64 -d10s, with the
#      proxy's utime+stime read from /proc/PID/stat before and after
#      (bench/throughput): CPU µs per request and max req/s.
#   2. latency (bench/latency), open loop far from saturation: each proxy
#      at 25% and 50% of its own max req/s from phase 1 and at one common
#      rate, 25% of the slowest proxy's max; the direct path (no proxy) at
#      each of these rates in the same round. The report subtracts the
#      direct percentiles at the same rate: p50/p99/p99.9 added, side by
#      side, as ratios to HAProxy's. BENCH_TAIL_DURATION per run.
#   3. control plane: translate 10,000 Ingresses in-process (bench/translate),
#      then `sluice proxy --manifests` on them: start → serving, and one
#      Ingress file changed ten times → the new host answering
#      (bench/ctlplane; the goal is ≤ 500 ms in 9 of 10, the first included); then
#      the same with every Ingress having its own certificate (--tls; probes
#      over HTTPS with SNI, certificates verified).
#   5. TLS, HTTP/2 and large bodies, each proxy freshly started per round:
#      HTTPS keep-alive (wrk, TLS 1.3, ECDSA P-256), new TLS connections per
#      second with a full handshake and with session resumption
#      (bench/tlsconns), HTTP/2 over TLS (h2load, 4 connections × 16
#      streams: CPU per request and p99), 10 KiB and 1 MiB responses (wrk;
#      MiB/s per core). Each run lasts BENCH_ROW_DURATION.
#   6. load sweep: open loop at 75 and 90% of each proxy's own max req/s
#      from phase 1, BENCH_ROW_DURATION each: p99 by load (sweep.png, with
#      phase 2's 25 and 50%).
#      Phase 2 also records p90, p99.9 and the percentiles of hdr.png.
#   7. cost as work grows (sluice): bench/translate and bench/ctlplane (one
#      change) at 1k and 50k Ingresses beside phase 3's 10k: rebuild time
#      and proxy RSS by size; bench/cost: DNS plan time at 10k records,
#      the binding reconciler's CPU and memory at 1k and 5k pods across 50
#      bindings. About a minute; not in bench-quick.
#   4. profile (when sluice needs over BENCH_PROFILE_RATIO× HAProxy's CPU per
#      request, or BENCH_PROFILE=1): perf record of sluice under wrk load →
#      bench/results/sluice-profile.txt.
#
# `scripts/bench.sh quick` (make bench-quick) is a regression guard of under
# two minutes: one round of phases 1 (without idle connections) and 2 (25%
# of the own max and the common rate only, 5 s each) for sluice and
# HAProxy, results in $TMPDIR/sluice-bench-quick, and a summary of sluice's
# CPU per request and added p99 over HAProxy's.
#
# Knobs (environment): BENCH_ROUNDS=3 BENCH_DURATION=10s BENCH_CONNS=64
# BENCH_PHASES="1 2 6 5 3 7" (which phases run; they run in the order
# 1 2 6 5 3 7, phase 4 follows its own rule) BENCH_ROW_DURATION=5s (phases 5 and 6)
# BENCH_IDLE_CONNS=auto BENCH_IDLE_QUIET=10s BENCH_IDLE_SETTLE_MAX=180s
# BENCH_INGRESSES=10000 BENCH_PORT_BASE=24080
# BENCH_TAIL_SHARES="25 50" (phase 2: percent of each proxy's own max)
# BENCH_COMMON_SHARE=25 (phase 2: the common rate, percent of the slowest
# proxy's max) BENCH_RATE=N (the common rate in req/s instead)
# BENCH_TAIL_DURATION=8s (each phase 2 run) BENCH_SWEEP_SHARES="75 90"
# BENCH_SCALE_INGRESSES="1000 10000 50000" BENCH_DNS_RECORDS=10000
# BENCH_CONTROLLER_PODS="1000 5000" BENCH_CONTROLLER_BINDINGS=50 (phase 7)
# BENCH_ROWS="https tlsconns h2 body" (which rows phase 5 runs; BENCH_PHASES=5
# BENCH_ROWS=h2 BENCH_IDLE_CONNS=0 is the HTTP/2 row alone)
# BENCH_SLUICE=PATH (a prebuilt sluice instead of building ./cmd/sluice)
# BENCH_SLUICE_ARGS="--http1-io=epoll" (extra flags for the sluice proxy of
# phases 1, 2, 4, 5 and 6, split on spaces)
# BENCH_PROXIES="sluice haproxy nginx" BENCH_OUT=bench/results BENCH_KEEP=1
# (keep the work directory with every log) BENCH_PROFILE=auto|1|0.
# Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
if [[ ${1:-} == quick ]]; then
	QUICK=1
	: "${BENCH_ROUNDS:=1}" "${BENCH_DURATION:=5s}" "${BENCH_PHASES:=1 2}" "${BENCH_IDLE_CONNS:=0}"
	: "${BENCH_PROXIES:=sluice haproxy}" "${BENCH_OUT:=${TMPDIR:-/tmp}/sluice-bench-quick}" "${BENCH_PROFILE:=0}"
	: "${BENCH_TAIL_SHARES:=25}" "${BENCH_TAIL_DURATION:=5s}"
elif [[ -n ${1:-} ]]; then
	echo "usage: $0 [quick]" >&2
	exit 2
fi
ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-10s}
ROW_DURATION=${BENCH_ROW_DURATION:-5s}
PHASES=" ${BENCH_PHASES:-1 2 6 5 3 7} "
WRK_CONNS=${BENCH_CONNS:-64}
INGRESSES=${BENCH_INGRESSES:-10000}
PORT_BASE=${BENCH_PORT_BASE:-24080}
OUT=${BENCH_OUT:-bench/results}
PROFILE=${BENCH_PROFILE:-auto}
PROFILE_RATIO=${BENCH_PROFILE_RATIO:-1.5}
# Phase 2's loads: shares of each proxy's own max req/s, and the common
# rate as a share of the slowest proxy's max. Phase 6 adds the high shares
# (the sweep plot shows phase 2's shares too).
TAIL_SHARES=${BENCH_TAIL_SHARES:-25 50}
COMMON_SHARE=${BENCH_COMMON_SHARE:-25}
COMMON_VARIANT=common
TAIL_DURATION=${BENCH_TAIL_DURATION:-8s}
SWEEP_SHARES=${BENCH_SWEEP_SHARES:-75 90}
# Phase 7's sizes.
SCALE_INGRESSES=${BENCH_SCALE_INGRESSES:-1000 10000 50000}
DNS_RECORDS=${BENCH_DNS_RECORDS:-10000}
CONTROLLER_PODS=${BENCH_CONTROLLER_PODS:-1000 5000}
CONTROLLER_BINDINGS=${BENCH_CONTROLLER_BINDINGS:-50}
read -r -a PROXIES <<<"${BENCH_PROXIES:-sluice haproxy nginx}"
read -r -a SLUICE_ARGS <<<"${BENCH_SLUICE_ARGS:-}"
phase() { [[ $PHASES == *" $1 "* ]]; }
ROWS=" ${BENCH_ROWS:-https tlsconns h2 body} "
row() { [[ $ROWS == *" $1 "* ]]; }

BACKEND_PORT=$PORT_BASE
declare -A PORT=([sluice]=$((PORT_BASE + 1)) [nginx]=$((PORT_BASE + 2)) [haproxy]=$((PORT_BASE + 3)))
SLUICE_ADMIN=$((PORT_BASE + 11))
CTL_HTTP=$((PORT_BASE + 4))
CTL_ADMIN=$((PORT_BASE + 14))
CTL_HTTPS=$((PORT_BASE + 5))
BACKEND_10K=$((PORT_BASE + 6))
BACKEND_1M=$((PORT_BASE + 7))
declare -A TLS_PORT=([sluice]=$((PORT_BASE + 21)) [nginx]=$((PORT_BASE + 22)) [haproxy]=$((PORT_BASE + 23)))
HOST=bench.local

log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

scripts/install-deps.sh bench
for c in nginx haproxy wrk h2load openssl taskset curl ss; do
	command -v "$c" >/dev/null || [[ -x /usr/sbin/$c ]] || die "$c not found"
done
export PATH=$PATH:/usr/sbin
(($(nproc) >= 2)) || die "needs at least 2 CPUs (proxy on core 0, load on core 1)"

# Idle connections need one fd each in the proxy (HAProxy reserves two per
# connection) and in the client: stay under the hard limit.
ulimit -n "$(ulimit -Hn)"
FD_LIMIT=$(ulimit -n)
if [[ ${BENCH_IDLE_CONNS:-auto} == auto ]]; then
	IDLE_CONNS=$(((FD_LIMIT - 1000) / 2 / 1000 * 1000))
	((IDLE_CONNS > 10000)) && IDLE_CONNS=10000
else
	IDLE_CONNS=$BENCH_IDLE_CONNS
fi
((IDLE_CONNS >= 1000 || IDLE_CONNS == 0)) || die "fd limit $FD_LIMIT too low for the idle-connection test"
MAXCONN=$((IDLE_CONNS + 500))
IDLE_QUIET=${BENCH_IDLE_QUIET:-10s}
IDLE_SETTLE_MAX=${BENCH_IDLE_SETTLE_MAX:-180s}
# Every proxy keeps idle client connections 300 s (not the usual 120 s), so
# they outlive the idle phase's wait for VmRSS to settle.
IDLE_TIMEOUT=300s

for p in $BACKEND_PORT $BACKEND_10K $BACKEND_1M "${PORT[@]}" "${TLS_PORT[@]}" $SLUICE_ADMIN $CTL_HTTP $CTL_HTTPS $CTL_ADMIN; do
	if [[ -n $(ss -Htln "sport = :$p") ]]; then
		die "port $p is in use; set BENCH_PORT_BASE to a free range"
	fi
done

tmp=$(mktemp -d /tmp/sluice-bench.XXXXXX)
mkdir -p "$tmp/bin" "$tmp/log" "$tmp/manifests" "$tmp/nginx" "$tmp/tls" "$OUT"
raw=$tmp/raw.jsonl
: >"$raw"

# Every process started here is recorded and stopped by PID on exit.
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [[ -n ${BENCH_KEEP:-} ]]; then
		log "logs and configs kept in $tmp"
	else
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start NAME CMD...: runs CMD in the background with its output in
# $tmp/log/NAME.log; sets STARTED to its PID.
start() {
	local name=$1
	shift
	"$@" >>"$tmp/log/$name.log" 2>&1 &
	STARTED=$!
	pids+=("$STARTED")
}

# stop PID: TERM, wait, forget.
stop() {
	local pid=$1 p keep=()
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	for p in "${pids[@]}"; do
		[[ $p == "$pid" ]] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# wait_ok URL: until URL answers 200 with Host bench.local (60 s at most: a
# loaded machine starts slowly).
wait_ok() {
	local i
	for ((i = 0; i < 600; i++)); do
		if [[ $(curl -s -o /dev/null -w '%{http_code}' -H "Host: $HOST" "$1" || true) == 200 ]]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# ---------------------------------------------------------------- build
log "building sluice and the bench tools"
go build -o "$tmp/bin/" ./bench/backend ./bench/throughput ./bench/latency ./bench/idleconns ./bench/report ./bench/ctlplane ./bench/tlsconns ./bench/cost
translate_ok=1
go build -o "$tmp/bin/" ./bench/translate 2>"$tmp/log/build-translate.log" || {
	translate_ok=0
	log "bench/translate does not build (see below); the in-process control-plane numbers are skipped"
	cat "$tmp/log/build-translate.log" >&2
}
if [[ " ${PROXIES[*]} " != *" sluice "* ]]; then
	:
elif [[ -n ${BENCH_SLUICE:-} ]]; then
	cp "$BENCH_SLUICE" "$tmp/bin/sluice" || die "BENCH_SLUICE=$BENCH_SLUICE: cannot copy"
	log "using the prebuilt $BENCH_SLUICE ($("$tmp/bin/sluice" version 2>/dev/null | head -1 || echo unknown version))"
else
	go build -ldflags "-X sluice.dev/sluice/internal/version.Version=$(git describe --tags --always --dirty 2>/dev/null || echo dev) -X sluice.dev/sluice/internal/version.Commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
		-o "$tmp/bin/sluice" ./cmd/sluice ||
		die "cmd/sluice does not build; set BENCH_SLUICE to a prebuilt binary, or BENCH_PROXIES='haproxy nginx' to bench the others"
fi
B=$tmp/bin
# The bench backends listen on 127.0.0.1, which sluice uses only with
# --allow-loopback-endpoints (a prebuilt BENCH_SLUICE older than the flag
# uses loopback endpoints without it).
LOOPBACK=()
# (The help is read whole: with pipefail, grep -q closing the pipe early
# failed the check whenever sluice had not finished writing.)
if [[ -x $B/sluice ]] && [[ $("$B/sluice" proxy --help 2>&1 || true) == *-allow-loopback-endpoints* ]]; then
	LOOPBACK=(--allow-loopback-endpoints)
fi

# ---------------------------------------------------------------- configs
# One ECDSA P-256 certificate for bench.local, served by every proxy.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
	-keyout "$tmp/tls/key.pem" -out "$tmp/tls/crt.pem" -subj "/CN=$HOST" \
	-addext "subjectAltName=DNS:$HOST" 2>"$tmp/log/openssl.log" || die "generating the certificate failed: $(cat "$tmp/log/openssl.log")"
cat "$tmp/tls/crt.pem" "$tmp/tls/key.pem" >"$tmp/tls/combined.pem"

cat >"$tmp/manifests/bench.yaml" <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: sluice
  annotations:
    ingressclass.kubernetes.io/is-default-class: "true"
spec:
  controller: sluice.dev/ingress-controller
---
apiVersion: v1
kind: Service
metadata:
  name: backend
  namespace: bench
spec:
  selector: {app: backend}
  ports:
  - name: http
    port: 80
    targetPort: $BACKEND_PORT
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: backend-abcde
  namespace: bench
  labels:
    kubernetes.io/service-name: backend
addressType: IPv4
ports:
- name: http
  port: $BACKEND_PORT
  protocol: TCP
endpoints:
- addresses: ["127.0.0.1"]
  conditions: {ready: true}
  targetRef: {kind: Pod, namespace: bench, name: backend}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bench
  namespace: bench
  annotations:
    sluice.dev/ssl-redirect: "false"
spec:
  ingressClassName: sluice
  tls:
  - hosts: [$HOST]
    secretName: bench-tls
  rules:
  - host: $HOST
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: backend
            port:
              name: http
      - path: /10k
        pathType: Prefix
        backend:
          service:
            name: backend-10k
            port:
              name: http
      - path: /1m
        pathType: Prefix
        backend:
          service:
            name: backend-1m
            port:
              name: http
EOF
for b in 10k:$BACKEND_10K 1m:$BACKEND_1M; do
	cat >>"$tmp/manifests/bench.yaml" <<EOF
---
apiVersion: v1
kind: Service
metadata:
  name: backend-${b%%:*}
  namespace: bench
spec:
  selector: {app: backend-${b%%:*}}
  ports:
  - name: http
    port: 80
    targetPort: ${b##*:}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: backend-${b%%:*}-abcde
  namespace: bench
  labels:
    kubernetes.io/service-name: backend-${b%%:*}
addressType: IPv4
ports:
- name: http
  port: ${b##*:}
  protocol: TCP
endpoints:
- addresses: ["127.0.0.1"]
  conditions: {ready: true}
  targetRef: {kind: Pod, namespace: bench, name: backend}
EOF
done
cat >>"$tmp/manifests/bench.yaml" <<EOF
---
apiVersion: v1
kind: Secret
metadata:
  name: bench-tls
  namespace: bench
type: kubernetes.io/tls
data:
  tls.crt: $(base64 -w0 "$tmp/tls/crt.pem")
  tls.key: $(base64 -w0 "$tmp/tls/key.pem")
EOF

cat >"$tmp/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn $((IDLE_CONNS + 500))
defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client $IDLE_TIMEOUT
    timeout server 60s
    timeout http-keep-alive $IDLE_TIMEOUT
    maxconn $((IDLE_CONNS + 500))
frontend bench
    bind 127.0.0.1:${PORT[haproxy]}
    bind 127.0.0.1:${TLS_PORT[haproxy]} ssl crt $tmp/tls/combined.pem alpn h2,http/1.1 ssl-min-ver TLSv1.3
    use_backend b10k if { path_beg /10k }
    use_backend b1m if { path_beg /1m }
    default_backend backend
backend backend
    http-reuse always
    server b1 127.0.0.1:$BACKEND_PORT
backend b10k
    http-reuse always
    server b1 127.0.0.1:$BACKEND_10K
backend b1m
    http-reuse always
    server b1 127.0.0.1:$BACKEND_1M
EOF

cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
worker_rlimit_nofile $FD_LIMIT;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/log/nginx-error.log warn;
events {
    worker_connections $((IDLE_CONNS + 1000));
}
http {
    access_log off;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    keepalive_timeout $IDLE_TIMEOUT;
    keepalive_requests 1000000;
    upstream backend {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 128;
        keepalive_requests 1000000;
    }
    upstream b10k {
        server 127.0.0.1:$BACKEND_10K;
        keepalive 128;
        keepalive_requests 1000000;
    }
    upstream b1m {
        server 127.0.0.1:$BACKEND_1M;
        keepalive 128;
        keepalive_requests 1000000;
    }
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    ssl_certificate $tmp/tls/crt.pem;
    ssl_certificate_key $tmp/tls/key.pem;
    ssl_protocols TLSv1.3;
    server {
        listen 127.0.0.1:${PORT[nginx]};
        listen 127.0.0.1:${TLS_PORT[nginx]} ssl http2;
        location / {
            proxy_pass http://backend;
        }
        location /10k {
            proxy_pass http://b10k;
        }
        location /1m {
            proxy_pass http://b1m;
        }
    }
}
EOF

# start_proxy NAME: starts NAME fresh on core 0, waits until it serves, and
# sets PROXY_PID (the process that was started) and WORK_PID (the process
# doing the work: nginx's worker, the others themselves).
start_proxy() {
	case $1 in
	sluice)
		start sluice env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/manifests" "${LOOPBACK[@]}" \
			--http-address "127.0.0.1:${PORT[sluice]}" --https-address "127.0.0.1:${TLS_PORT[sluice]}" \
			--default-certificate bench/bench-tls \
			--admin-address "127.0.0.1:$SLUICE_ADMIN" --drain-max-wait 0s --shutdown-timeout 2s --idle-timeout "$IDLE_TIMEOUT" \
			${SLUICE_ARGS[@]+"${SLUICE_ARGS[@]}"}
		;;
	haproxy)
		start haproxy taskset -c 0 haproxy -db -f "$tmp/haproxy.cfg"
		;;
	nginx)
		start nginx taskset -c 0 nginx -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -e "$tmp/log/nginx-error.log"
		;;
	esac
	PROXY_PID=$STARTED
	wait_ok "http://127.0.0.1:${PORT[$1]}/" || die "$1 did not start serving; see $tmp/log/$1.log (BENCH_KEEP=1 keeps it)"
	WORK_PID=$PROXY_PID
	if [[ $1 == nginx ]]; then
		WORK_PID=$(pgrep -P "$PROXY_PID" | head -1)
		[[ -n $WORK_PID ]] || die "nginx worker not found"
	fi
}

# rotated ROUND: the proxies in the order for this round.
rotated() {
	local n=${#PROXIES[@]} i
	for ((i = 0; i < n; i++)); do
		printf '%s ' "${PROXIES[$(((i + $1 - 1) % n))]}"
	done
}

# wrk_args PORT DURATION: sets WRK to the wrk command line.
wrk_args() {
	WRK=(wrk -t1 -c"$WRK_CONNS" -d"$2" --latency -H "Host: $HOST" "http://127.0.0.1:$1/")
}

loadavg_start=$(cut -d' ' -f1-3 /proc/loadavg)
start backend env GOMAXPROCS=1 taskset -c 1 "$B/backend" --listen "127.0.0.1:$BACKEND_PORT" --size 100
wait_ok "http://127.0.0.1:$BACKEND_PORT/" || die "backend did not start"
start backend-10k env GOMAXPROCS=1 taskset -c 1 "$B/backend" --listen "127.0.0.1:$BACKEND_10K" --size 10240
start backend-1m env GOMAXPROCS=1 taskset -c 1 "$B/backend" --listen "127.0.0.1:$BACKEND_1M" --size 1048576
wait_ok "http://127.0.0.1:$BACKEND_10K/" || die "backend-10k did not start"
wait_ok "http://127.0.0.1:$BACKEND_1M/" || die "backend-1m did not start"
RATE=none RATE_WHY="phase 2 not run"

# ---------------------------------------------------------------- phase 1
phase 1 && log "phase 1: idle memory ($IDLE_CONNS connections), CPU per request and max rate (wrk -c$WRK_CONNS -d$DURATION), $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
	phase 1 || break
	wrk_args "$BACKEND_PORT" "$DURATION"
	taskset -c 1 "$B/throughput" --proxy direct --round "$r" -- "${WRK[@]}" >>"$raw"
	for p in $(rotated "$r"); do
		log "round $r: $p"
		start_proxy "$p"
		if ((IDLE_CONNS > 0)); then
			# VmRSS is read once it stopped falling for BENCH_IDLE_QUIET
			# (sluice frees an idle connection's stack when it parks it,
			# after 1-2 s, and the runtime returns the pages later), at
			# most BENCH_IDLE_SETTLE_MAX; samples in the log.
			metrics=()
			[[ $p == sluice ]] && metrics=(--metrics "http://127.0.0.1:$SLUICE_ADMIN/metrics")
			taskset -c 1 "$B/idleconns" --proxy "$p" --round "$r" --pid "$WORK_PID" \
				--addr "127.0.0.1:${PORT[$p]}" --host "$HOST" --conns "$IDLE_CONNS" --settle 1s \
				--settle-quiet "$IDLE_QUIET" --settle-max "$IDLE_SETTLE_MAX" --halves "${metrics[@]}" >>"$raw" 2>>"$tmp/log/idleconns.log"
		fi
		wrk_args "${PORT[$p]}" 2s
		taskset -c 1 "${WRK[@]}" >/dev/null
		wrk_args "${PORT[$p]}" "$DURATION"
		taskset -c 1 "$B/throughput" --proxy "$p" --round "$r" --pid "$WORK_PID" \
			--clock-ticks "$(getconf CLK_TCK)" -- "${WRK[@]}" >>"$raw"
		tail -n 1 "$raw" >&2
		stop "$PROXY_PID"
	done
done

# ---------------------------------------------------------------- phase 2
# runtime_metrics PROXY: for sluice, the latency tool reads its Go runtime
# metrics before and after the run (GC, scheduling latency).
runtime_metrics() { [[ $1 == sluice ]] && echo --metrics "http://127.0.0.1:$SLUICE_ADMIN/metrics"; true; }
# Every proxy runs open loop at TAIL_SHARES percent of its own max req/s
# and at the common rate (COMMON_SHARE percent of the slowest proxy's
# max, or BENCH_RATE), far from saturation on every proxy; the direct path
# runs at each distinct rate, so the report subtracts the direct
# percentiles at the same rate in the same round.
declare -A LAT_RATE=()
if phase 2; then
	RATE=
	for p in "${PROXIES[@]}"; do
		# Without phase 1, BENCH_RATE alone: the common rate only.
		max=$("$B/report" --raw "$raw" --print "max:$p" 2>/dev/null) ||
			{ [[ -n ${BENCH_RATE:-} ]] && continue; } || die "phase 2 needs phase 1's max req/s of $p (run phase 1 too, or set BENCH_RATE=N)"
		for share in $TAIL_SHARES; do
			LAT_RATE[$p:$share]=$((max * share / 100))
		done
		own=$((max * COMMON_SHARE / 100))
		if [[ -z $RATE ]] || ((own < RATE)); then RATE=$own; fi
	done
	RATE_WHY="$COMMON_SHARE% of the slowest proxy's median max req/s"
	if [[ -n ${BENCH_RATE:-} ]]; then
		RATE=$BENCH_RATE RATE_WHY="set by BENCH_RATE"
	fi
	((RATE > 0)) || die "no rate for phase 2 (run phase 1 too, or set BENCH_RATE=N)"
	read -r -a DIRECT_RATES <<<"$(printf '%s\n' "$RATE" "${LAT_RATE[@]}" | sort -un | tr '\n' ' ')"
	log "phase 2: open loop at $TAIL_SHARES% of each proxy's own max and at $RATE req/s ($RATE_WHY), $TAIL_DURATION each; direct at ${DIRECT_RATES[*]} req/s; $ROUNDS rounds"
fi
for ((r = 1; r <= ROUNDS; r++)); do
	phase 2 || break
	for rate in "${DIRECT_RATES[@]}"; do
		taskset -c 1 "$B/latency" --proxy direct --round "$r" --addr "127.0.0.1:$BACKEND_PORT" \
			--host "$HOST" --rate "$rate" --duration "$TAIL_DURATION" >>"$raw"
	done
	for p in $(rotated "$r"); do
		log "round $r: $p"
		start_proxy "$p"
		wrk_args "${PORT[$p]}" 1s
		taskset -c 1 "${WRK[@]}" >/dev/null
		# The common rate first; a share whose rate is the common rate (the
		# slowest proxy's) is not run twice: the report counts it as both.
		runs=("$RATE:$COMMON_VARIANT")
		for share in $TAIL_SHARES; do
			if [[ -z ${LAT_RATE[$p:$share]:-} ]]; then
				continue
			elif [[ ${LAT_RATE[$p:$share]} == "$RATE" ]]; then
				runs[0]="$RATE:$share"
			else
				runs+=("${LAT_RATE[$p:$share]}:$share")
			fi
		done
		for run in "${runs[@]}"; do
			taskset -c 1 "$B/latency" --proxy "$p" --round "$r" --variant "${run#*:}" --addr "127.0.0.1:${PORT[$p]}" \
				--host "$HOST" --rate "${run%%:*}" --duration "$TAIL_DURATION" $(runtime_metrics "$p") \
				--pid "$WORK_PID" --clock-ticks "$(getconf CLK_TCK)" >>"$raw"
		done
		tail -n ${#runs[@]} "$raw" | cut -c1-200 >&2
		stop "$PROXY_PID"
	done
done

# ---------------------------------------------------------------- phase 6
# (after phase 2, whose open-loop tool it uses, at rates from phase 1)
if phase 6; then
	log "phase 6: p99 at $SWEEP_SHARES% of each proxy's own max req/s, $ROW_DURATION each, $ROUNDS rounds"
fi
for ((r = 1; r <= ROUNDS; r++)); do
	phase 6 || break
	for p in $(rotated "$r"); do
		max=$("$B/report" --raw "$raw" --print "max:$p") || die "phase 6 needs phase 1's max req/s of $p"
		log "round $r: $p (max $max req/s)"
		start_proxy "$p"
		wrk_args "${PORT[$p]}" 1s
		taskset -c 1 "${WRK[@]}" >/dev/null
		for share in $SWEEP_SHARES; do
			taskset -c 1 "$B/latency" --proxy "$p" --round "$r" --sweep "$share" --addr "127.0.0.1:${PORT[$p]}" \
				--host "$HOST" --rate $((max * share / 100)) --duration "$ROW_DURATION" $(runtime_metrics "$p") >>"$raw"
		done
		tail -n 4 "$raw" | cut -c1-160 >&2
		stop "$PROXY_PID"
	done
done

# ---------------------------------------------------------------- phase 5
# (before phase 3, next to the other data-plane phases)
if phase 5; then
	log "phase 5: TLS, HTTP/2 and large bodies, $ROW_DURATION per run, $ROUNDS rounds"
fi
for ((r = 1; r <= ROUNDS; r++)); do
	phase 5 || break
	for p in $(rotated "$r"); do
		log "round $r: $p"
		start_proxy "$p"
		tp=(taskset -c 1 "$B/throughput" --proxy "$p" --round "$r" --pid "$WORK_PID" --clock-ticks "$(getconf CLK_TCK)")
		https=https://127.0.0.1:${TLS_PORT[$p]}/
		taskset -c 1 wrk -t1 -c"$WRK_CONNS" -d1s -H "Host: $HOST" "$https" >/dev/null
		if row https; then
			"${tp[@]}" --variant https -- wrk -t1 -c"$WRK_CONNS" -d"$ROW_DURATION" --latency -H "Host: $HOST" "$https" >>"$raw"
		fi
		for resume in "" --resume; do
			row tlsconns || break
			taskset -c 1 "$B/tlsconns" --proxy "$p" --round "$r" --pid "$WORK_PID" --clock-ticks "$(getconf CLK_TCK)" \
				--addr "127.0.0.1:${TLS_PORT[$p]}" --host "$HOST" --duration "$ROW_DURATION" $resume >>"$raw"
		done
		if row h2; then
			"${tp[@]}" --variant h2 --h2load-log "$tmp/log/h2load-$p.tsv" -- h2load -t1 -c4 -m16 -D "$ROW_DURATION" \
				--warm-up-time 1s --log-file "$tmp/log/h2load-$p.tsv" -H ":authority: $HOST" "$https" >>"$raw"
		fi
		if row body; then
			"${tp[@]}" --variant body-10k --body-bytes 10240 -- \
				wrk -t1 -c"$WRK_CONNS" -d"$ROW_DURATION" --latency -H "Host: $HOST" "http://127.0.0.1:${PORT[$p]}/10k" >>"$raw"
			"${tp[@]}" --variant body-1m --body-bytes 1048576 -- \
				wrk -t1 -c16 -d"$ROW_DURATION" --latency -H "Host: $HOST" "http://127.0.0.1:${PORT[$p]}/1m" >>"$raw"
		fi
		tail -n 6 "$raw" | cut -c1-200 >&2
		stop "$PROXY_PID"
	done
done

# ---------------------------------------------------------------- phase 3
if phase 3 && [[ " ${PROXIES[*]} " == *" sluice "* ]]; then
	log "phase 3: control plane with $INGRESSES Ingresses"
	if ((translate_ok)); then
		env GOMAXPROCS=1 taskset -c 0 "$B/translate" --ingresses "$INGRESSES" --runs 5 >>"$raw"
		tail -n 1 "$raw" >&2
	fi
	taskset -c 1 "$B/ctlplane" --dir "$tmp/ctlplane" --ingresses "$INGRESSES" --backend-port "$BACKEND_PORT" \
		--http "127.0.0.1:$CTL_HTTP" --admin "127.0.0.1:$CTL_ADMIN" --changes 10 --log "$tmp/log/ctlplane-sluice.log" -- \
		env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/ctlplane" "${LOOPBACK[@]}" \
		--http-address "127.0.0.1:$CTL_HTTP" --https-address "" --admin-address "127.0.0.1:$CTL_ADMIN" \
		--drain-max-wait 0s --shutdown-timeout 2s >>"$raw"
	tail -n 3 "$raw" >&2
	log "phase 3: control plane with $INGRESSES Ingresses, each with its own certificate"
	if ((translate_ok)); then
		env GOMAXPROCS=1 taskset -c 0 "$B/translate" --tls --ingresses "$INGRESSES" --runs 5 >>"$raw"
		tail -n 1 "$raw" >&2
	fi
	taskset -c 1 "$B/ctlplane" --tls --dir "$tmp/ctlplane-tls" --ingresses "$INGRESSES" --backend-port "$BACKEND_PORT" \
		--http "127.0.0.1:$CTL_HTTP" --https "127.0.0.1:$CTL_HTTPS" --admin "127.0.0.1:$CTL_ADMIN" --changes 10 \
		--log "$tmp/log/ctlplane-tls-sluice.log" -- \
		env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/ctlplane-tls" "${LOOPBACK[@]}" \
		--http-address "127.0.0.1:$CTL_HTTP" --https-address "127.0.0.1:$CTL_HTTPS" --admin-address "127.0.0.1:$CTL_ADMIN" \
		--drain-max-wait 0s --shutdown-timeout 2s >>"$raw"
	tail -n 3 "$raw" >&2
fi

# ---------------------------------------------------------------- phase 7
# Cost as work grows (sluice only): the proxy at each of SCALE_INGRESSES
# (phase 3's size is not run twice: the report takes phase 3's figures),
# the DNS planner at DNS_RECORDS, the binding reconciler at each of
# CONTROLLER_PODS across CONTROLLER_BINDINGS.
if phase 7 && [[ " ${PROXIES[*]} " == *" sluice "* ]]; then
	log "phase 7: cost as work grows: proxy at $SCALE_INGRESSES Ingresses, DNS plan at $DNS_RECORDS records, controller at $CONTROLLER_PODS pods across $CONTROLLER_BINDINGS bindings"
	for n in $SCALE_INGRESSES; do
		if phase 3 && ((n == INGRESSES)); then
			continue
		fi
		if ((translate_ok)); then
			env GOMAXPROCS=1 taskset -c 0 "$B/translate" --ingresses "$n" --runs 3 | "$B/report" --as-scale >>"$raw"
		fi
		rm -rf "$tmp/scale"
		taskset -c 1 "$B/ctlplane" --dir "$tmp/scale" --ingresses "$n" --backend-port "$BACKEND_PORT" \
			--http "127.0.0.1:$CTL_HTTP" --admin "127.0.0.1:$CTL_ADMIN" --changes 1 --log "$tmp/log/scale-$n-sluice.log" -- \
			env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/scale" "${LOOPBACK[@]}" \
			--http-address "127.0.0.1:$CTL_HTTP" --https-address "" --admin-address "127.0.0.1:$CTL_ADMIN" \
			--drain-max-wait 0s --shutdown-timeout 2s | "$B/report" --as-scale >>"$raw"
		rm -rf "$tmp/scale"
		tail -n 2 "$raw" | cut -c1-200 >&2
	done
	env GOMAXPROCS=1 taskset -c 0 "$B/cost" dns --records "$DNS_RECORDS" --runs 3 >>"$raw"
	for n in $CONTROLLER_PODS; do
		env GOMAXPROCS=1 taskset -c 0 "$B/cost" controller --pods "$n" --bindings "$CONTROLLER_BINDINGS" --runs 3 >>"$raw"
	done
	tail -n 3 "$raw" | cut -c1-200 >&2
fi

# ---------------------------------------------------------------- report
loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
"$B/report" --raw "$raw" --out "$OUT" \
	--meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
	--meta "machine=$(uname -srm), $cpu_model, $(nproc) CPUs" \
	--meta "load average (1/5/15 min) at start / end=$loadavg_start / $loadavg_end (other work shares this machine)" \
	--meta "versions=sluice ${BENCH_SLUICE:+$BENCH_SLUICE }$(git describe --tags --always --dirty 2>/dev/null || echo dev), $(go version | cut -d' ' -f3), $(nginx -v 2>&1 | sed 's/.*: //'), HAProxy $(haproxy -v | head -1 | cut -d' ' -f3), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)" \
	--meta "common open-loop rate=$RATE req/s: $RATE_WHY; each proxy also at $TAIL_SHARES% of its own max, $TAIL_DURATION per run" \
	--meta "settings=$ROUNDS rounds, wrk -t1 -c$WRK_CONNS -d$DURATION, $IDLE_CONNS idle connections (fd limit $FD_LIMIT), $INGRESSES Ingresses, phases$PHASES, $ROW_DURATION per TLS/HTTP/2/body run"
cp "$raw" "$OUT/raw.jsonl"
log "results in $OUT/latest.md, latest.json and cpu.png"
if ((QUICK)); then
	echo "bench-quick ($ROUNDS round, load average at start / end: $loadavg_start / $loadavg_end):"
	"$B/report" --raw "$raw" --print quick
fi

# ---------------------------------------------------------------- phase 4
# syscalls NAME: system calls and context switches per request of NAME's
# worker during a wrk run, as a markdown table row. Requests in perf's
# counting window = wrk's rate × the window.
syscalls() {
	local p=$1 out=$tmp/perfstat-$1.txt ev e
	ev=raw_syscalls:sys_enter,context-switches
	for e in read readv recvfrom recvmsg write writev sendto sendmsg epoll_wait epoll_pwait; do ev+=,syscalls:sys_enter_$e; done
	start_proxy "$p"
	wrk_args "${PORT[$p]}" 7s
	taskset -c 1 "${WRK[@]}" >"$tmp/log/wrk-perfstat-$p.txt" 2>&1 &
	local w=$!
	pids+=("$w")
	sleep 1
	perf stat -x, -o "$out" -e "$ev" -p "$WORK_PID" -- sleep 5 >/dev/null 2>&1 || true
	wait "$w" || true
	stop "$PROXY_PID"
	local rps
	rps=$(awk '/^Requests\/sec/ {print $2}' "$tmp/log/wrk-perfstat-$p.txt")
	awk -F, -v p="$p" -v rps="${rps:-0}" '
		$3 == "raw_syscalls:sys_enter" {all = $1; secs = $4 / 1e9}
		$3 ~ /sys_enter_(read|readv|recvfrom|recvmsg)$/ {rd += $1}
		$3 ~ /sys_enter_(write|writev|sendto|sendmsg)$/ {wr += $1}
		$3 ~ /epoll/ {ep += $1}
		$3 == "context-switches" {cs = $1}
		END {
			n = rps * secs
			if (n == 0) { printf "| %s | no requests | | | | |\n", p; exit }
			printf "| %s | %.2f | %.2f | %.2f | %.2f | %.3f |\n", p, all/n, rd/n, wr/n, ep/n, cs/n
		}' "$out"
}

if [[ " ${PROXIES[*]} " == *" sluice "* ]] && command -v perf >/dev/null; then
	ratio=$("$B/report" --raw "$raw" --print sluice-ratio)
	if [[ $PROFILE == 1 || ($PROFILE == auto && $(awk "BEGIN{print ($ratio > $PROFILE_RATIO)}") == 1) ]]; then
		log "phase 4: sluice uses ${ratio}× HAProxy's CPU per request; profiling it under wrk with perf"
		set +o pipefail # head closes pipes early
		start_proxy sluice
		wrk_args "${PORT[sluice]}" 12s
		taskset -c 1 "${WRK[@]}" >/dev/null &
		wrkpid=$!
		pids+=("$wrkpid")
		sleep 1
		perf record -F 999 -g -o "$tmp/perf.data" -p "$WORK_PID" -- sleep 8 >/dev/null 2>"$tmp/log/perf.log" || true
		wait "$wrkpid" || true
		stop "$PROXY_PID"
		{
			echo "# Profile of sluice (GOMAXPROCS=1, core 0) under wrk -t1 -c$WRK_CONNS, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
			echo "# sluice used ${ratio}× HAProxy's CPU per request in this run."
			echo
			echo "## System calls and context switches per request (perf stat for 5 s during wrk)"
			echo
			echo "| proxy | syscalls | reads (read, readv, recvfrom, recvmsg) | writes (write, writev, sendto, sendmsg) | epoll_wait | context switches |"
			echo "| --- | ---: | ---: | ---: | ---: | ---: |"
			for p in "${PROXIES[@]}"; do syscalls "$p"; done
			echo
			echo "## Self time per function (perf record -F 999 -g, 8 s)"
			echo
			perf report -i "$tmp/perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -40 | sed 's/ *- *- *$//'
			echo
			echo "## Including callees (children)"
			echo
			perf report -i "$tmp/perf.data" --children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -60 | sed 's/ *- *- *$//'
		} >"$OUT/sluice-profile.txt"
		set -o pipefail
		log "profile in $OUT/sluice-profile.txt"
	fi
fi
