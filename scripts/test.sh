#!/usr/bin/env bash
# test.sh runs every sluice test, the way CI does (`make test`):
#   1. static checks: gofmt, go vet (all build tags);
#   2. unit tests: go test ./... (quick; fakes allowed; fuzz seed corpora);
#   3. integration tests (build tag `integration`): real HAProxy, real sluice
#      processes on loopback;
#   4. end-to-end tests (build tag `e2e`): a real kube-apiserver,
#      controller-manager and scheduler with simulated nodes in network
#      namespaces. Needs root; the Kubernetes binaries are built once and cached.
# Select stages with TEST_STAGES="unit integration e2e" (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."

stages=${TEST_STAGES:-"static unit integration e2e"}
want() { [[ " $stages " == *" $1 "* ]]; }

# Packages holding tests with the given build tag.
tagged() {
	grep -rl --include='*_test.go' "^//go:build.*\b$1\b" . 2>/dev/null |
		xargs -r -n1 dirname | sort -u | sed 's|^\./|./|'
}

start=$(date +%s)
stamp() { echo "== $1 ($(($(date +%s) - start))s)"; }

scripts/install-deps.sh

# helm (pinned, from the Go module proxy; about 5 min of CPU cold, cached
# after) is needed by test/chart (unit stage) and TestHelm (e2e); the
# Kubernetes binaries (about 10 min cold, cached after) only by the e2e
# stage. Both build in the background while the static checks run (a cold
# run spends much of that time fetching modules, not compiling): helm is
# waited for before the unit stage, Kubernetes before the integration
# stage, whose load tests must not compete with a compiler for the 2 cores.
kube_pid=""
helm_pid=""
kube_out=$(mktemp)
kube_log=$(mktemp)
helm_log=$(mktemp)
# Their own process groups (setsid), so an early exit stops the compilers too.
trap 'rm -f "$kube_out" "$kube_log" "$helm_log"; for p in $kube_pid $helm_pid; do kill -- "-$p" 2>/dev/null; done; true' EXIT
setsid scripts/helm.sh >/dev/null 2>"$helm_log" &
helm_pid=$!
if want e2e && [[ $(id -u) == 0 ]]; then
	setsid scripts/kube-binaries.sh >"$kube_out" 2>"$kube_log" &
	kube_pid=$!
fi
# wait_build NAME PIDVAR LOG: wait for the background build whose pid is in
# the variable PIDVAR and clear it (then the EXIT trap leaves it alone); stop
# with LOG shown if the build failed. Returns 1 if there was none to wait for.
wait_build() {
	local pid=${!2} rc=0
	[[ -n "$pid" ]] || return 1
	stamp "waiting for $1"
	wait "$pid" || rc=$?
	printf -v "$2" ''
	if ((rc != 0)); then
		cat "$3" >&2
		echo "building $1 failed" >&2
		exit 1
	fi
}
wait_helm() { wait_build helm helm_pid "$helm_log" || true; }
wait_kube() {
	wait_build "the Kubernetes binaries" kube_pid "$kube_log" || return 0
	SLUICE_KUBE_BIN=$(cat "$kube_out")
	export SLUICE_KUBE_BIN
}

if want static; then
	stamp "static checks"
	unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
	if [[ -n "$unformatted" ]]; then
		echo "gofmt needed on:"; echo "$unformatted"; exit 1
	fi
	# One pass over every file: no file excludes a tag that another needs.
	go vet -tags integration,e2e,image,conformance ./...
fi

wait_helm

if want unit; then
	stamp "unit tests"
	go test -count=1 ./...
	# The server's tests run with the fast HTTP/1.1 loop (the default);
	# once more with net/http serving plain HTTP as well.
	go test -count=1 ./internal/server -args -fast-http1=false
fi

wait_kube

if want integration; then
	pkgs=$(tagged integration)
	if [[ -n "$pkgs" ]]; then
		stamp "integration tests: $(echo $pkgs)"
		# One package at a time: load tests must not compete for the 2 cores.
		go test -count=1 -p 1 -tags integration -timeout 15m $pkgs
	fi
fi

if want e2e; then
	pkgs=$(tagged e2e)
	if [[ -n "$pkgs" ]]; then
		if [[ $(id -u) != 0 ]]; then
			echo "e2e tests need root (network namespaces); run as root or set TEST_STAGES" >&2
			exit 1
		fi
		stamp "e2e tests: $(echo $pkgs)"
		# One package at a time: each starts its own control plane. Each
		# case appends its summary line to SLUICE_E2E_SUMMARY (go test shows
		# a passing package's output only with -v): printed here, pass or fail.
		summary=$(mktemp)
		rc=0
		# The conformance tag adds the Gateway API conformance suite
		# (TestConformance, about 70 s); its report goes to a temporary
		# file, not over the committed conformance/report.yaml.
		report=$(mktemp)
		SLUICE_E2E_SUMMARY=$summary SLUICE_CONFORMANCE_REPORT=$report go test -count=1 -p 1 -tags e2e,conformance -timeout 45m $pkgs || rc=$?
		rm -f "$report"
		stamp "e2e summary"
		cat "$summary"
		rm -f "$summary"
		((rc == 0)) || exit "$rc"
	fi
fi
stamp "all tests passed"
