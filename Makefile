# Plantgate's front door. `make run` serves a demo; `make test` runs every test.
#
# Plugins are standard Go built for WASI preview 1 as reactors (c-shared);
# each lands in bin/plugins as NN-name.wasm, the drop-in directory's naming:
# NN sets the order of the chain.

GO        ?= go
BIN       := bin
PLUGINDIR := $(BIN)/plugins
# Order of the bundled chain: authorize first, then validate rules.
PLUGINS   := 10-bearer-auth 20-plant-rules
# Opt-in plugins: built beside the chain, never in it (docs/operating.md: "Adding the
# rate limiter").
OPTDIR    := $(BIN)/opt-plugins
OPTPLUGINS := 30-rate-limit
LISTEN    ?= 127.0.0.1:8080
ADMIN     ?= 127.0.0.1:9090
FUZZTIME  ?= 10s

.PHONY: all build plugins opt-plugins kits rego test test-race fuzz run lint check bench bench-load soak chaos fixtures docker docker-test docs clean

all: build

build: $(BIN)/plantgate plugins opt-plugins

# The release and commit `plantgate --version`, the admin /readyz and
# plantgate_build_info name; stamped with -X so that they hold where
# GOFLAGS=-buildvcs=false keeps Go from recording VCS data.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/plantgate/plantgate/host/buildinfo.version=$(VERSION) -X github.com/plantgate/plantgate/host/buildinfo.revision=$(REVISION)

$(BIN)/plantgate: FORCE
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./cmd/plantgate

plugins: $(addprefix $(PLUGINDIR)/,$(addsuffix .wasm,$(PLUGINS)))

opt-plugins: $(addprefix $(OPTDIR)/,$(addsuffix .wasm,$(OPTPLUGINS)))

# Each with its sample sidecar, plugins/<name>/NN-name.json.
$(OPTDIR)/%.wasm: FORCE
	@mkdir -p $(OPTDIR)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ ./plugins/$(shell echo $* | sed 's/^[0-9][0-9]-//')
	cp plugins/$(shell echo $* | sed 's/^[0-9][0-9]-//')/$*.json $(OPTDIR)/$*.json

# 10-bearer-auth.wasm is built from plugins/bearer-auth, and so on, with
# the sidecar beside it when the plugin ships one (bearer-auth's declares
# its decision cache).
$(PLUGINDIR)/%.wasm: FORCE
	@mkdir -p $(PLUGINDIR)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@ ./plugins/$(shell echo $* | sed 's/^[0-9][0-9]-//')
	@side=plugins/$(shell echo $* | sed 's/^[0-9][0-9]-//')/$*.json; if [ -f $$side ]; then cp $$side $(PLUGINDIR)/$*.json; fi

