# implicit-apiserver: build, run locally, test.
#
#   make run        local control plane + implicit-apiserver + examples (foreground)
#   make run-fleet  a hub and two member clusters, whose implicit-apiservers read the hub (foreground)
#   make test       verify, unit tests with -race, integration tests on a real control plane

SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

OUTPUT       ?= _output
BIN          := $(OUTPUT)/bin
IMPLICIT_BIN := $(BIN)/implicit-apiserver
GO           ?= go
GOFLAGS_TEST ?= -race -count=1

##@ Build

.PHONY: build
build: ## Build implicit-apiserver into _output/bin.
	$(GO) build -o $(IMPLICIT_BIN) ./cmd/implicit-apiserver

.PHONY: tools
tools: ## Build etcd, kube-apiserver and kube-controller-manager from the Go module proxy (cached in ~/.cache).
	hack/build-tools.sh etcd kube-apiserver kube-controller-manager >/dev/null

##@ Run

.PHONY: run
run: build ## Start a local control plane with implicit-apiserver and the examples; IMPLICIT_CONFIG=path passes --config.
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager) && \
	$(GO) build -o $(BIN)/local-up ./hack/local-up && \
	exec $(BIN)/local-up --bin-dir="$$tools_bin" --implicit-binary=$(IMPLICIT_BIN) \
		$${IMPLICIT_CONFIG:+--config="$$IMPLICIT_CONFIG"}

.PHONY: run-fleet
run-fleet: build ## Like run, for a fleet: a hub with the global sources, two members reading them; IMPLICIT_CONFIG=path passes --config.
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager) && \
	$(GO) build -o $(BIN)/local-up ./hack/local-up && \
	exec $(BIN)/local-up --fleet --bin-dir="$$tools_bin" --implicit-binary=$(IMPLICIT_BIN) \
		$${IMPLICIT_CONFIG:+--config="$$IMPLICIT_CONFIG"}

##@ Test

.PHONY: test
test: verify unit integration ## Everything CI runs.

.PHONY: verify
verify: ## gofmt and go vet.
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*')); \
	if [[ -n "$$bad" ]]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	cd hack/tools && $(GO) vet ./etcd

.PHONY: unit
unit: ## Unit tests (and fuzz seeds) with -race.
	$(GO) test $(GOFLAGS_TEST) ./pkg/... ./cmd/...

.PHONY: integration
integration: build ## Integration tests against real etcd, kube-apiserver and the aggregation layer.
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager) && \
	IMPLICIT_TOOLS_BIN="$$tools_bin" IMPLICIT_BINARY="$(abspath $(IMPLICIT_BIN))" \
		$(GO) test $(GOFLAGS_TEST) -timeout 30m ./test/... -v 2>&1 | tee $(OUTPUT)/integration.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)' || \
		{ echo "integration tests failed; full log in $(OUTPUT)/integration.log"; grep -E -B2 -A20 -- '--- FAIL' $(OUTPUT)/integration.log | tail -200; exit 1; }

.PHONY: bench
bench: build ## Whole-system scale sweep (test/bench): N in {1000,5000,10000} x G in {10,100}, about 8 min; BENCH_ARGS=-short for a quick look.
	@mkdir -p $(OUTPUT)/bench
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver) && \
	IMPLICIT_TOOLS_BIN="$$tools_bin" IMPLICIT_BINARY="$(abspath $(IMPLICIT_BIN))" \
		$(GO) run ./test/bench -out $(OUTPUT)/bench -plot $(if $(findstring -short,$(BENCH_ARGS)),$(OUTPUT)/bench/bench-propagation.png,docs/bench-propagation.png) $(BENCH_ARGS) | tee $(OUTPUT)/bench/bench.log

.PHONY: bench-micro
bench-micro: ## Go benchmarks of views, fan-out and authorization decisions (not part of make test).
	$(GO) test -run '^$$' -bench . -benchtime 2s ./pkg/views/
	$(GO) test -run '^$$' -bench . -benchtime 5x ./pkg/watchmux/
	$(GO) test -run '^$$' -bench . -benchtime 2s ./pkg/authz/

.PHONY: fuzz
fuzz: ## Fuzz the merge rules and overlays for a while (FUZZTIME each, default 60s).
	$(GO) test -run='^$$' -fuzz=FuzzMerge -fuzztime=$${FUZZTIME:-60s} ./pkg/merge
	$(GO) test -run='^$$' -fuzz=FuzzOverlay -fuzztime=$${FUZZTIME:-60s} ./pkg/merge

##@ Help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
