# llama-stack-controller
SHELL := /usr/bin/env bash
GO ?= go
BIN_DIR ?= bin
IMAGE ?= llama-stack-controller:latest
# Extra arguments for `make run`, e.g. ARGS="--namespace demo -v=4".
ARGS ?=

.PHONY: all generate verify build test vet fmt run image clean

all: build

## generate: regenerate deepcopy, clientset, listers, informers, apply configurations and the CRD
generate:
	hack/update-codegen.sh

## verify: fail when generated code or the CRD is stale, or code is not gofmt'ed
verify:
	hack/verify-codegen.sh
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## build: build the controller binary into bin/
build:
	$(GO) build -o $(BIN_DIR)/llama-stack-controller ./cmd/controller

vet:
	$(GO) vet ./...

## test: vet, every unit test, and the CRD admission checks (no API server needed)
test: vet
	$(GO) test ./...
	hack/test-crd.sh

## run: run the controller against $$KUBECONFIG (CRD installed first)
run: build
	@if [[ -z "$${KUBECONFIG:-}" && ! -f "$$HOME/.kube/config" ]]; then \
	  echo "make run needs a cluster: set KUBECONFIG (the embedded local control plane is not built yet)"; exit 1; fi
	kubectl apply -f artifacts/crd/
	$(BIN_DIR)/llama-stack-controller $(ARGS)

## image: build the controller image (needs a container engine)
image:
	docker build -t $(IMAGE) .

clean:
	rm -rf $(BIN_DIR)
