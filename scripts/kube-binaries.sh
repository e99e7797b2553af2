#!/usr/bin/env bash
# kube-binaries.sh builds kube-apiserver, kube-controller-manager,
# kube-scheduler and kubectl from the k8s.io/kubernetes version pinned in
# tools/kube/go.mod, into $SLUICE_CACHE/kube/<version>/ (default
# ~/.cache/sluice, outside the work tree so every clone on this machine shares
# it). Rebuilds only what is missing for the pinned version. Prints the
# directory holding the binaries on stdout; progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
version=$(awk '$1 == "k8s.io/kubernetes" || $1 == "require" && $2 == "k8s.io/kubernetes" {print $NF}' "$root/tools/kube/go.mod" | head -1)
if [[ -z "$version" ]]; then
	echo "kube-binaries: cannot read the k8s.io/kubernetes pin from tools/kube/go.mod" >&2
	exit 1
fi
out="$cache/kube/$version"
mkdir -p "$out"

# Test binaries of several packages may call this at once: one builds, the
# others wait for it and then find everything in place.
exec 9>"$out/.lock"
flock 9

cd "$root/tools/kube"
for bin in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	if [[ -x "$out/$bin" ]]; then
		continue
	fi
	echo "kube-binaries: building $bin $version (first time: minutes; cached in $out)" >&2
	start=$(date +%s)
	# Progress: a dot every 15 s so a long cold build does not look hung.
	(while sleep 15; do printf '.' >&2; done) &
	ticker=$!
	if ! go build -trimpath -ldflags=-s -o "$out/$bin.tmp" "k8s.io/kubernetes/cmd/$bin"; then
		kill "$ticker" 2>/dev/null || true
		echo >&2
		echo "kube-binaries: building $bin failed" >&2
		exit 1
	fi
	kill "$ticker" 2>/dev/null || true
	mv "$out/$bin.tmp" "$out/$bin"
	echo " done in $(($(date +%s) - start))s" >&2
done
echo "$out"
