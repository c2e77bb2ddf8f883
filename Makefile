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
MODULE       := github.com/implicit-dev/implicit-apiserver
# goimports from the Go module proxy, at the golang.org/x/tools version
# hack/tools already requires (one version of x/tools in the repository).
GOIMPORTS_VERSION ?= v0.47.0
GOIMPORTS    := $(GO) run golang.org/x/tools/cmd/goimports@$(GOIMPORTS_VERSION)

# Version stamping: `implicit-apiserver --version`, the implicit_build_info
# metric, the image tag and the chart's appVersion in dist/.
VERSION      ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
VERSION_PKG  := github.com/implicit-dev/implicit-apiserver/pkg/version
LDFLAGS      := -X $(VERSION_PKG).Version=$(VERSION)
# Timestamps inside the image: the last commit's, so an image rebuilt from the
# same commit has the same digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_NAME   ?= implicit-apiserver
IMAGE        := $(IMAGE_NAME):$(VERSION)
IMAGE_ARCH   ?= $(shell $(GO) env GOARCH)
IMAGE_DIR    := $(OUTPUT)/image
IMAGE_TAR    := $(IMAGE_DIR)/implicit-apiserver.tar
CHART        := charts/implicit-apiserver
DIST         ?= dist
# PROGRESS runs a long first build saying what it builds and why every 20 s
# (hack/progress), as hack/build-tools.sh does for the control plane.
PROGRESS     := $(GO) run ./hack/progress

##@ Build

.PHONY: build
build: ## Build implicit-apiserver and the kubectl plugin kubectl-implicit into _output/bin, stamped with VERSION (git describe).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(IMPLICIT_BIN) ./cmd/implicit-apiserver
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-implicit ./cmd/kubectl-implicit
	install -m 0755 hack/krew/kubectl_complete-implicit $(BIN)/kubectl_complete-implicit

.PHONY: image
image: ## Build the image implicit-apiserver:VERSION, without a container daemon, as an OCI archive in _output/image.
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
		-o $(IMAGE_DIR)/linux-$(IMAGE_ARCH)/implicit-apiserver ./cmd/implicit-apiserver
	cd hack/image && $(GO) run . --binary $(abspath $(IMAGE_DIR))/linux-$(IMAGE_ARCH)/implicit-apiserver \
		--arch $(IMAGE_ARCH) --tag $(IMAGE) --version $(VERSION) --created $(SOURCE_DATE_EPOCH) \
		--out $(abspath $(IMAGE_TAR))

.PHONY: tools
tools: ## Build etcd, kube-apiserver and kube-controller-manager from the Go module proxy (cached in ~/.cache).
	hack/build-tools.sh etcd kube-apiserver kube-controller-manager >/dev/null

.PHONY: release
release: image release-plugin ## dist/: install.yaml rendered from the chart (charts/release-values.yaml), the image archive, the plugin's archives and krew manifest.
	@mkdir -p $(DIST)
	@helm_bin=$$(hack/build-tools.sh helm)/helm && \
	$$helm_bin lint --strict $(CHART) --values charts/release-values.yaml --set image.repository=$(IMAGE_NAME) >/dev/null && \
	$$helm_bin template implicit-apiserver $(CHART) --namespace implicit-system --skip-tests \
		--values charts/release-values.yaml --set image.repository=$(IMAGE_NAME) --set image.tag=$(VERSION) \
		> $(DIST)/install.yaml.tmp && \
	{ echo "# implicit-apiserver $(VERSION): helm template of charts/implicit-apiserver with charts/release-values.yaml."; \
	  echo "# Needs cert-manager (the serving certificate); see docs/install.md."; \
	  cat $(DIST)/install.yaml.tmp; } > $(DIST)/install.yaml && rm $(DIST)/install.yaml.tmp
	cp $(IMAGE_TAR) $(DIST)/implicit-apiserver-$(VERSION)-$(IMAGE_ARCH).tar
	@cd $(DIST) && sha256sum install.yaml implicit-apiserver-$(VERSION)-$(IMAGE_ARCH).tar kubectl-implicit-$(VERSION)-*.tar.gz > SHA256SUMS && cat SHA256SUMS

.PHONY: release-plugin
release-plugin: ## dist/: kubectl-implicit cross-compiled per krew platform (linux, darwin; amd64, arm64) and dist/krew/implicit.yaml; KREW_URL_BASE sets the download URL.
	GO=$(GO) hack/krew/release.sh $(VERSION) $(DIST) "$(LDFLAGS)"

##@ Run

# The builds make run and run-fleet need, each saying what it builds and why
# while it runs: the project (about 6 minutes the first time on 2 cores, its
# dependencies compiled), then the control plane (hack/build-tools.sh), then
# local-up.
define RUN_BUILDS
$(PROGRESS) --what="building implicit-apiserver and kubectl-implicit (make build)" --why="make $@: the server under test and the tour's plugin" \
	--expect="about 6 minutes on 2 cores" -- $(MAKE) --no-print-directory build && \
tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager) && \
$(PROGRESS) --what="building hack/local-up" --why="make $@: it starts and stops everything" --expect="under a minute once make build has run" -- \
	$(GO) build -o $(BIN)/local-up ./hack/local-up
endef

.PHONY: run
run: ## Start a local control plane with implicit-apiserver and the examples; IMPLICIT_CONFIG=path passes --config.
	@$(RUN_BUILDS) && \
	exec $(BIN)/local-up --bin-dir="$$tools_bin" --implicit-binary=$(IMPLICIT_BIN) \
		$${IMPLICIT_CONFIG:+--config="$$IMPLICIT_CONFIG"}

.PHONY: run-fleet
run-fleet: ## Like run, for a fleet: a hub with the global sources, two members reading them; IMPLICIT_CONFIG=path passes --config.
	@$(RUN_BUILDS) && \
	exec $(BIN)/local-up --fleet --bin-dir="$$tools_bin" --implicit-binary=$(IMPLICIT_BIN) \
		$${IMPLICIT_CONFIG:+--config="$$IMPLICIT_CONFIG"}

##@ Test

.PHONY: test
test: verify unit integration ## Everything CI runs.

.PHONY: generate
generate: ## Generate pkg/apis/implicit/v1alpha1's deep copies, OpenAPI definitions and model names (deepcopy-gen, openapi-gen; hack/generate.sh).
	GO=$(GO) hack/generate.sh

# The files hack/generate.sh writes.
GENERATED := $(addprefix pkg/apis/implicit/v1alpha1/zz_generated.,deepcopy.go openapi.go model_name.go) hack/api-rule-violations.list

.PHONY: verify-generated
verify-generated: ## Fail if the generated files are not what `make generate` writes (the committed ones are put back).
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	for f in $(GENERATED); do mkdir -p "$$tmp/$$(dirname $$f)"; cp "$$f" "$$tmp/$$f"; done && \
	GO=$(GO) hack/generate.sh >/dev/null && \
	stale=$$(for f in $(GENERATED); do cmp -s "$$f" "$$tmp/$$f" || echo "$$f"; done) && \
	for f in $(GENERATED); do cp "$$tmp/$$f" "$$f"; done && \
	if [[ -n "$$stale" ]]; then echo "generated files out of date (run make generate):"; echo "$$stale"; exit 1; fi

.PHONY: verify
verify: verify-generated ## gofmt, goimports (import grouping: standard library, others, this module), go vet, the generated files current, and every Go directory in docs/design.md's package map.
	@files=$$(git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null || find . -name '*.go' -not -path './_output/*'); \
	files=$$(for f in $$files; do [[ -f $$f ]] && echo "$$f"; done); \
	bad=$$(gofmt -l $$files) || exit 1; \
	if [[ -n "$$bad" ]]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi; \
	bad=$$($(GOIMPORTS) -l -local $(MODULE) $$files) || exit 1; \
	if [[ -n "$$bad" ]]; then echo "goimports -local $(MODULE) would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	cd hack/tools && $(GO) vet ./etcd
	cd hack/image && $(GO) vet ./...
	cd test/bench && $(GO) vet ./...
	hack/verify-package-map.sh

.PHONY: unit
unit: ## Unit tests (and fuzz seeds) with -race.
	$(GO) test $(GOFLAGS_TEST) ./pkg/... ./internal/... ./cmd/... ./hack/progress/...
	cd hack/image && $(GO) test $(GOFLAGS_TEST) ./...

.PHONY: integration
integration: build ## Integration tests against real etcd, kube-apiserver and the aggregation layer; the chart's tests (test/chart) with helm. The load tests (test/replicas, then test/robustness for 90 s) run after the others, with the machine to themselves.
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager helm) && \
	export IMPLICIT_TOOLS_BIN="$$tools_bin" IMPLICIT_BINARY="$(abspath $(IMPLICIT_BIN))" && \
	( $(GO) test $(GOFLAGS_TEST) -timeout 30m $$($(GO) list ./internal/controlplane/... ./test/... | grep -v -e /test/replicas -e /test/robustness) -v; rc=$$?; \
	  $(GO) test $(GOFLAGS_TEST) -timeout 30m -p 1 ./test/replicas/ ./test/robustness/ -v || rc=1; exit $$rc ) 2>&1 | tee $(OUTPUT)/integration.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)'; \
	rc=$${PIPESTATUS[0]}; \
	if [[ $$rc != 0 ]]; then echo "integration tests failed; what the failed tests logged (full log in $(OUTPUT)/integration.log):"; hack/test-failures.sh $(OUTPUT)/integration.log | cut -c1-400; exit 1; fi

# The robustness test at length (make integration runs it for 90 s).
ROBUSTNESS_DURATION   ?= 30m
ROBUSTNESS_COMPACTION ?= 30s

