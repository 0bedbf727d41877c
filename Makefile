# llama-stack-controller
SHELL := /usr/bin/env bash
GO ?= go
BIN_DIR ?= bin
# `make image PUSH=registry/repo[:tag]` also pushes the image index there.
PUSH ?=
# Every timestamp in the image: the commit's time, so that a commit gives one digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# `make release`: the registry and organisation the image goes to ($(REGISTRY)/llama-stack-controller:$(VERSION))
# and the directory of install.yaml and the chart package.
REGISTRY ?=
DIST_DIR ?= dist
# `make manifests`, `make deploy`, `make image-archive`: the controller's image. `make deploy` pushes to it
# unless PUSH_IMAGE=false (an image loaded into the cluster's nodes with image-archive).
IMAGE ?=
PUSH_IMAGE ?= true
# `make deploy`: the kubectl command (and flags, e.g. "kubectl --context kind-kind") it applies with.
KUBECTL ?= kubectl
# `make image-archive`: the one platform of the tarball; the cluster nodes' (linux/arm64 for arm64 nodes).
ARCHIVE_PLATFORM ?= linux/$(shell $(GO) env GOARCH)
# Extra arguments for `make run`, e.g. ARGS="--namespace demo -v=4".
ARGS ?=
# The version stamped into the binary and the image (status.version.operatorVersion;
# $OPERATOR_VERSION at run time wins over it). Outside a git checkout: the binary's default.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := -X github.com/llamastack/llama-stack-controller/cmd/controller/app.version=$(VERSION)

.PHONY: all generate verify build test test-unit test-image test-e2e fuzz bench cluster vet run image image-archive manifests release deploy clean tools

all: build

## generate: regenerate deepcopy, clientset, listers, informers, apply configurations and the CRD
generate:
	hack/update-codegen.sh

## verify: fail when generated code or the CRD is stale, or code is not gofmt'ed
verify:
	hack/verify-codegen.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## build: build the controller binary (and the local control plane launcher) into bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN_DIR)/llama-stack-controller ./cmd/controller
	$(GO) build -o $(BIN_DIR)/localcluster ./test/localcluster/cmd/localcluster

vet:
	$(GO) vet ./...

## test: the unit tests, the CRD admission checks and the end-to-end suite on a local control plane
test: test-unit test-e2e

## test-unit: vet, every unit test, the CRD admission checks and the image's tests (no API server needed)
test-unit: vet tools
	$(GO) test ./...
	hack/test-crd.sh
	$(MAKE) --no-print-directory test-image

## test-image: the image builder's tests (hack/image, a module of its own): two builds give one digest; the
## index pushed to an in-process registry and pulled back by digest holds both platforms and a binary that runs;
## make release run twice against that registry pushes one digest, which install.yaml and the chart name
test-image:
	$(GO) -C hack/image vet ./...
	$(GO) -C hack/tools vet ./release/...
	$(GO) -C hack/tools test -count=1 ./release/...
	$(GO) -C hack/image test -count=1 -timeout 25m ./...

## test-e2e: the end-to-end suite on a real local control plane (built on first use, ~16 min, then cached)
test-e2e: tools
	$(GO) test -p 1 -tags e2e -count=1 -timeout 45m ./test/...

## tools: promtool and prometheus from Debian's package prometheus, when missing (the monitoring tests)
tools:
	hack/install-tools.sh

## fuzz: run each fuzz target for FUZZTIME (default 30s), then check every builder input with the
## API's own validators and the CRD (hack/fuzz.sh, hack/validate); plain go test runs the seeds
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

## cluster: build the local control plane binaries (etcd, kube-apiserver, ..., kwok) into the cache
cluster:
	hack/cluster/build.sh

## bench: the benchmark suite (Go benchmarks, then the load driver on local control planes, probes off and on,
## N = 50, 200 and 1,000; about 33 min once the control plane is built): prints the table of BENCHMARKS.md and
## leaves it, the cost curve's plot, logs and heap profiles in bin/bench. LLSC_BENCH_QUICK=1 is a short run.
bench:
	GO=$(GO) $(GO) test -tags bench -count=1 -timeout 90m -v -run '^TestBench$$' ./test/bench

## run: run the controller (restarted with a backoff if it exits on its own; metrics and health on free
## 127.0.0.1 ports); on a local control plane unless $$KUBECONFIG names a cluster
RUN_ENV = BIN=$(BIN_DIR)/llama-stack-controller LOCALCLUSTER=$(BIN_DIR)/localcluster
run: build
	@if [[ -n "$${KUBECONFIG:-}" ]]; then \
	  $(RUN_ENV) hack/run-local.sh $(ARGS); \
	else \
	  $(BIN_DIR)/localcluster run -- env LLSC_LOCAL=1 $(RUN_ENV) hack/run-local.sh $(ARGS); \
	fi

