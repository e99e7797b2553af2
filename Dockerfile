# The sluice image for users with Docker: a static binary on distroless
# static, non-root. `make image` builds the same image on this machine
# without a network (buildah, FROM scratch): scripts/image.sh.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) --build-arg COMMIT=$(git rev-parse HEAD) -t ghcr.io/sluice-dev/sluice:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
	-ldflags "-s -w -X sluice.dev/sluice/internal/version.Version=${VERSION} -X sluice.dev/sluice/internal/version.Commit=${COMMIT}" \
	-o /out/sluice ./cmd/sluice
# Smoke test: the binary runs on its own.
RUN ["/out/sluice", "version"]

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sluice /sluice
USER 65532:65532
ENTRYPOINT ["/sluice"]
CMD ["version"]
