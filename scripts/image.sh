#!/usr/bin/env bash
# image.sh is `make image`: the sluice container image built on this
# machine without a network, with buildah from Debian: a static binary on
# an empty base (FROM scratch), non-root, written as an OCI archive.
#
#   scripts/image.sh            # bin/sluice-image.tar (oci-archive), tag ghcr.io/sluice-dev/sluice:VERSION
#   IMAGE=NAME:TAG scripts/image.sh
#
# The Dockerfile builds the same image with Docker (distroless static base).
# Storage: vfs under $SLUICE_CACHE/containers unless CONTAINERS_STORAGE_CONF
# says otherwise, so the overlay driver (not available in every container)
# is never needed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v buildah >/dev/null; then
	echo "image.sh: buildah is missing: scripts/install-deps.sh image" >&2
	exit 1
fi
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
image=${IMAGE:-ghcr.io/sluice-dev/sluice:$version}
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
store=(--storage-driver vfs --root "$cache/containers/storage" --runroot "$cache/containers/run")
mkdir -p bin/image

echo "image.sh: static binary (CGO off) $version" >&2
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version" -o bin/image/sluice ./cmd/sluice
bin/image/sluice version >&2 # smoke test before packaging

ctr=$(buildah "${store[@]}" from scratch)
trap 'buildah "${store[@]}" rm "$ctr" >/dev/null' EXIT
buildah "${store[@]}" copy --chmod 0755 "$ctr" bin/image/sluice /sluice >/dev/null
buildah "${store[@]}" config --entrypoint '["/sluice"]' --cmd version --user 65532:65532 \
	--label org.opencontainers.image.title=sluice \
	--label org.opencontainers.image.version="$version" \
	--label org.opencontainers.image.source=https://github.com/sluice-dev/sluice "$ctr"
rm -f bin/sluice-image.tar
buildah "${store[@]}" commit --quiet --format oci --rm "$ctr" "oci-archive:bin/sluice-image.tar:$image" >/dev/null
trap - EXIT
echo "image.sh: $image in bin/sluice-image.tar ($(du -h bin/sluice-image.tar | cut -f1))" >&2
