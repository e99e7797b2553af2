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
#      (bench/idleconns) → wrk -t1 -c64 warm-up → wrk -t1 -c64 -d10s, with the
#      proxy's utime+stime read from /proc/PID/stat before and after
#      (bench/throughput): CPU µs per request and max req/s.
#   2. latency: open loop at half of HAProxy's median max rate
#      (bench/latency) straight to the backend, then through each
#      proxy; the report subtracts the direct percentiles.
#   3. control plane: translate 10,000 Ingresses in-process (bench/translate),
#      then `sluice proxy --manifests` on them: start → serving, and one
#      Ingress file changed → the new host answering (bench/ctlplane); then
#      the same with every Ingress having its own certificate (--tls; probes
#      over HTTPS with SNI, certificates verified).
#   4. profile (when sluice needs over BENCH_PROFILE_RATIO× HAProxy's CPU per
#      request, or BENCH_PROFILE=1): perf record of sluice under wrk load →
#      bench/results/sluice-profile.txt.
#
# Knobs (environment): BENCH_ROUNDS=3 BENCH_DURATION=10s BENCH_CONNS=64
# BENCH_IDLE_CONNS=auto BENCH_INGRESSES=10000 BENCH_PORT_BASE=24080
# BENCH_RATE=haproxy|slowest|N (open-loop rate: half of HAProxy's max, half of
# the slowest proxy's max, or N req/s)
# BENCH_SLUICE=PATH (a prebuilt sluice instead of building ./cmd/sluice)
# BENCH_PROXIES="sluice haproxy nginx" BENCH_OUT=bench/results BENCH_KEEP=1
# (keep the work directory with every log) BENCH_PROFILE=auto|1|0.
# Only 127.0.0.1 is ever contacted.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${BENCH_ROUNDS:-3}
DURATION=${BENCH_DURATION:-10s}
WRK_CONNS=${BENCH_CONNS:-64}
INGRESSES=${BENCH_INGRESSES:-10000}
PORT_BASE=${BENCH_PORT_BASE:-24080}
OUT=${BENCH_OUT:-bench/results}
PROFILE=${BENCH_PROFILE:-auto}
PROFILE_RATIO=${BENCH_PROFILE_RATIO:-1.5}
read -r -a PROXIES <<<"${BENCH_PROXIES:-sluice haproxy nginx}"

BACKEND_PORT=$PORT_BASE
declare -A PORT=([sluice]=$((PORT_BASE + 1)) [nginx]=$((PORT_BASE + 2)) [haproxy]=$((PORT_BASE + 3)))
SLUICE_ADMIN=$((PORT_BASE + 11))
CTL_HTTP=$((PORT_BASE + 4))
CTL_ADMIN=$((PORT_BASE + 14))
CTL_HTTPS=$((PORT_BASE + 5))
HOST=bench.local

log() { printf '%s bench: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

scripts/install-deps.sh bench
for c in nginx haproxy wrk taskset curl ss; do
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
((IDLE_CONNS >= 1000)) || die "fd limit $FD_LIMIT too low for the idle-connection test"

for p in $BACKEND_PORT "${PORT[@]}" $SLUICE_ADMIN $CTL_HTTP $CTL_HTTPS $CTL_ADMIN; do
	if [[ -n $(ss -Htln "sport = :$p") ]]; then
		die "port $p is in use; set BENCH_PORT_BASE to a free range"
	fi
done

tmp=$(mktemp -d /tmp/sluice-bench.XXXXXX)
mkdir -p "$tmp/bin" "$tmp/log" "$tmp/manifests" "$tmp/nginx" "$OUT"
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

# wait_ok URL: until URL answers 200 with Host bench.local (15 s at most).
wait_ok() {
	local i
	for ((i = 0; i < 150; i++)); do
		if [[ $(curl -s -o /dev/null -w '%{http_code}' -H "Host: $HOST" "$1" || true) == 200 ]]; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# ---------------------------------------------------------------- build
log "building sluice and the bench tools"
go build -o "$tmp/bin/" ./bench/backend ./bench/throughput ./bench/latency ./bench/idleconns ./bench/report ./bench/ctlplane
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
	log "using the prebuilt $BENCH_SLUICE ($("$tmp/bin/sluice" version 2>/dev/null || echo unknown version))"
else
	go build -o "$tmp/bin/sluice" ./cmd/sluice ||
		die "cmd/sluice does not build; set BENCH_SLUICE to a prebuilt binary, or BENCH_PROXIES='haproxy nginx' to bench the others"
fi
B=$tmp/bin

# ---------------------------------------------------------------- configs
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
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bench
  namespace: bench
spec:
  ingressClassName: sluice
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
EOF

cat >"$tmp/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn $((IDLE_CONNS + 500))
defaults
    mode http
    option http-keep-alive
    timeout connect 5s
    timeout client 120s
    timeout server 60s
    timeout http-keep-alive 120s
    maxconn $((IDLE_CONNS + 500))
frontend bench
    bind 127.0.0.1:${PORT[haproxy]}
    default_backend backend
backend backend
    http-reuse always
    server b1 127.0.0.1:$BACKEND_PORT
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
    keepalive_timeout 120s;
    keepalive_requests 1000000;
    upstream backend {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 128;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:${PORT[nginx]};
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
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
		start sluice env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/manifests" \
			--http-address "127.0.0.1:${PORT[sluice]}" --https-address "" \
			--admin-address "127.0.0.1:$SLUICE_ADMIN" --drain-max-wait 0s --shutdown-timeout 2s
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

# ---------------------------------------------------------------- phase 1
log "phase 1: idle memory ($IDLE_CONNS connections), CPU per request and max rate (wrk -c$WRK_CONNS -d$DURATION), $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
	wrk_args "$BACKEND_PORT" "$DURATION"
	taskset -c 1 "$B/throughput" --proxy direct --round "$r" -- "${WRK[@]}" >>"$raw"
	for p in $(rotated "$r"); do
		log "round $r: $p"
		start_proxy "$p"
		taskset -c 1 "$B/idleconns" --proxy "$p" --round "$r" --pid "$WORK_PID" \
			--addr "127.0.0.1:${PORT[$p]}" --host "$HOST" --conns "$IDLE_CONNS" --settle 1s >>"$raw"
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
case ${BENCH_RATE:-haproxy} in
haproxy) RATE=$("$B/report" --raw "$raw" --print rate) RATE_WHY="half of HAProxy's median max req/s" ;;
slowest) RATE=$("$B/report" --raw "$raw" --print slowest-rate) RATE_WHY="half of the slowest proxy's median max req/s (BENCH_RATE=slowest)" ;;
*) RATE=$BENCH_RATE RATE_WHY="set by BENCH_RATE" ;;
esac
log "phase 2: open-loop latency at $RATE req/s for $DURATION, $ROUNDS rounds"
for ((r = 1; r <= ROUNDS; r++)); do
	taskset -c 1 "$B/latency" --proxy direct --round "$r" --addr "127.0.0.1:$BACKEND_PORT" \
		--host "$HOST" --rate "$RATE" --duration "$DURATION" >>"$raw"
	for p in $(rotated "$r"); do
		log "round $r: $p"
		start_proxy "$p"
		wrk_args "${PORT[$p]}" 1s
		taskset -c 1 "${WRK[@]}" >/dev/null
		taskset -c 1 "$B/latency" --proxy "$p" --round "$r" --addr "127.0.0.1:${PORT[$p]}" \
			--host "$HOST" --rate "$RATE" --duration "$DURATION" \
			--pid "$WORK_PID" --clock-ticks "$(getconf CLK_TCK)" >>"$raw"
		tail -n 1 "$raw" >&2
		stop "$PROXY_PID"
	done
