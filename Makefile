# sluice — the two commands that matter: `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
BIN := bin
# VERSION: a release's semantic version (make release VERSION=0.2.0), else
# the git description (v0.2.0-3-gabc1234-dirty); stamped into the binary
# with the commit (internal/version, `sluice version`).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X sluice.dev/sluice/internal/version.Version=$(VERSION) -X sluice.dev/sluice/internal/version.Commit=$(COMMIT)
FUZZTIME ?= 15s

.PHONY: all build run run-manifests test conformance test-unit test-race fuzz lint bench bench-quick generate docs helm image image-test release clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/sluice ./cmd/sluice
	$(GO) build -o $(BIN)/echo ./test/echo

## run: a local cluster (real control plane, 3 simulated nodes), sluice and a sample app on 127.0.0.1:8080 (root)
run: build
	scripts/run-local.sh

## run-manifests: sluice proxy on the example manifests, no cluster and no root needed
run-manifests: build
	scripts/run-manifests.sh

## test: every test suite (static checks, unit, integration with real HAProxy, e2e on the local cluster)
test:
	scripts/test.sh

## conformance: the official Gateway API conformance suite (GATEWAY-HTTP, GATEWAY-GRPC) on the local cluster (root); writes conformance/report.yaml
conformance:
	$(GO) test -count=1 -tags e2e,conformance -timeout 60m -run '^TestConformance$$' -v ./test/e2e/

test-unit:
	$(GO) test ./...

test-race:
	$(GO) test -race -count=1 ./...

## fuzz: run every native fuzz target for FUZZTIME each
fuzz:
	scripts/fuzz.sh $(FUZZTIME)

lint:
	gofmt -l $$(git ls-files '*.go')
	$(GO) vet -tags integration,e2e,image ./...

bench:
	scripts/bench.sh

# One round against HAProxy in under two minutes: a regression guard (bench/README.md).
bench-quick:
	scripts/bench.sh quick

## generate: CRDs and deepcopy (controller-gen), then deploy/*.yaml and the chart's crds/ from the chart, then the reference docs
generate:
	$(GO) generate ./...
	scripts/generate-deploy.sh
	$(MAKE) docs

## docs: the generated reference, docs/reference/{flags,annotations,crds,metrics,events}.md, from the code
docs:
	$(GO) run ./tools/docgen
	$(GO) test -count=1 ./cmd/sluice -run TestFlagReference -update-reference

## image: the container image as an OCI archive, bin/sluice-image.tar (buildah, offline, FROM scratch)
image:
	scripts/install-deps.sh image
	scripts/image.sh

## release: VERSION=x.y.z: the binary, the image archive, the packaged chart and SHA256SUMS in dist/
release:
	@if [ "$(origin VERSION)" != "command line" ] && [ "$(origin VERSION)" != "environment" ]; then echo "make release needs VERSION=x.y.z" >&2; exit 2; fi
	scripts/install-deps.sh image
	VERSION=$(VERSION) scripts/release.sh

## image-test: build the image and run it with podman (skips where podman cannot run containers)
image-test:
	scripts/install-deps.sh image
	$(GO) test -count=1 -tags image -v ./test/image/

## helm: the pinned helm (from the Go module proxy) in the cache; prints its path
helm:
	@scripts/helm.sh

clean:
	rm -rf $(BIN) dist