.PHONY: robustness
robustness: build ## test/robustness alone for ROBUSTNESS_DURATION (default 30m) with kube-apiserver compacting every ROBUSTNESS_COMPACTION (30s); IMPLICIT_ROBUSTNESS_SEED=<seed> replays a seed's choices. Log in _output/robustness.log.
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager) && \
	IMPLICIT_TOOLS_BIN="$$tools_bin" IMPLICIT_BINARY="$(abspath $(IMPLICIT_BIN))" \
	IMPLICIT_ROBUSTNESS_DURATION=$(ROBUSTNESS_DURATION) IMPLICIT_ROBUSTNESS_COMPACTION=$(ROBUSTNESS_COMPACTION) \
		$(GO) test -count=1 -timeout 3h ./test/robustness/ -v 2>&1 | tee $(OUTPUT)/robustness.log | grep -E '^\s+robustness_test.go|^(--- |PASS|FAIL|ok)'

.PHONY: e2e
e2e: image ## One-node cluster on this machine (kubelet on containerd, runc), helm install of the chart, tenant and webhook checks; needs root; not part of make test. E2E_ARGS=--hold keeps it up.
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -o $(OUTPUT)/e2e/linux-$(IMAGE_ARCH)/pause ./hack/e2e/pause
	cd hack/image && $(GO) run . --binary $(abspath $(OUTPUT))/e2e/linux-$(IMAGE_ARCH)/pause \
		--arch $(IMAGE_ARCH) --tag implicit-e2e-pause:1 --version e2e --created $(SOURCE_DATE_EPOCH) \
		--out $(abspath $(OUTPUT))/e2e/pause.tar
	$(GO) build -o $(BIN)/e2e ./hack/e2e
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver kube-controller-manager kube-scheduler kubelet helm) && \
	$(BIN)/e2e --bin-dir="$$tools_bin" --image=$(IMAGE_TAR) --image-tag=$(VERSION) \
		--pause-image=$(OUTPUT)/e2e/pause.tar --pause-ref=docker.io/library/implicit-e2e-pause:1 \
		--work-dir=$(OUTPUT)/e2e $(E2E_ARGS)

.PHONY: bench
bench: build ## Whole-system scale sweep (test/bench): N in {1000,5000,10000} x G in {10,100}, each fan-out fleet alone beside sample-apiserver (the aggregated reference); BENCH_ARGS=-short for a quick look, BENCH_ARGS=-fanout-only for the fan-out alone, BENCH_ARGS=-replica-switch for a replica switch at 10,000 x 100 (issue 31), BENCH_ARGS=-edges for 10,000 watch opens at once and SIGTERM with them open (issue 45), BENCH_ARGS="-fanout-only -burst" to also open each fleet alone as a reconnect storm does (issue 45), BENCH_ARGS=-explain for the time until kubectl explain shows a kind the served group gained (issue 45).
	@mkdir -p $(OUTPUT)/bench
	@tools_bin=$$(hack/build-tools.sh etcd kube-apiserver sample-apiserver) && cd test/bench && \
	IMPLICIT_TOOLS_BIN="$$tools_bin" IMPLICIT_BINARY="$(abspath $(IMPLICIT_BIN))" \
		$(GO) run . -out $(abspath $(OUTPUT))/bench -plot $(if $(findstring -short,$(BENCH_ARGS)),$(abspath $(OUTPUT))/bench/bench-propagation.png,$(abspath docs)/bench-propagation.png) $(BENCH_ARGS) | tee $(abspath $(OUTPUT))/bench/bench.log

.PHONY: bench-micro
bench-micro: ## Go benchmarks of views, fan-out and authorization decisions (not part of make test).
	$(GO) test -run '^$$' -bench . -benchtime 2s ./pkg/views/
	$(GO) test -run '^$$' -bench . -benchtime 5x ./pkg/watchmux/
	$(GO) test -run '^$$' -bench . -benchtime 2s ./pkg/authz/

.PHONY: fuzz
fuzz: ## Fuzz the merge rules, staged candidates, explanations, overlays and the watch splice for a while (FUZZTIME each, default 60s), and the guards' invariants for FUZZSEQUENCES sequences (default 6000).
	$(GO) test -run='^$$' -fuzz='^FuzzMerge$$' -fuzztime=$${FUZZTIME:-60s} ./pkg/merge
	$(GO) test -run='^$$' -fuzz='^FuzzStagedMerge$$' -fuzztime=$${FUZZTIME:-60s} ./pkg/merge
	$(GO) test -run='^$$' -fuzz='^FuzzExplain$$' -fuzztime=$${FUZZTIME:-60s} ./pkg/merge
	$(GO) test -run='^$$' -fuzz='^FuzzOverlay$$' -fuzztime=$${FUZZTIME:-60s} ./pkg/merge
	$(GO) test -run='^$$' -fuzz='^FuzzSplice$$' -fuzztime=$${FUZZTIME:-60s} ./pkg/views
	IMPLICIT_INVARIANTS_SEQUENCES=$${FUZZSEQUENCES:-6000} $(GO) test -count=1 -timeout=0 -run='^TestInvariants$$' -v ./internal/invariants

##@ Help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