done

# ---------------------------------------------------------------- phase 3
if [[ " ${PROXIES[*]} " == *" sluice "* ]]; then
	log "phase 3: control plane with $INGRESSES Ingresses"
	if ((translate_ok)); then
		env GOMAXPROCS=1 taskset -c 0 "$B/translate" --ingresses "$INGRESSES" --runs 5 >>"$raw"
		tail -n 1 "$raw" >&2
	fi
	taskset -c 1 "$B/ctlplane" --dir "$tmp/ctlplane" --ingresses "$INGRESSES" --backend-port "$BACKEND_PORT" \
		--http "127.0.0.1:$CTL_HTTP" --admin "127.0.0.1:$CTL_ADMIN" --changes 3 --log "$tmp/log/ctlplane-sluice.log" -- \
		env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/ctlplane" \
		--http-address "127.0.0.1:$CTL_HTTP" --https-address "" --admin-address "127.0.0.1:$CTL_ADMIN" \
		--drain-max-wait 0s --shutdown-timeout 2s >>"$raw"
	tail -n 3 "$raw" >&2
	log "phase 3: control plane with $INGRESSES Ingresses, each with its own certificate"
	if ((translate_ok)); then
		env GOMAXPROCS=1 taskset -c 0 "$B/translate" --tls --ingresses "$INGRESSES" --runs 5 >>"$raw"
		tail -n 1 "$raw" >&2
	fi
	taskset -c 1 "$B/ctlplane" --tls --dir "$tmp/ctlplane-tls" --ingresses "$INGRESSES" --backend-port "$BACKEND_PORT" \
		--http "127.0.0.1:$CTL_HTTP" --https "127.0.0.1:$CTL_HTTPS" --admin "127.0.0.1:$CTL_ADMIN" --changes 3 \
		--log "$tmp/log/ctlplane-tls-sluice.log" -- \
		env GOMAXPROCS=1 taskset -c 0 "$B/sluice" proxy --manifests "$tmp/ctlplane-tls" \
		--http-address "127.0.0.1:$CTL_HTTP" --https-address "127.0.0.1:$CTL_HTTPS" --admin-address "127.0.0.1:$CTL_ADMIN" \
		--drain-max-wait 0s --shutdown-timeout 2s >>"$raw"
	tail -n 3 "$raw" >&2
fi

# ---------------------------------------------------------------- report
loadavg_end=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
"$B/report" --raw "$raw" --out "$OUT" \
	--meta "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
	--meta "machine=$(uname -srm), $cpu_model, $(nproc) CPUs" \
	--meta "load average (1/5/15 min) at start / end=$loadavg_start / $loadavg_end (other work shares this machine)" \
	--meta "versions=sluice ${BENCH_SLUICE:+$BENCH_SLUICE }$(git describe --tags --always --dirty 2>/dev/null || echo dev), $(go version | cut -d' ' -f3), $(nginx -v 2>&1 | sed 's/.*: //'), HAProxy $(haproxy -v | head -1 | cut -d' ' -f3), $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)" \
	--meta "latency rate=$RATE req/s: $RATE_WHY" \
	--meta "settings=$ROUNDS rounds, wrk -t1 -c$WRK_CONNS -d$DURATION, $IDLE_CONNS idle connections (fd limit $FD_LIMIT), $INGRESSES Ingresses"
cp "$raw" "$OUT/raw.jsonl"
log "results in $OUT/latest.md, latest.json and cpu.png"

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
