#!/usr/bin/env bash
# helm.sh installs the pinned Helm 3 from the Go module proxy into
# $SLUICE_CACHE/helm/<version>/ (default ~/.cache/sluice, shared by every
# clone on this machine) and prints the path of the helm binary on stdout;
# progress goes to stderr. Idempotent: builds only when missing.
#
#   helm=$(scripts/helm.sh) && "$helm" version
set -euo pipefail

version=v3.19.5
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
out="$cache/helm/$version"
mkdir -p "$out"

# Several tests may call this at once: one builds, the others wait.
exec 9>"$out/.lock"
flock 9
if [[ ! -x "$out/helm" ]]; then
	echo "helm.sh: building helm $version from the Go module proxy (first time: minutes; cached in $out)" >&2
	start=$(date +%s)
	# Outside any module, so the project's go.mod does not constrain it.
	(cd "$out" && GOBIN="$out/.tmp" GOFLAGS=-trimpath go install -ldflags=-s "helm.sh/helm/v3/cmd/helm@$version")
	mv "$out/.tmp/helm" "$out/helm"
	rmdir "$out/.tmp"
	echo "helm.sh: built in $(($(date +%s) - start))s" >&2
fi
echo "$out/helm"
