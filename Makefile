# admitfn — see README.md. `make run` serves the example bundle, `make test`
# runs every check CI runs.

GO       ?= go
ADDR     ?= 127.0.0.1:8080
POLICIES ?= policies/examples
BIN      := bin

# The end-to-end suite runs this kube-apiserver, built once from the
# k8s.io/kubernetes module (hack/tools/kube-apiserver) and cached outside the
# work tree so fresh clones on the same machine reuse it.
KUBE_VERSION   := v1.37.2
KUBE_MINOR     := $(word 2,$(subst ., ,$(KUBE_VERSION)))
TOOLS_DIR      ?= $(abspath $(shell $(GO) env GOCACHE)/../admitfn-tools)
KUBE_APISERVER ?= $(TOOLS_DIR)/kube-apiserver-$(KUBE_VERSION)
KUBE_LDFLAGS   := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(KUBE_MINOR) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$(KUBE_MINOR)
# The object stores the storage tests read bundles from, run as real servers:
# versitygw (S3) and fake-gcs-server (GCS), installed once per version.
VERSITYGW_VERSION      := v1.8.0
FAKE_GCS_VERSION       := v1.56.1
VERSITYGW              ?= $(TOOLS_DIR)/versitygw-$(VERSITYGW_VERSION)/versitygw
FAKE_GCS_SERVER        ?= $(TOOLS_DIR)/fake-gcs-server-$(FAKE_GCS_VERSION)/fake-gcs-server
# The SBOM generator of make release (CycloneDX), installed once per version.
CYCLONEDX_VERSION := v1.10.0
CYCLONEDX_GOMOD   ?= $(TOOLS_DIR)/cyclonedx-gomod-$(CYCLONEDX_VERSION)/cyclonedx-gomod
# The validators generated from the wgpolicyk8s.io PolicyReport CRDs, from the
# npm registry at the versions hack/policyreport/package-lock.json pins.
POLICYREPORT_HASH      := $(shell cat hack/policyreport/package-lock.json hack/policyreport/validate.mjs | sha256sum | cut -c1-12)
POLICYREPORT_VALIDATOR ?= $(TOOLS_DIR)/policyreport-schema-$(POLICYREPORT_HASH)
# The Terraform CLI of make tf-check: OpenTofu, built once per version from
# the module proxy (hack/tools/tofu), as no package of Terraform or OpenTofu
# can be installed here.
TOFU_VERSION := v1.10.6
TOFU         ?= $(TOOLS_DIR)/tofu-$(TOFU_VERSION)
# terraform-docs writes the modules' input and output tables (hack/tools/terraform-docs).
TFDOCS_VERSION := v0.20.0
TFDOCS         ?= $(TOOLS_DIR)/terraform-docs-$(TFDOCS_VERSION)
TF_DIRS        := $(patsubst %/,%,$(wildcard terraform/modules/*/ terraform/examples/*/))
STORE_ENV := ADMITFN_POLICYREPORT_VALIDATOR=$(POLICYREPORT_VALIDATOR) ADMITFN_STORE_TESTS=required ADMITFN_VERSITYGW=$(VERSITYGW) ADMITFN_FAKE_GCS_SERVER=$(FAKE_GCS_SERVER)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The binaries the tests run (server, CLI, Cloud Functions runner, Lambda
# bootstrap), built once per make test by hack/testbin, all static and with
# -trimpath: one build configuration, whose compiled packages the vendored
# Cloud Functions build in the tests reuses.
TEST_BIN ?= $(CURDIR)/dist/test-bin
TEST_ENV := ADMITFN_TEST_BIN=$(TEST_BIN)
# Each package's test binary must end within its group's -timeout: generous,
# for a loaded 2-CPU machine under the race detector, not a measure.
UNIT_TIMEOUT ?= 20m
E2E_TIMEOUT  ?= 30m
FUZZ_TIMEOUT ?= 20m
# Builds that compile a whole dependency tree on a cold cache (the tools
# below, kube-apiserver) are bounded too: minutes on 2 CPUs, not hours.
BUILD_TIMEOUT ?= 45m

.PHONY: install policyreport-deps release release-version release-check release-deps tf-check tf-docs tf-schemas soak fuzz fuzz-short run test unit policy-test e2e e2e-deps etcd kube-apiserver store-deps test-bin test-under-load lint fmt build lambda gcf run-gcf run-lambda bench upgrade-rehearsal fallback-rehearsal bench-peers clean

run: ## serve policies/examples on http://127.0.0.1:8080
	@# The built binary, not go run: a SIGTERM to go run would leave the
	@# server running as its child.
	$(GO) build -o $(BIN)/server ./functions/server
	exec $(BIN)/server --addr $(ADDR) --policies $(POLICIES)

test: lint tf-check test-bin unit fuzz-short policy-test release-check e2e ## everything CI runs

unit: store-deps policyreport-deps test-bin ## Go tests, with the race detector (storage tests against versitygw and fake-gcs-server)
	$(STORE_ENV) $(TEST_ENV) $(GO) test -race -count=1 -timeout $(UNIT_TIMEOUT) $$($(GO) list ./... | grep -v /e2e)

LOAD_PKG ?= ./core/validate
test-under-load: ## make test while go test -race of LOAD_PKG loops alongside, as on a shared CI machine
	GO=$(GO) LOAD_PKG=$(LOAD_PKG) hack/underload/underload.sh $(MAKE) test

test-bin: ## the binaries the tests run, into $(TEST_BIN)
	@echo "test-bin: building server, CLI, Cloud Functions runner and Lambda bootstrap into $(TEST_BIN) (a cold build cache: several minutes on 2 CPUs)"
	$(GO) run ./hack/testbin $(TEST_BIN)

store-deps: $(VERSITYGW) $(FAKE_GCS_SERVER)

policyreport-deps: $(POLICYREPORT_VALIDATOR)/node_modules ## the PolicyReport schema validator of the apply tests (Node.js, npm)

$(POLICYREPORT_VALIDATOR)/node_modules:
	@command -v npm >/dev/null || { $(SUDO) apt-get update && $(SUDO) apt-get install -y nodejs npm; }
	mkdir -p $(POLICYREPORT_VALIDATOR)
	cp hack/policyreport/package.json hack/policyreport/package-lock.json hack/policyreport/validate.mjs $(POLICYREPORT_VALIDATOR)/
	cd $(POLICYREPORT_VALIDATOR) && timeout $(BUILD_TIMEOUT) npm ci --no-audit --no-fund

$(VERSITYGW):
	@echo "store-deps: installing versitygw $(VERSITYGW_VERSION), the S3 server of the storage tests (first run only: minutes on 2 CPUs)"
	GOBIN=$(dir $@) timeout $(BUILD_TIMEOUT) $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

$(FAKE_GCS_SERVER):
	@echo "store-deps: installing fake-gcs-server $(FAKE_GCS_VERSION), the GCS server of the storage tests (first run only: minutes on 2 CPUs)"
	GOBIN=$(dir $@) timeout $(BUILD_TIMEOUT) $(GO) install github.com/fsouza/fake-gcs-server@$(FAKE_GCS_VERSION)

policy-test: test-bin ## admitfn lint and admitfn test on every bundle under policies/
	$(TEST_BIN)/admitfn lint policies/examples policies/library/*/
	$(TEST_BIN)/admitfn test policies

e2e: e2e-deps test-bin ## admitfn behind a real kube-apiserver and etcd
	ADMITFN_E2E=required ADMITFN_KUBE_APISERVER=$(KUBE_APISERVER) $(TEST_ENV) $(GO) test -race -count=1 -timeout $(E2E_TIMEOUT) ./test/e2e/

e2e-deps: etcd kube-apiserver

etcd: ## Debian's etcd-server, when etcd is not on PATH
	@command -v etcd >/dev/null || { $(SUDO) apt-get update && $(SUDO) apt-get install -y etcd-server; }

kube-apiserver: $(KUBE_APISERVER)

$(KUBE_APISERVER): # the versioned path is the cache key: fresh clones reuse the binary
	@mkdir -p $(TOOLS_DIR)
	@echo "kube-apiserver: building $(KUBE_VERSION) for the end-to-end suite (first run only: minutes on 2 CPUs)"
	cd hack/tools/kube-apiserver && CGO_ENABLED=0 timeout $(BUILD_TIMEOUT) $(GO) build -trimpath -ldflags '$(KUBE_LDFLAGS)' -o $@.tmp k8s.io/kubernetes/cmd/kube-apiserver
	mv $@.tmp $@

# go vet -race: vet compiles every package it checks and their dependencies;
# with -race those are the very packages the tests compile next.
lint: ## gofmt and go vet
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet -race ./...
	$(GO) vet -race -tags admitfn_upstream ./test/perf/minimal
	$(GO) vet -race -tags admitfn_handler ./test/perf/minimal

fmt:
	gofmt -w $$(git ls-files '*.go')

install: ## the admitfn CLI into $(go env GOBIN), or $(go env GOPATH)/bin
	$(GO) install ./cmd/admitfn

build: ## static binaries in bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/ ./cmd/admitfn ./functions/server

VERSION  ?=
SIGN_KEY ?=
release: release-version $(CYCLONEDX_GOMOD) ## dist/release/ for VERSION=v0.1.0: CLI archives, Lambda zips, Cloud Functions source, server OCI image, SBOMs, SHA256SUMS (signed with SIGN_KEY=file)
	$(GO) run ./hack/release -version $(VERSION) -out dist/release -cyclonedx-gomod $(CYCLONEDX_GOMOD) $(if $(SIGN_KEY),-sign-key $(SIGN_KEY))

# The usage before any tool is installed.
release-version:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=v0.1.0 [SIGN_KEY=release.key]"; exit 2; }

RELEASE_CHECK := dist/release-check
release-check: $(CYCLONEDX_GOMOD) release-deps ## the CI variant of make release (linux/amd64), built twice and compared byte for byte, then unpacked and run
	rm -rf $(RELEASE_CHECK) && mkdir -p $(RELEASE_CHECK)
	$(GO) run ./cmd/admitfn keygen --out $(RELEASE_CHECK)/release.key
	for run in a b; do \
		$(GO) run ./hack/release -quick -version v0.0.0-ci -out $(RELEASE_CHECK)/$$run -cyclonedx-gomod $(CYCLONEDX_GOMOD) -sign-key $(RELEASE_CHECK)/release.key -release-key $(RELEASE_CHECK)/release.key.pub || exit 1; \
	done
	diff -r $(RELEASE_CHECK)/a $(RELEASE_CHECK)/b && echo "release-check: two builds are byte-identical"
	ADMITFN_RELEASE_TESTS=required ADMITFN_RELEASE_DIR=$(CURDIR)/$(RELEASE_CHECK)/a ADMITFN_RELEASE_KEY=$(CURDIR)/$(RELEASE_CHECK)/release.key.pub \
		$(GO) test -count=1 -run 'TestReleaseArtifacts|TestInstallDocs|TestReleaseNotesGiveTheKeyFingerprint' ./hack/release

release-deps: ## skopeo, which reads the OCI image in release-check
	@command -v skopeo >/dev/null || { $(SUDO) apt-get update && $(SUDO) apt-get install -y skopeo; }

$(CYCLONEDX_GOMOD):
	@echo "release: installing cyclonedx-gomod $(CYCLONEDX_VERSION), the SBOM generator (first run only)"
	GOBIN=$(dir $@) timeout $(BUILD_TIMEOUT) $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_VERSION)

lambda: ## dist/lambda/admitfn-{arm64,amd64}.zip: a static, reproducible bootstrap for provided.al2023
	$(GO) run ./hack/lambdazip -dir dist/lambda arm64 amd64

gcf: ## dist/gcf/admitfn-source.zip: Cloud Functions source, dependencies vendored, POLICIES in policies/
	$(GO) run ./hack/gcfsource -o dist/gcf/admitfn-source.zip -policies $(POLICIES)

PORT             ?= 8080
ADMITFN_POLICIES ?= $(POLICIES)
run-gcf: ## serve ADMITFN_POLICIES through functions-framework-go on 127.0.0.1:$(PORT), as Cloud Functions would
	@# The built binary, not go run: a signal to go run would leave the server
	@# running as its child.
	$(GO) build -o $(BIN)/gcf-runner ./functions/gcf/runner
	LOCAL_ONLY=true PORT=$(PORT) ADMITFN_POLICIES=$(ADMITFN_POLICIES) FUNCTION_TARGET=Admitfn exec $(BIN)/gcf-runner

run-lambda: ## the Lambda bootstrap serving ADMITFN_POLICIES behind a Function URL stand-in on http://$(ADDR), as AWS runs it
	CGO_ENABLED=0 $(GO) build -tags lambda.norpc -o $(BIN)/bootstrap ./functions/awslambda
	$(GO) build -o $(BIN)/runlambda ./hack/runlambda
	ADMITFN_POLICIES=$(ADMITFN_POLICIES) exec $(BIN)/runlambda -addr $(ADDR) -bootstrap $(BIN)/bootstrap

# Fuzz targets: package and name. Each runs for FUZZTIME; the corpus a run
# finds stays in the Go build cache, failures land in testdata/fuzz/.
FUZZ_TARGETS := ./core/review:FuzzDecode ./core/policy:FuzzParse ./core/policy:FuzzParseRoute \
	./adapters/httpadapter:FuzzServeHTTP ./adapters/awslambda:FuzzInvoke ./adapters/awslambda:FuzzEventDecode \
	./core/celeval/internal/objectval:FuzzObjectValue ./core/celeval/internal/objectval:FuzzTypedObjectValue ./core/validate:FuzzCostBound
FUZZTIME ?= 60s
SOAK_CLIENTS ?= 8
SOAK_DURATION ?= 60s
fuzz: ## every fuzz target for FUZZTIME each (default 60s; a count such as 20000x also works)
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -timeout $(FUZZ_TIMEOUT) "$${t%%:*}"; \
	done

# CI counts executions rather than seconds: with a duration, go1.26's fuzz
# coordinator can report its own stop as "context deadline exceeded" and
# fail a target that found nothing (golang/go#75804, fixed in Go 1.27).
fuzz-short: ## every fuzz target briefly (20,000 inputs each), as CI runs them
	$(MAKE) fuzz FUZZTIME=20000x

TERRAFORM ?= $(shell command -v terraform)
TF_SCHEMAS ?= ../shared/terraform-schemas

tf-check: $(TOFU) $(TFDOCS) test-bin ## the Terraform modules and examples: fmt, README tables, then init, validate and test against the providers' recorded schemas, newest and lowest versions (with OpenTofu, and terraform when on PATH)
	$(TOFU) fmt -check -recursive terraform/
	@for d in $(TF_DIRS); do \
		$(TFDOCS) markdown table --output-file README.md --output-mode inject --sort-by required --output-check $$d >/dev/null || { echo "tf-check: $$d/README.md: the tables are not current: make tf-docs"; exit 1; }; \
	done
	ADMITFN_TF_CHECK=required ADMITFN_TERRAFORM=$(TOFU) $(TEST_ENV) $(GO) test -count=1 -run 'TestModulesAgainstProviderSchemas|TestProviderSchemasCatchMistakes' ./terraform
	@if [ -n "$(TERRAFORM)" ]; then \
		echo "tf-check: again with $(TERRAFORM)"; \
		ADMITFN_TF_CHECK=required ADMITFN_TERRAFORM=$(TERRAFORM) $(TEST_ENV) $(GO) test -count=1 -run 'TestModulesAgainstProviderSchemas|TestProviderSchemasCatchMistakes' ./terraform || exit 1; \
	fi

tf-docs: $(TFDOCS) ## rewrite the input, output and resource tables of every module's and example's README.md
	@for d in $(TF_DIRS); do $(TFDOCS) markdown table --output-file README.md --output-mode inject --sort-by required $$d || exit 1; done

tf-schemas: ## refresh terraform/testdata/schemas from full provider schemas in TF_SCHEMAS, keeping the types the modules use
	$(GO) run ./hack/tfschemas -from $(TF_SCHEMAS) -to terraform/testdata/schemas -uses terraform $(notdir $(wildcard terraform/testdata/schemas/*.json.gz))

$(TFDOCS):
	@mkdir -p $(TOOLS_DIR)
	@echo "tf-check: building terraform-docs $(TFDOCS_VERSION) (first run only)"
	cd hack/tools/terraform-docs && CGO_ENABLED=0 timeout $(BUILD_TIMEOUT) $(GO) build -trimpath -o $@.tmp github.com/terraform-docs/terraform-docs
	mv $@.tmp $@

$(TOFU):
	@mkdir -p $(TOOLS_DIR)
	@echo "tf-check: building OpenTofu $(TOFU_VERSION), the Terraform CLI of the module checks (first run only: minutes on 2 CPUs)"
	cd hack/tools/tofu && CGO_ENABLED=0 timeout $(BUILD_TIMEOUT) $(GO) build -trimpath -o $@.tmp github.com/opentofu/opentofu/cmd/tofu
	mv $@.tmp $@

soak: ## the server under SOAK_CLIENTS keep-alive clients for SOAK_DURATION on loopback: 0 errors, p99, RSS flat
	$(GO) run ./hack/soak -clients $(SOAK_CLIENTS) -duration $(SOAK_DURATION)

BENCH_COUNT ?= 3
upgrade-rehearsal: ## in a scratch copy: cel-go and the k8s.io modules at the newest versions the proxy serves, then build and the CEL parity tests; prints what broke
	bash hack/upgrade/rehearse.sh

fallback-rehearsal: ## in a scratch copy, cel-go with a private field renamed: the fast-path tests fail by name, the server answers as before, logs and counts the fallback
	bash hack/upgrade/fallback.sh

bench-peers: e2e-deps test-bin ## not in make test: admitfn beside Kyverno's and Gatekeeper's engines (W1) and CLIs on a 50,000-object dump (W2), and kube-apiserver's own policies end to end (W3); docs/performance.md, "Against the alternatives"
	@mkdir -p $(BIN)
	@# The peers' module (test/peers) pins their engines; its graph never
	@# touches admitfn's.
	cd test/peers && $(GO) build -o $(abspath $(BIN))/peers . && \
		$(GO) build -o $(abspath $(BIN))/kyverno github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno && \
		$(GO) build -o $(abspath $(BIN))/gator github.com/open-policy-agent/gatekeeper/v3/cmd/gator
	$(GO) run ./hack/benchpeers -peers $(BIN)/peers -kyverno $(BIN)/kyverno -gator $(BIN)/gator -admitfn $(TEST_BIN)/admitfn $(BENCH_PEERS_FLAGS)
	@# W3 through the end-to-end suite's kube-apiserver; the build tag keeps
	@# it out of make test and make bench.
	bash -o pipefail -c "ADMITFN_E2E=required ADMITFN_KUBE_APISERVER=$(KUBE_APISERVER) $(TEST_ENV) $(GO) test -tags benchpeers -count=1 -v -timeout $(E2E_TIMEOUT) -run '^TestW3PodCreateLatency$$' ./test/e2e/ | grep -E '^(W3 |--- |FAIL|ok )'"

bench: ## every Go benchmark, then one line per measure of docs/performance.md (whose Results it rewrites): P<n> <ratio> target <op><value> PASS|FAIL
	@mkdir -p dist
	@# Packages with benchmarks only, one at a time (-p 1): benchmarks of one
	@# package must not share the CPUs with another package's tests.
	bash -o pipefail -c "$(GO) test -p 1 -run '^$$' -bench . -benchmem -count=$(BENCH_COUNT) $$(grep -rl --include='*_test.go' '^func Benchmark' . | xargs -n1 dirname | sort -u | tr '\n' ' ') | tee dist/bench.txt"
	@$(GO) run ./hack/benchsum -results docs/performance.md dist/bench.txt

clean:
	rm -rf $(BIN) dist
