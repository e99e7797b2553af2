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
missing=()
for bin in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
	[[ -x "$out/$bin" ]] || missing+=("$bin")
done
if ((${#missing[@]} > 0)); then
	echo "kube-binaries: building ${missing[*]} $version (first time: minutes; cached in $out)" >&2
	start=$(date +%s)
	# Progress: a dot every 15 s so a long cold build does not look hung.
	(while sleep 15; do printf '.' >&2; done) &
	ticker=$!
	# One go command for all of them: the packages they share compile
	# once, and the links (single-threaded each) overlap with the rest.
	pkgs=()
	for bin in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$bin"); done
	rm -rf "$out/.tmp" && mkdir -p "$out/.tmp"
	if ! go build -trimpath -ldflags=-s -o "$out/.tmp/" "${pkgs[@]}"; then
		kill "$ticker" 2>/dev/null || true
		echo >&2
		echo "kube-binaries: building ${missing[*]} failed" >&2
		exit 1
	fi
	kill "$ticker" 2>/dev/null || true
	for bin in "${missing[@]}"; do
		mv "$out/.tmp/$bin" "$out/$bin"
	done
	rmdir "$out/.tmp"
	echo " done in $(($(date +%s) - start))s" >&2
fi
echo "$out"
