#!/usr/bin/env bash
# run-local.sh is `make run`: the whole sluice stack on this machine.
#
#   curl ─► HAProxy 127.0.0.1:8080 ─► sluice proxy pods (10.244.x.y) ─► echo pods
#                ▲ runtime API                 ▲ informers
#          sluice controller (host) ◄──── local Kubernetes cluster
#
# The local cluster (test/cluster) is a real kube-apiserver,
# controller-manager and scheduler with three simulated nodes in two zones
# (network namespaces; root needed). The controller registers the proxy pods
# in HAProxy's backend, gates their readiness on HAProxy's health checks and
# drains them on deletion. Ctrl-C stops everything.
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
echo "== Kubernetes binaries (built once, cached)"
SLUICE_KUBE_BIN=$(scripts/kube-binaries.sh)
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
frontend fe
    bind $listen
    default_backend sluice
backend sluice
    balance roundrobin
    option httpchk GET /healthz
CFG
haproxy -db -f "$state/haproxy.cfg" >"$state/haproxy.log" 2>&1 &
pids+=($!)

# What the cluster gets: CRD, namespace, RBAC, IngressClass, the proxies,
# the sample app, and a binding to this HAProxy.
cp deploy/crds/*.yaml deploy/namespace.yaml deploy/rbac.yaml deploy/ingressclass.yaml deploy/local/*.yaml "$state/apply/"
cat >"$state/apply/binding.yaml" <<YAML
apiVersion: sluice.dev/v1alpha1
kind: LoadBalancerBinding
metadata:
  name: haproxy
  namespace: sluice-system
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: sluice-proxy}
  port: http
  provider:
    haproxy:
      runtimeAPI: unix://$sock
      backend: sluice
  publish:
  - ip: ${listen%:*}
YAML

echo "== local cluster (3 nodes, 2 zones)"
bin/localcluster --dir "$root/.cache/localcluster" --image sluice="$root/bin/sluice" --image echo="$root/bin/echo" \
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

echo "== sluice controller (host process)"
bin/sluice controller --kubeconfig "$kubeconfig" --leader-election-namespace sluice-system \
	--metrics-address 127.0.0.1:9091 --health-address 127.0.0.1:9092 >"$state/controller.log" 2>&1 &
pids+=($!)

echo "== waiting for the first answer through HAProxy"
for _ in $(seq 1 240); do
	if [[ $(curl -s -o /dev/null -w '%{http_code}' -H 'Host: echo.localhost' "http://$listen/") == 200 ]]; then
		break
	fi
	sleep 0.5
done

kubectl="$SLUICE_KUBE_BIN/kubectl --kubeconfig $kubeconfig"
cat <<MSG

sluice is running.

  curl -H 'Host: echo.localhost' http://$listen/

  HAProxy ($listen) ─► sluice proxy pods ─► echo pods, registered by the controller.

  export KUBECONFIG=$kubeconfig
  alias kubectl=$SLUICE_KUBE_BIN/kubectl
  kubectl get nodes,pods -A -o wide
  kubectl -n sluice-system get loadbalancerbindings
  kubectl -n sluice-system rollout restart deployment/sluice-proxy   # a zero-downtime rollout
  echo 'show servers state sluice' | socat stdio unix-connect:$sock

  Logs: $state/{haproxy,controller,cluster}.log, pods: $root/.cache/localcluster/pods/
  Controller metrics: http://127.0.0.1:9091/metrics

Ctrl-C stops everything.
MSG
$kubectl get pods -A -o wide 2>/dev/null | sed 's/^/  /' || true
wait -n "${pids[@]}"
