#!/usr/bin/env bash
# run-manifests.sh runs sluice proxy on examples/manifests with two echo
# servers on loopback: no cluster, no root. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
bin/echo --listen 127.0.0.1:9001 --name echo-a & pids+=($!)
bin/echo --listen 127.0.0.1:9002 --name echo-b & pids+=($!)
bin/sluice proxy --manifests examples/manifests --allow-loopback-endpoints \
	--http-address 127.0.0.1:8080 --https-address "" --admin-address 127.0.0.1:9090 \
	--drain-max-wait 1s --shutdown-timeout 5s & pids+=($!)
cat <<MSG

sluice proxy is serving examples/manifests on 127.0.0.1:8080 (admin on 127.0.0.1:9090).
  curl -H 'Host: echo.localhost' http://127.0.0.1:8080/
  curl -H 'Host: sticky.localhost' -c /tmp/jar -b /tmp/jar http://127.0.0.1:8080/
  curl http://127.0.0.1:9090/metrics
Edit examples/manifests/*.yaml and the change is live within a second.
Ctrl-C stops everything.

MSG
wait -n "${pids[@]}"
