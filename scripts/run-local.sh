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
# HTTPS: HAProxy passes TLS through to the proxies (TCP mode), on 443 so
# that the proxies' redirects to https:// land on it.
https_listen=${SLUICE_RUN_HTTPS_ADDRESS:-${listen%:*}:443}

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
kubeconfig="$root/.cache/localcluster/kubeconfig"
cluster_up=false
watcher=
cleanup() {
	# A second Ctrl-C does not cut the stop short (SIGKILL does).
	trap '' INT TERM
	trap - EXIT
	if [[ -n $watcher ]]; then kill "$watcher" 2>/dev/null || true; fi
	echo
	echo "== stopping"
	# The proxies first, while the controller and HAProxy run: scaled to
	# zero, each drains through the handshake (HAProxy lets it go, then it
	# exits), as in a rollout, instead of being killed with the cluster.
	if $cluster_up; then
		k="$SLUICE_KUBE_BIN/kubectl --kubeconfig $kubeconfig -n sluice-system"
		if $k scale deployment/sluice-proxy --replicas=0 >/dev/null 2>&1; then
			for _ in $(seq 1 120); do
				[[ -z $($k get pods -l app.kubernetes.io/name=sluice-proxy -o name 2>/dev/null) ]] && break
				sleep 0.5
			done
			if [[ -z $($k get pods -l app.kubernetes.io/name=sluice-proxy -o name 2>/dev/null) ]]; then
				echo "proxies drained and stopped"
			else
				echo "proxies still stopping after 60 s; stopping the cluster" >&2
			fi
		fi
	fi
	# Then the cluster (it stops the other pods), then HAProxy.
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
# Ctrl-C, or SIGINT/SIGTERM from another shell: a clean stop, exit 0.
trap cleanup EXIT
trap 'cleanup; exit 0' INT TERM
# `kill -INT` of make (not of its process group) reaches only make, which
# then waits for us; it passes on SIGTERM only. So when make, our parent,
# has taken a SIGINT (its handler resets SIGINT to the default: the bit
# leaves SigCgt), stop as if the SIGINT were ours.
if [[ $(cat "/proc/$PPID/comm" 2>/dev/null) == make ]]; then
	make_pid=$PPID
	int_caught() {
		local m
		m=$(awk '/^SigCgt:/ {print $2}' "/proc/$make_pid/status" 2>/dev/null) || return 1
		[[ -n $m ]] && (((16#$m >> 1) & 1))
	}
	if int_caught; then
		(
			while kill -0 $$ 2>/dev/null; do
				if ! int_caught; then
					kill -INT $$
					exit 0
				fi
				sleep 0.5
			done
		) &
		watcher=$!
	fi
fi

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
    # keep idle client connections through a reload (docs/guides/haproxy.md)
    option idle-close-on-response
frontend fe
    bind $listen
    default_backend sluice
backend sluice
    balance roundrobin
    option httpchk GET /healthz
frontend fe-tls
    mode tcp
    bind $https_listen
    default_backend sluice-tls
backend sluice-tls
    mode tcp
    balance roundrobin
    # A TCP connect check: bindings of pod IPs check the traffic port, and
    # HAProxy's HTTP check would speak plain HTTP to the TLS port.
CFG
# Master-worker (-W) with a master CLI (-S): `reload` there starts new
# workers and keeps this process.
haproxy -W -db -S "$master" -f "$state/haproxy.cfg" >"$state/haproxy.log" 2>&1 &
pids+=($!)

# What the cluster gets at start: the sample app, and a certificate for
# its TLS host (self-signed, made here). sluice comes with helm.
cp deploy/local/app.yaml "$state/apply/"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
	-subj /CN=secure.localhost -addext subjectAltName=DNS:secure.localhost \
	-keyout "$state/tls.key" -out "$state/tls.crt" 2>/dev/null
cat >"$state/apply/tls-secret.yaml" <<YAML
apiVersion: v1
kind: Secret
metadata: {name: secure-tls, namespace: demo}
type: kubernetes.io/tls
data:
  tls.crt: $(base64 -w0 "$state/tls.crt")
  tls.key: $(base64 -w0 "$state/tls.key")
YAML
# The chart's values for this machine: pods of a simulated node share its
# network namespace, so every process listens on its pod IP; the pods see
# the host's files, so the controller reaches HAProxy's unix socket.
cat >"$state/values.yaml" <<YAML
listenOnPodIP: true
controller: {logFormat: text}
proxy: {httpsPort: 8443, drainMaxWaitSeconds: 30, shutdownTimeoutSeconds: 10, terminationMarginSeconds: 20, logFormat: text}
bindings:
  - name: haproxy
    provider:
      haproxy: {runtimeAPI: "unix://$sock", backend: sluice}
    drain: {handshake: true}
    publish: [{ip: "${listen%:*}"}]
  # The same proxies' HTTPS port in the TCP backend.
  - name: haproxy-tls
    port: https
    provider:
      haproxy: {runtimeAPI: "unix://$sock", backend: sluice-tls}
    drain: {handshake: true}
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
cluster_up=true

echo "== helm install sluice (deploy/helm/sluice)"
"$helm" install sluice deploy/helm/sluice --kubeconfig "$kubeconfig" --namespace sluice-system --create-namespace \
	-f "$state/values.yaml" >"$state/helm.log" 2>&1 || {
	cat "$state/helm.log" >&2
	exit 1
}

echo "== waiting for the first answer through HAProxy"
answered=false
for _ in $(seq 1 240); do
	if [[ $(curl -s -o /dev/null -w '%{http_code}' -H 'Host: echo.localhost' "http://$listen/") == 200 ]]; then
		answered=true
		break
	fi
	sleep 0.5
done
if ! $answered; then
	echo "no request succeeded through HAProxy ($listen) in 2 minutes: sluice is NOT serving." >&2
	echo "HAProxy's servers:" >&2
	echo "show servers state sluice" | socat stdio "unix-connect:$sock" 2>&1 | tail -5 >&2 || true
	"$SLUICE_KUBE_BIN/kubectl" --kubeconfig "$kubeconfig" get pods -A -o wide >&2 || true
	echo "Logs: $state/{haproxy,cluster,helm}.log and $root/.cache/localcluster/pods/" >&2
	exit 1
fi
https_port=${https_listen##*:} https_ip=${https_listen%:*}
for _ in $(seq 1 120); do
	if [[ $(curl -s -o /dev/null -w '%{http_code}' --cacert "$state/tls.crt" --resolve "secure.localhost:$https_port:$https_ip" "https://secure.localhost:$https_port/") == 200 ]]; then
		answered=https
		break
	fi
	sleep 0.5
done
if [[ $answered != https ]]; then
	echo "HTTP works, but no HTTPS request succeeded through HAProxy ($https_listen) in a minute." >&2
	echo "show servers state sluice-tls" | socat stdio "unix-connect:$sock" 2>&1 | tail -5 >&2 || true
	exit 1
fi

kubectl="$SLUICE_KUBE_BIN/kubectl --kubeconfig $kubeconfig"
cat <<MSG

sluice is running, installed with helm.

  curl -H 'Host: echo.localhost' http://$listen/
  curl --cacert $state/tls.crt --resolve secure.localhost:${https_listen##*:}:${https_listen%:*} https://secure.localhost:${https_listen##*:}/
  curl -i -H 'Host: secure.localhost' http://$listen/      # 308 to https://secure.localhost/

  HAProxy ($listen) ─► sluice proxy pods ─► echo pods, registered by the controller pods.

  export KUBECONFIG=$kubeconfig
  alias kubectl=$SLUICE_KUBE_BIN/kubectl helm=$helm
  kubectl get nodes,pods -A -o wide
  kubectl -n sluice-system get loadbalancerbindings
  kubectl -n sluice-system logs deploy/sluice-proxy -f

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
