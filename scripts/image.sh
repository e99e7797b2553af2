#!/usr/bin/env bash
# image.sh is `make image`: the sluice container image built on this
# machine without a network, with buildah from Debian: a static binary on
# an empty base (FROM scratch), non-root, written as an OCI archive.
#
#   scripts/image.sh            # bin/sluice-image.tar (oci-archive), tag ghcr.io/sluice-dev/sluice:VERSION
#   IMAGE=NAME:TAG scripts/image.sh
#   IMAGE_OUT=FILE IMAGE_BINARY=PATH scripts/image.sh   # another archive; a prebuilt static binary (scripts/release.sh)
#
# VERSION defaults to `git describe --tags --always --dirty`; the binary is
# stamped with it and the commit (internal/version).
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
out=${IMAGE_OUT:-bin/sluice-image.tar}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
cache=${SLUICE_CACHE:-$HOME/.cache/sluice}
store=(--storage-driver vfs --root "$cache/containers/storage" --runroot "$cache/containers/run")
mkdir -p bin/image

if [[ -n ${IMAGE_BINARY:-} ]]; then
	cp "$IMAGE_BINARY" bin/image/sluice
else
	echo "image.sh: static binary (CGO off) $version" >&2
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X sluice.dev/sluice/internal/version.Version=$version -X sluice.dev/sluice/internal/version.Commit=$commit" \
		-o bin/image/sluice ./cmd/sluice
fi
bin/image/sluice version >&2 # smoke test before packaging

ctr=$(buildah "${store[@]}" from scratch)
trap 'buildah "${store[@]}" rm "$ctr" >/dev/null' EXIT
buildah "${store[@]}" copy --chmod 0755 "$ctr" bin/image/sluice /sluice >/dev/null
buildah "${store[@]}" config --entrypoint '["/sluice"]' --cmd version --user 65532:65532 \
	--label org.opencontainers.image.title=sluice \
	--label org.opencontainers.image.version="$version" \
	--label org.opencontainers.image.source=https://github.com/sluice-dev/sluice "$ctr"
rm -f "$out"
buildah "${store[@]}" commit --quiet --format oci --rm "$ctr" "oci-archive:$out:$image" >/dev/null
trap - EXIT
echo "image.sh: $image in $out ($(du -h "$out" | cut -f1))" >&2
