#!/usr/bin/env bash
# install-deps.sh installs the Debian packages sluice's tests, `make run` and
# `make bench` need. Idempotent: installs only what is missing.
#
#   scripts/install-deps.sh            # test + run dependencies
#   scripts/install-deps.sh bench      # also nginx, wrk and h2load (nghttp2-client)
#   scripts/install-deps.sh image      # also buildah, podman and crun (make image)
#
# helm is not a Debian package here: scripts/helm.sh builds the pinned
# version from the Go module proxy into the cache.
set -euo pipefail

want=(haproxy etcd-server socat iproute2 util-linux bind9 bind9-dnsutils)
if [[ "${1:-}" == "bench" ]]; then
	want+=(nginx wrk nghttp2-client)
fi
if [[ "${1:-}" == "image" ]]; then
	want+=(buildah podman crun)
fi

missing=()
for p in "${want[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done
if ((${#missing[@]} == 0)); then
	exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2
# Debian starts services on install; we never want the system instances.
printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
$sudo chmod +x /usr/sbin/policy-rc.d
trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
