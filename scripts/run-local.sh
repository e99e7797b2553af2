#!/usr/bin/env bash
# run-local.sh is `make run`: the whole sluice stack on this machine.
#
#   curl ─► HAProxy 127.0.0.1:8080 ─► sluice proxy pods (10.244.x.y) ─► echo pods
#                ▲ runtime API                 ▲ informers
#          sluice controller pods ◄──── local Kubernetes cluster
#
# The local cluster (test/cluster) is a real kube-apiserver,
# controller-manager and scheduler with three simulated nodes in two zones
# (network namespaces; root needed). sluice is installed into it with `helm
# install` of deploy/helm/sluice, as in production: the process kubelet runs
# the chart's image (ghcr.io/sluice-dev/sluice) as bin/sluice. The
# controller (two replicas, leader election) registers the proxy pods in
# HAProxy's backend, gates their readiness on HAProxy's health checks and
# drains them on deletion. HAProxy runs in master-worker mode: a reload
# keeps the master, and so `make run`, alive. Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if [[ $(id -u) != 0 ]]; then
	echo "make run needs root (network namespaces for the simulated nodes)." >&2
	echo "Without root, 'make run-manifests' runs the proxy on example manifests." >&2
	exit 1
fi
listen=${SLUICE_RUN_ADDRESS:-127.0.0.1:8080}

scripts/install-deps.sh
echo "== Kubernetes binaries and helm (built once, cached)"
SLUICE_KUBE_BIN=$(scripts/kube-binaries.sh)
helm=$(scripts/helm.sh)
export SLUICE_KUBE_BIN
echo "== building sluice, echo and localcluster"
go build -o bin/localcluster ./test/cluster/cmd/localcluster

state="$root/.cache/run"
rm -rf "$state"
mkdir -p "$state/apply"
pids=()
cleanup() {
	trap - EXIT INT TERM
	echo
	echo "== stopping"
	# The cluster last: it stops the pods (the proxies drain first).
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -TERM "${pids[$i]}" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "${pids[$i]}" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "${pids[$i]}" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	echo "stopped"
}
trap cleanup EXIT INT TERM

echo "== HAProxy on $listen"
sock="$state/haproxy.sock"
master="$state/haproxy-master.sock"
cat >"$state/haproxy.cfg" <<CFG
global
    stats socket $sock mode 600 level admin
    maxconn 4000
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 10s
    # keep idle client connections through a reload (README: HAProxy)
    option idle-close-on-response
frontend fe
    bind $listen
    default_backend sluice
backend sluice
    balance roundrobin
    option httpchk GET /healthz
CFG
# Master-worker (-W) with a master CLI (-S): `reload` there starts new
# workers and keeps this process.
haproxy -W -db -S "$master" -f "$state/haproxy.cfg" >"$state/haproxy.log" 2>&1 &
pids+=($!)

# What the cluster gets at start: the sample app. sluice comes with helm.
cp deploy/local/app.yaml "$state/apply/"
# The chart's values for this machine: pods of a simulated node share its
# network namespace, so every process listens on its pod IP; the pods see
# the host's files, so the controller reaches HAProxy's unix socket.
cat >"$state/values.yaml" <<YAML
listenOnPodIP: true
controller: {logFormat: text}
proxy: {httpsPort: 0, drainMaxWaitSeconds: 30, shutdownTimeoutSeconds: 10, terminationMarginSeconds: 20, logFormat: text}
bindings:
  - name: haproxy
    provider:
      haproxy: {runtimeAPI: "unix://$sock", backend: sluice}
    drain: {handshake: true}
    publish: [{ip: "${listen%:*}"}]
YAML

echo "== local cluster (3 nodes, 2 zones)"
bin/localcluster --dir "$root/.cache/localcluster" --image ghcr.io/sluice-dev/sluice="$root/bin/sluice" --image echo="$root/bin/echo" \
	--apply "$state/apply" >"$state/cluster.out" 2>"$state/cluster.log" &
pids+=($!)
until grep -q "Ctrl-C stops everything" "$state/cluster.out" 2>/dev/null; do
	if ! kill -0 "${pids[-1]}" 2>/dev/null; then
		echo "local cluster failed to start:" >&2
		tail -20 "$state/cluster.log" >&2
		exit 1
	fi
	sleep 0.5
done
kubeconfig="$root/.cache/localcluster/kubeconfig"

echo "== helm install sluice (deploy/helm/sluice)"
"$helm" install sluice deploy/helm/sluice --kubeconfig "$kubeconfig" --namespace sluice-system --create-namespace \
	-f "$state/values.yaml" >"$state/helm.log" 2>&1 || {
	cat "$state/helm.log" >&2
	exit 1
}

echo "== waiting for the first answer through HAProxy"
for _ in $(seq 1 240); do
	if [[ $(curl -s -o /dev/null -w '%{http_code}' -H 'Host: echo.localhost' "http://$listen/") == 200 ]]; then
		break
	fi
	sleep 0.5
done

kubectl="$SLUICE_KUBE_BIN/kubectl --kubeconfig $kubeconfig"
cat <<MSG

sluice is running, installed with helm.

  curl -H 'Host: echo.localhost' http://$listen/

  HAProxy ($listen) ─► sluice proxy pods ─► echo pods, registered by the controller pods.

  export KUBECONFIG=$kubeconfig
  alias kubectl=$SLUICE_KUBE_BIN/kubectl helm=$helm
  kubectl get nodes,pods -A -o wide
  kubectl -n sluice-system get loadbalancerbindings

  A zero-downtime rollout, and how to watch it:
  helm upgrade sluice deploy/helm/sluice -n sluice-system -f $state/values.yaml --set proxy.logLevel=debug
  kubectl -n sluice-system rollout status deployment/sluice-proxy --watch
  watch "echo 'show servers state sluice' | socat stdio unix-connect:$sock"

  Reload HAProxy (master-worker: new workers, same master; the controller
  adds the servers again, as a reload forgets them):
  echo reload | socat stdio unix-connect:$master

  Logs: $state/{haproxy,cluster,helm}.log, pods (controller, proxies): $root/.cache/localcluster/pods/

Ctrl-C stops everything.
MSG
$kubectl get pods -A -o wide 2>/dev/null | sed 's/^/  /' || true
wait -n "${pids[@]}"