## image: build the controller's OCI image index (linux/amd64, linux/arm64) from Go alone, no container engine,
## into the OCI layout $(BIN_DIR)/image/oci, and print its digest; PUSH=registry/repo[:tag] pushes it too and
## prints the reference by digest. Reproducible: the same commit (and Go toolchain) gives the same digest.
IMAGE_TOOL = $(GO) -C hack/image run . -root "$(CURDIR)" -go "$(GO)" -version "$(VERSION)" -source-date-epoch "$(SOURCE_DATE_EPOCH)"
image:
	@rm -f $(BIN_DIR)/image/pushed
	$(IMAGE_TOOL) -out "$(abspath $(BIN_DIR))/image/oci" \
	  $(if $(PUSH),-push "$(PUSH)" -ref-file "$(abspath $(BIN_DIR))/image/pushed")

## image-archive: the image of one platform (ARCHIVE_PLATFORM, default the machine's) as a docker-archive tarball tagged
## IMAGE (default llama-stack-controller:dev) in $(BIN_DIR)/image/llama-stack-controller.tar, for
## `kind load image-archive` or `minikube image load`
image-archive:
	$(IMAGE_TOOL) -platforms "$(ARCHIVE_PLATFORM)" -archive "$(abspath $(BIN_DIR))/image/llama-stack-controller.tar" \
	  -archive-tag "$(or $(IMAGE),llama-stack-controller:dev)"

# hack/tools/release renders artifacts/ with the controller's image (and packages the chart).
RELEASE_TOOL = $(GO) -C hack/tools run ./release -root "$(CURDIR)" -source-date-epoch "$(SOURCE_DATE_EPOCH)"

## manifests: write $(DIST_DIR)/install.yaml, what artifacts/ installs in one file, with the image IMAGE
manifests:
	@[[ -n "$(IMAGE)" ]] || { echo "manifests: IMAGE=repository[:tag][@sha256:digest] is needed" >&2; exit 1; }
	$(RELEASE_TOOL) -image "$(IMAGE)" -version "$(VERSION)" -out "$(abspath $(DIST_DIR))"

## release: push the image index to $(REGISTRY)/llama-stack-controller:$(VERSION), then write $(DIST_DIR)/install.yaml
## with the image by digest and $(DIST_DIR)/llama-stack-controller-X.Y.Z.tgz, the chart with the same digest
## A release is built from a clean tree (ALLOW_DIRTY=1 lifts that, for tests) with VERSION given: semantic
## versioning's vX.Y.Z[-pre], as Helm takes a chart's version; all is checked before anything is built.
release:
	@[[ "$(origin VERSION)" == "command line" || "$(origin VERSION)" == environment ]] && \
	  [[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?$$ ]] || \
	  { echo "release: VERSION=vX.Y.Z[-pre] is needed (semantic versioning), got '$(VERSION)'" >&2; exit 1; }
	@[[ -n "$(REGISTRY)" ]] || { echo "release: REGISTRY=registry/org is needed" >&2; exit 1; }
	@[[ "$(ALLOW_DIRTY)" == 1 || -z "$$(git status --porcelain)" ]] || \
	  { echo "release: the working tree has changes (git status): a release is built from a commit" >&2; exit 1; }
	rm -f $(DIST_DIR)/install.yaml $(DIST_DIR)/llama-stack-controller-*.tgz
	$(MAKE) --no-print-directory image PUSH="$(patsubst %/,%,$(REGISTRY))/llama-stack-controller:$(VERSION)"
	$(RELEASE_TOOL) -image "$$(cat $(BIN_DIR)/image/pushed)" -version "$(VERSION)" -chart -out "$(abspath $(DIST_DIR))"

## deploy: push the image to IMAGE (unless PUSH_IMAGE=false), write $(BIN_DIR)/deploy/install.yaml with it (by
## digest when pushed) and apply it server-side with kubectl to the current context
deploy:
	@[[ -n "$(IMAGE)" ]] || { echo "deploy: IMAGE=registry/repo:tag is needed" >&2; exit 1; }
	@if [[ "$(PUSH_IMAGE)" != false ]]; then $(MAKE) --no-print-directory image PUSH="$(IMAGE)"; fi
	$(RELEASE_TOOL) -version "$(VERSION)" -out "$(abspath $(BIN_DIR))/deploy" \
	  -image "$$(if [[ "$(PUSH_IMAGE)" != false ]]; then cat $(BIN_DIR)/image/pushed; else echo "$(IMAGE)"; fi)"
	$(KUBECTL) apply --server-side -f $(BIN_DIR)/deploy/install.yaml

clean:
	rm -rf $(BIN_DIR)
