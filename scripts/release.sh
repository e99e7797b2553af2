#!/usr/bin/env bash
# release.sh is `make release VERSION=x.y.z`: the artifacts of one sluice
# release, all in dist/ (gitignored):
#
#   dist/sluice-VERSION-linux-ARCH        the static binary (CGO off), version stamped
#   dist/sluice-image-VERSION.tar         the image as an OCI archive, tagged
#                                         ghcr.io/sluice-dev/sluice:VERSION (scripts/image.sh, buildah)
#   dist/sluice-VERSION.tgz               the Helm chart (helm package): version and
#                                         appVersion VERSION, so its image tag defaults to VERSION
#   dist/SHA256SUMS                       sha256sum of each of the above
#
#   VERSION=0.2.0 scripts/release.sh
#   VERSION=0.2.0 SLUICE_RELEASE_PARTS=chart DIST=/tmp/d scripts/release.sh   # the chart only (tests)
#
# VERSION is a semantic version without a leading "v" (x.y.z, optionally
# -prerelease and +build); the git tag is vVERSION. SLUICE_RELEASE_PARTS is a
# comma-separated subset of binary,image,chart (default: all three; image
# needs binary). IMAGE_REPOSITORY changes the image name (default
# ghcr.io/sluice-dev/sluice, the chart's image.repository).
set -euo pipefail
cd "$(dirname "$0")/.."

version=${VERSION:-}
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$'
if [[ ! $version =~ $semver ]]; then
	echo "release.sh: VERSION must be a semantic version like 0.2.0 or 1.0.0-rc.1 (no leading v), not \"$version\"" >&2
	exit 2
fi
parts=${SLUICE_RELEASE_PARTS:-binary,image,chart}
want() { [[ ",$parts," == *",$1,"* ]]; }
for p in ${parts//,/ }; do
	case $p in binary | image | chart) ;; *)
		echo "release.sh: SLUICE_RELEASE_PARTS: unknown part \"$p\" (binary, image, chart)" >&2
		exit 2
		;;
	esac
done
if want image && ! want binary; then
	echo "release.sh: the image part needs the binary part" >&2
	exit 2
fi
dist=${DIST:-dist}
repo=${IMAGE_REPOSITORY:-ghcr.io/sluice-dev/sluice}
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain 2>/dev/null) ]]; then
	commit+=-dirty
	echo "release.sh: warning: the work tree has uncommitted changes (commit $commit)" >&2
fi
if ! grep -q "^## \(\[\)\?$version\b" CHANGELOG.md; then
	echo "release.sh: warning: CHANGELOG.md has no \"## $version\" section yet (move \"## Unreleased\" under it)" >&2
fi
mkdir -p "$dist"
artifacts=()

if want binary; then
	arch=$(go env GOARCH)
	bin=sluice-$version-linux-$arch
	echo "release.sh: building $dist/$bin" >&2
	CGO_ENABLED=0 GOOS=linux go build -trimpath \
		-ldflags "-s -w -X sluice.dev/sluice/internal/version.Version=$version -X sluice.dev/sluice/internal/version.Commit=$commit" \
		-o "$dist/$bin" ./cmd/sluice
	"$dist/$bin" version >&2
	artifacts+=("$bin")
fi

if want image; then
	echo "release.sh: building the image $repo:$version" >&2
	VERSION=$version IMAGE=$repo:$version IMAGE_OUT="$dist/sluice-image-$version.tar" IMAGE_BINARY="$dist/$bin" scripts/image.sh
	artifacts+=("sluice-image-$version.tar")
fi

if want chart; then
	helm=$(scripts/helm.sh)
	"$helm" lint --strict deploy/helm/sluice >&2
	rm -f "$dist/sluice-$version.tgz"
	"$helm" package deploy/helm/sluice --version "$version" --app-version "$version" --destination "$dist" >&2
	artifacts+=("sluice-$version.tgz")
fi

(cd "$dist" && sha256sum "${artifacts[@]}" >SHA256SUMS)
echo "release.sh: sluice $version in $dist/:" >&2
(cd "$dist" && ls -l "${artifacts[@]}" SHA256SUMS >&2 && cat SHA256SUMS >&2)