# The guest kits for Rust and C (sdk/rust, sdk/c): each kit's native tests,
# and its examples built to $(KITDIR)/<lang>-<example>.wasm (plant-rules,
# the bundled policy; token-quota, an authorize plugin on token lookup and KV).
# Needs clang, lld and wasi-libc, and rustc with the wasm32 std (Debian:
# apt-get install clang lld wasi-libc rustc libstd-rust-dev-wasm32). The Go
# tests check those examples against testdata/expect (cmd/plantgate
# TestKitsExpect, TestKitsServe), skipping without the toolchains unless
# PLANTGATE_REQUIRE_TOOLCHAINS=1.
KITDIR := $(BIN)/kits
KITS   := rust c
kits:
	@for kit in $(KITS); do \
		for ex in plant-rules token-quota; do \
			$(MAKE) -C sdk/$$kit OUT=$(abspath $(KITDIR)) EXAMPLE=$$ex NAME=$$kit-$$ex.wasm BUILD=$(abspath $(KITDIR))/$$kit-build all || exit 1; \
		done; \
		$(MAKE) -C sdk/$$kit BUILD=$(abspath $(KITDIR))/$$kit-build test || exit 1; \
	done
	@ls -l $(KITDIR)/*.wasm

# The Rego plant-rules (sdk/rego): opa test, then built with opa to
# $(KITDIR)/rego-plant-rules.wasm. Needs opa (go install
# github.com/open-policy-agent/opa@v1.22.3; OPA=path when not on PATH).
rego:
	$(MAKE) -C sdk/rego BUILD=$(abspath $(KITDIR))/rego-build test
	$(MAKE) -C sdk/rego OUT=$(abspath $(KITDIR)) NAME=rego-plant-rules.wasm BUILD=$(abspath $(KITDIR))/rego-build all

# Tests that need wasm build it themselves (TestMain), and the store tests
# start their own redis-server; set PLANTGATE_REQUIRE_REDIS=1 to fail
# rather than skip when it is missing.
test:
	@echo "make test: go test -count=1 ./... (unit, HTTP end to end, real wasm plugins in four languages, miniredis and a real redis-server): about 3 minutes on 2 cores. A line per package, in package order: cmd/plantgate, the slowest (~2 minutes), holds back the lines after it."
	$(GO) test -count=1 ./...

# Rewrites the generated part of docs/configuration.md from serve's flag
# definitions; after adding or changing a flag, run it and commit the diff
# (make test fails while the reference is stale).
docs:
	$(GO) test -count=1 -run '^TestConfigurationDoc$$' ./cmd/plantgate -update

test-race:
	$(GO) test -count=1 -race ./host/...

# Fuzz targets as package:Target. `make test` runs their seeds only (the
# f.Add values and testdata/fuzz/<Target>); this explores each for
# FUZZTIME, and a crasher lands in that package's testdata/fuzz to commit.
FUZZ := ./host/http:FuzzDecodePlant ./host/http:FuzzParseBearer ./sdk/abi:FuzzParse ./sdk/abi:FuzzRoundTrip

fuzz:
	@for f in $(FUZZ); do \
		echo "fuzz $${f#*:} in $${f%%:*} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${f#*:}$$" -fuzztime $(FUZZTIME) "$${f%%:*}" || exit 1; \
	done

# Serves on $(LISTEN) with the embedded (not durable) store, the bundled
# plugins and a fresh random dev token, printed here and never by the binary.
run: build
	@token=$$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n'); \
	echo "serving on http://$(LISTEN) with the in-memory store (nothing is kept) and a fresh dev token; Ctrl-C stops it."; \
	echo "Paste these two lines into another shell:"; \
	echo "TOKEN=$$token"; \
	echo "curl -i -X POST http://$(LISTEN)/plants -H \"Authorization: Bearer \$$TOKEN\" -H 'Content-Type: application/json' -d '{\"id\":1,\"name\":\"Monstera\",\"tag\":\"tropical\"}'"; \
	echo "console: http://$(ADMIN)/  (metrics, shadows, fleet; loopback only)"; \
	PLANTGATE_BOOTSTRAP_TOKEN=$$token exec $(BIN)/plantgate serve --listen $(LISTEN) --admin-listen $(ADMIN) --plugins $(PLUGINDIR)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@# .ci/run runs under pipefail: a reader that stops early (head, grep -q,
	@# sed q) kills the writer with SIGPIPE and the run with exit 141.
	@if grep -nE '\|[[:space:]]*(head|tail -n *1$$|grep[^|]*-q|sed[^|]*q)' .ci/run; then echo ".ci/run: a pipe into an early-exiting reader dies of SIGPIPE under pipefail; read the whole output (sed -n 1p, grep >/dev/null)"; exit 1; fi

# need,TOOL,HOW fails with how to install TOOL when it is not on PATH,
# rather than letting a recipe die on "command not found" halfway.
need = @command -v $(1) >/dev/null 2>&1 || { echo "make $@ needs $(1), which is not on PATH: $(2)" >&2; exit 1; }

# check fails when formatting or generated fixtures leave a diff.
check: lint fixtures
	@git diff --exit-code -- testdata || (echo "fixtures are stale: run make fixtures and commit"; exit 1)

# Rebuilds the hand-written ABI fixtures (needs wabt's wat2wasm).
fixtures:
	$(call need,wat2wasm,install wabt (Debian/Ubuntu: apt-get install wabt; macOS: brew install wabt))
	@for f in testdata/abi/*.wat testdata/conformance/*.wat; do wat2wasm --enable-all "$$f" -o "$${f%.wat}.wasm" || exit 1; done

# Micro-benchmarks; each reports ns/op and allocs/op beside its baseline.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# Load benchmark: its own redis-server (AOF everysec), bin/plantgate with the
# bundled plugins, and a bare Fiber echo as the ceiling, driven by wrk over
# loopback; prints medians of 3 rounds (about 4 minutes). Needs wrk and
# redis-server.
BENCH_FLAGS ?=
bench-load: build $(BIN)/plantgate-bench
	$(call need,wrk,apt-get install wrk (macOS: brew install wrk))
	$(call need,redis-server,apt-get install redis-server (macOS: brew install redis))
	$(BIN)/plantgate-bench -gateway $(BIN)/plantgate -plugins $(PLUGINDIR) -rate-limit $(OPTDIR)/30-rate-limit.wasm $(BENCH_FLAGS)

# 10 minutes of load on the gateway, one row every 30s: req/s, p99, RSS and
# the plugins' guest memory. Not part of CI.
soak: build $(BIN)/plantgate-bench
	$(BIN)/plantgate-bench -gateway $(BIN)/plantgate -plugins $(PLUGINDIR) -soak 10m -interval 30s $(BENCH_FLAGS)

# The nemesis harness (docs/reliability.md): a 3+3 Redis Cluster with AOF,
# three gateways with --redis-wait-replicas 1, clients and faults drawn from
# CHAOS_SEED (random when empty, printed) for CHAOS_DURATION; the history is
# checked with porcupine. Exits non-zero on any anomaly. Needs redis-server
# and redis-cli.
CHAOS_DURATION ?= 10m
CHAOS_SEED     ?=
CHAOS_FLAGS    ?=
chaos: build $(BIN)/plantgate-chaos
	$(call need,redis-server,apt-get install redis-server (macOS: brew install redis))
	$(BIN)/plantgate-chaos -gateway $(BIN)/plantgate -plugins $(PLUGINDIR) -duration $(CHAOS_DURATION) $(if $(CHAOS_SEED),-seed $(CHAOS_SEED)) $(CHAOS_FLAGS)

$(BIN)/plantgate-chaos: FORCE
	$(GO) build -o $@ ./cmd/plantgate-chaos

$(BIN)/plantgate-bench: FORCE
	$(GO) build -o $@ ./cmd/plantgate-bench

# The container image (Dockerfile): static binary and bundled plugins on
# distroless, non-root. Needs a Docker engine.
IMAGE ?= plantgate
docker:
	$(call need,docker,install Docker Engine: https://docs.docker.com/engine/install/)
	@docker info >/dev/null 2>&1 || { echo "make docker needs a running Docker engine: docker info fails" >&2; exit 1; }
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE):$(VERSION) -t $(IMAGE):local .

# Starts compose.yaml (Redis with AOF, the gateway) and creates a plant
# through it; skips, saying why, without a Docker engine or compose.
docker-test:
	VERSION=$(VERSION) REVISION=$(REVISION) scripts/docker-test.sh

clean:
	rm -rf $(BIN)

FORCE:
