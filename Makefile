# kilomesh: every target builds the tools it needs (cached in .cache/bin).
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/.cache/bin
GO_PACKAGES := ./...
FUZZTIME ?= 3s
# UNIT_TIMEOUT bounds each package's tests: the provider's controller tests
# take about ten minutes on two busy cores, past go test's default.
UNIT_TIMEOUT ?= 30m
export KUBEBUILDER_ASSETS ?= $(BIN)

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: tools
tools: ## Build the test and code generation tools (first time ~11 min on 2 cores).
	test/tools/build.sh

.PHONY: generate
generate: ## Regenerate deep-copy methods, CRDs, the XRD, the API reference and the render scenarios' copies of the Composition and XRD.
	test/tools/build.sh controller-gen angryjet
	cd apis && go generate ./...
	test/render/sync.sh

.PHONY: check-generate
check-generate: generate ## Fail when generated files are out of date.
	@if [ -n "$$(git status --porcelain -- apis package test/crds docs examples/render)" ]; then \
	  git status --porcelain -- apis package test/crds docs examples/render; \
	  git diff -- apis package test/crds docs examples/render | head -50; \
	  echo "generated files are out of date: run 'make generate' and commit the result" >&2; exit 1; fi

.PHONY: lint
lint: ## Run golangci-lint, and actionlint on the workflows of .github/workflows.
	test/tools/build.sh golangci-lint actionlint
	$(BIN)/golangci-lint run --build-tags bench,e2e $(GO_PACKAGES)
	$(BIN)/actionlint -no-color

.PHONY: unit-deps
unit-deps: ## Build the tools the unit tests run, and install the Debian packages they need (nftables) when root.
	test/tools/build.sh etcd kube wireguard-go coredns-mcs
	if [ "$$(id -u)" = 0 ]; then test/stack/node.sh packages; fi

.PHONY: unit
unit: unit-deps ## Run unit tests (the provider tests start real kube-apiservers; the data-plane harness's test needs root and /dev/net/tun).
	go test -count=1 -timeout $(UNIT_TIMEOUT) $(GO_PACKAGES)

.PHONY: quick
quick: unit-deps ## The unit tests with -short: all but the provider's long controller tests and the plugin's release archives.
	go test -short -count=1 -timeout $(UNIT_TIMEOUT) $(GO_PACKAGES)

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each.
	@for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo ">> $$pkg $$f"; go test $$pkg -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME); \
	  done; done

.PHONY: render-check
render-check: ## Render every examples/render scenario with the real Crossplane CLI and compare.
	test/render/check.sh

.PHONY: render-update
render-update: ## Rewrite the expected output of every render scenario.
	UPDATE=1 test/render/check.sh

.PHONY: docs-check
docs-check: ## Check the docs: YAML blocks against the schemas, make targets, links.
	test/tools/build.sh crossplane-cli crossplane
	KILOMESH_DOCS_STRICT=1 go test -count=1 ./test/docs/

.PHONY: e2e
e2e: ## End-to-end tests (root): API servers with a real node each, Crossplane by its Helm chart, kilomesh's packages as pods; fails on anything left on the machine.
	@rc=0; go test -tags e2e -count=1 -v -timeout 120m ./test/e2e/... || rc=$$?; \
	if [ "$$rc" != 0 ] && [ "$${E2E_KEEP:-}" != 1 ] && [ "$${E2E_REUSE:-}" != 1 ]; then \
	  dir=$${E2E_STACK_DIR:-$(CURDIR)/.run/e2e}; \
	  STACK_DIR=$$dir test/stack/down.sh >/dev/null 2>&1 || true; \
	  STACK_DIR=$$dir test/stack/node.sh leftovers || rc=1; \
	fi; exit $$rc

.PHONY: check
check: check-generate lint quick fuzz package-check render-check docs-check ## Everything but the e2e and the long provider tests: run it before a push.

.PHONY: test
test: check-generate lint unit fuzz package-check render-check docs-check e2e ## Run every test.

.PHONY: realnodes
realnodes: ## Real nodes (root): pods behind a Service in two clusters; Crossplane by its Helm chart, kilomesh as pods, a mesh of three; real pods across the mesh; teardown checked (~3.5 min warm).
	test/tools/build.sh etcd kube kube-node coredns-mcs helm crossplane crossplane-cli crane provider-kubernetes
	go test -tags realnodes -count=1 -v -timeout 20m ./test/realnodes/

.PHONY: bench
bench: ## Run the benchmarks: function and planner, then provider-kilomesh against real API servers (~5 min).
	go test -run='^$$' -bench=. -benchmem ./fn/...
	test/tools/build.sh etcd kube
	go test -tags bench -count=1 -timeout 40m -v ./provider/bench/

.PHONY: images
images: ## Build the packages (function and provider for linux/amd64 and linux/arm64) into _output/ without Docker; PUSH=host:port publishes them.
	package/build.sh function
	package/build.sh provider
	package/build.sh configuration
	if [ -n "$(PUSH)" ]; then package/push.sh "$(PUSH)"; fi

.PHONY: package-check
package-check: images ## Validate every document and example the packages hold with crossplane resource validate.
	package/check.sh

.PHONY: demo
demo: ## A three-cluster ClusterMesh on local API servers and Crossplane: the Peers every member gets, and which members' pods reach which through WireGuard.
	test/stack/demo.sh

.PHONY: demo-down
demo-down: ## Stop exactly what make demo started.
	test/stack/demo-down.sh

.PHONY: demo-render
demo-render: ## A dry run of examples/render/three-clusters with the Crossplane CLI: the Peers of every member.
	test/tools/build.sh crossplane-cli crossplane
	test/render/demo.sh three-clusters

.PHONY: plugin
plugin: ## Build the kubectl plugin's release archives (tar.gz with the binary and LICENSE for linux, darwin and windows) and its krew manifest into _output/plugin/VERSION.
	package/plugin/build.sh
