# terway-sim: a Terway-style container network for Kubernetes on Alibaba
# Cloud, built simulation-first. `make help` lists the targets.

GO          ?= go
BIN         ?= $(CURDIR)/bin
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(BIN)/staticcheck
# Short fuzz smoke run per target inside `make test`; `make fuzz` runs longer.
# The smoke budget is a count of executions, not a duration: Go 1.26's fuzz
# coordinator can fail a duration-bounded run at its deadline with
# "context deadline exceeded" and no failing input (go.dev/issue/75804,
# fixed in Go 1.27). A count has no deadline to race.
FUZZ_SMOKE  ?= 20000x
FUZZ_LONG   ?= 2m
FUZZ_TARGETS := \
	./fakecloud/wire:FuzzParseRequest \
	./fakecloud/wire:FuzzVerify \
	./fakecloud:FuzzServeAPI \
	./daemon/config:FuzzParse

# grpcnotrace drops grpc's golang.org/x/net/trace, whose html/template
# turns off the linker's dead-method elimination: terwayd is 52 MB instead
# of 141 MB and starts at 28 MiB RSS instead of 39 MiB.
export GOFLAGS := -tags=grpcnotrace $(GOFLAGS)

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build every command into ./bin
	@mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

.PHONY: test
test: ## All tests with -race, a short fuzz smoke run, then the smoke specs on a fresh lab per mode (root)
	$(GO) test -race -count=1 -timeout 30m ./...
	@$(MAKE) --no-print-directory fuzz FUZZ_TIME=$(FUZZ_SMOKE)
	@$(MAKE) --no-print-directory test-lab

# Flags for terway-lab up/demo/test, e.g. LAB_ARGS="--nodes 3".
LAB_ARGS ?=
# test-lab and scenarios run once per mode, each on a fresh lab.
LAB_MODES ?= ENIMultiIP ENIOnly VPC
# The catalogue's label filter for mode M (scenarios/labels_test.go):
# KIND's specs for M or for any mode.
lab-filter = -ginkgo.label-filter="$(1) && ($(2) || any-mode)"

.PHONY: test-kernel
test-kernel: ## Kernel VM tests (root): under Debian's kernel in qemu (installed if missing), the links this kernel lacks, cni/datapath's tests with IPVlan and VLAN, the lab's e2e matrix for IPVlan, and IPVlan's Setup/Teardown p50/p99 as ratios to PolicyRoute (about 5 min)
	@# A fresh machine has no package lists: the kernel and qemu come from them.
	@apt-cache show linux-image-amd64 >/dev/null 2>&1 || apt-get update -q
	@command -v qemu-system-x86_64 >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-system-x86
	KERNELVM_CACHE=$(CURDIR)/.lab/cache/kernelvm $(GO) test -count=1 -v -run '^TestVM' ./lab/kernelvm/

.PHONY: test-lab
test-lab: build ## Smoke specs (label smoke) on a fresh lab per mode in LAB_MODES; fails if down leaves the machine changed
	@set -e; for m in $(LAB_MODES); do \
		echo "=== smoke specs, mode $$m"; \
		$(BIN)/terway-lab test --mode $$m $(LAB_ARGS) -- -args $(call lab-filter,smoke,$$m); \
	done
	@echo "=== smoke specs, then a crashed supervisor: down cleans up after it"
	$(BIN)/terway-lab test --crash $(LAB_ARGS) -- -run TestScenarios -args -ginkgo.label-filter="smoke && any-mode"

.PHONY: scenarios
scenarios: build ## Feature specs (label feature) on a fresh lab per mode in LAB_MODES, then the dual-stack ones on a dual lab; fails if down leaves the machine changed
	@set -e; for m in $(LAB_MODES); do \
		echo "=== feature specs, mode $$m"; \
		$(BIN)/terway-lab test --mode $$m $(LAB_ARGS) -- -run TestScenarios -timeout 60m -args -ginkgo.v $(call lab-filter,feature,$$m); \
	done
	@echo "=== feature specs, dual stack (ENIMultiIP, --ip-stack dual)"
	$(BIN)/terway-lab test --mode ENIMultiIP --ip-stack dual $(LAB_ARGS) -- -run TestScenarios -timeout 30m \
		-args -ginkgo.v -ginkgo.label-filter="feature && dual-stack"

.PHONY: scenarios-list
scenarios-list: ## List the scenario catalogue with labels, no cluster needed (ginkgo dry run)
	KUBECONFIG= $(GO) test -count=1 -v -run '^TestScenarios$$' ./scenarios/ -args -ginkgo.dry-run -ginkgo.v -ginkgo.no-color

# chaos runs the chaos specs (scenarios/chaos_test.go, label chaos): every
# plan of the catalogue with seed 1 through lab/chaos/runner, one after the
# other on one fresh 3-node ENIMultiIP lab; terway-lab test compares the
# machine after down. Reports go to .lab/chaos (summary.md over the runs).
CHAOS_ARGS ?=

.PHONY: chaos
chaos: build ## Chaos specs (label chaos): every catalogue plan, seed 1, on a fresh 3-node ENIMultiIP lab; machine compared after down (root)
	$(BIN)/terway-lab test --nodes 3 --mode ENIMultiIP $(LAB_ARGS) -- -timeout 120m -run TestScenarios \
		-args -ginkgo.v -ginkgo.label-filter=chaos $(CHAOS_ARGS)

.PHONY: demo
demo: build ## The main job (root): lab up, workload, connectivity, audit, report, down, machine compared
	$(BIN)/terway-lab demo $(LAB_ARGS)

.PHONY: lab-up
lab-up: build ## Bring the lab up in the background (real Kubernetes on fakecloud, Terway from deploy/)
	$(BIN)/terway-lab up $(LAB_ARGS)

.PHONY: lab-down
lab-down: build ## Take the lab down and remove everything it left (idempotent)
	$(BIN)/terway-lab down

.PHONY: fuzz
fuzz: ## Fuzz every target for FUZZ_TIME (default 2m each; a count like 50000x works too)
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; corpus=$$pkg/testdata/fuzz/$$name; \
		for try in 1 2; do \
			before=$$(ls $$corpus 2>/dev/null | wc -l); \
			echo "fuzz $$pkg $$name for $(or $(FUZZ_TIME),$(FUZZ_LONG))"; \
			if $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(or $(FUZZ_TIME),$(FUZZ_LONG)) $$pkg; then break; fi; \
			after=$$(ls $$corpus 2>/dev/null | wc -l); \
			if [ "$$after" != "$$before" ] || [ $$try = 2 ]; then exit 1; fi; \
			echo "fuzz $$name failed without writing a failing input (Go fuzz coordinator race, go.dev/issue/75804); running it again"; \
		done; \
	done

# soak runs the fault-schedule property test of ./daemon (TestFaultSchedules)
# with many more schedules than `make test` (200): without -race, so that
# 10,000 fit in hours rather than a day. Each failing seed is printed with
# the command that replays it; SOAK_FLAGS adds test flags (e.g. -race, or
# -schedule-logs DIR to keep the daemon logs of failing schedules).
SOAK_SCHEDULES ?= 10000
SOAK_FIRST_SEED ?= 1
SOAK_PARALLEL ?= 4
SOAK_FLAGS ?=

.PHONY: soak
soak: ## Fault-schedule property test with SOAK_SCHEDULES schedules (default 10000, no -race); prints each failing seed
	cd daemon && $(GO) test -count=1 -timeout 0 -run '^TestFaultSchedules$$' $(SOAK_FLAGS) \
		-schedules=$(SOAK_SCHEDULES) -first-seed=$(SOAK_FIRST_SEED) -schedule-parallel=$(SOAK_PARALLEL)

.PHONY: bench
bench: bench-fakecloud bench-daemon bench-cni bench-alloc ## Run the quick benchmark set (under 10 min)

.PHONY: bench-fakecloud
bench-fakecloud: ## Benchmark fakecloud (handler and SDK throughput)
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 2s ./fakecloud/...

.PHONY: bench-daemon
bench-daemon: build ## Benchmark terwayd: warm path, 100-pod burst, churn, RSS of bin/terwayd (about 1 min)
	$(GO) test -run '^$$' -bench '^BenchmarkWarmAllocRelease$$' -benchtime 2000x ./daemon/
	TERWAYD=$(BIN)/terwayd $(GO) test -run '^$$' -bench '^(BenchmarkBurst100|BenchmarkChurn|BenchmarkDaemonRSS)$$' -benchtime 1x ./daemon/

.PHONY: bench-cni
bench-cni: ## Benchmark the terway plugin end to end: warm ADD and DEL p50/p99 (root, about 1 min)
	$(GO) test -run '^$$' -bench '^BenchmarkPluginWarm$$' -benchtime 300x ./lab/e2e/

TERWAY_BENCH := $(BIN)/terway-bench
BENCH_CHECK_DIR ?= $(CURDIR)/.bench-check

# bench-quick runs the gated allocation set into $(1): node scenarios, a
# pool comparison, the Cilium-shaped peer benchmark and a 100-node fleet.
# Its call counts are reproducible with the same seed (bench/README.md).
define bench-quick
	$(TERWAY_BENCH) node --scenario cold-burst --pods 100 --profile default --seed 1 --time-scale 1 --out $(1)
	$(TERWAY_BENCH) node --scenario burst-release --pods 20 --profile default --seed 1 --time-scale 1 --out $(1)
	$(TERWAY_BENCH) compare --scenario warm-churn --pods 20 --duration 2m --tail 40s --profile default --seed 1 --time-scale 0.1 --pool 0/0 --pool 0/5 --pool 0/5,reclaim=20s,reclaim-interval=10s --out $(1)
	$(TERWAY_BENCH) node --scenario exhaustion --pods 100 --profile default --seed 1 --time-scale 0.2 --set ip_exhausted_inhibit=30s --out $(1)
	$(TERWAY_BENCH) node --scenario throttled --pods 100 --profile default --seed 1 --time-scale 0.1 --out $(1)
	$(TERWAY_BENCH) peer --delay 20ms --workers 1 --nodes 20 --out $(1)
	$(TERWAY_BENCH) peer --delay 20ms --workers 10 --nodes 20 --out $(1)
	$(TERWAY_BENCH) peer --delay 50ms --workers 1 --nodes 20 --out $(1)
	$(TERWAY_BENCH) peer --delay 50ms --workers 10 --nodes 20 --out $(1)
	$(TERWAY_BENCH) fleet --nodes 100 --pods-per-node 30 --seed 1 --time-scale 1 --out $(1)
endef

.PHONY: terway-bench
terway-bench:
	@mkdir -p $(BIN)
	$(GO) build -o $(TERWAY_BENCH) ./cmd/terway-bench

.PHONY: bench-alloc
bench-alloc: terway-bench ## Allocation benchmarks, quick set (~3 min) into bench/results/quick, with README and plots
	rm -rf bench/results/quick
	$(call bench-quick,bench/results/quick)
	$(TERWAY_BENCH) report --in bench/results/quick --out bench/results/quick

.PHONY: bench-fleet
bench-fleet: terway-bench ## Fleet simulation, 1,000 nodes x 30 pods, cold start and restart (~5 min) into bench/results/fleet, with README and plots
	rm -rf bench/results/fleet
	$(TERWAY_BENCH) fleet --nodes 1000 --pods-per-node 30 --seed 1 --time-scale 1 --out bench/results/fleet
	$(TERWAY_BENCH) fleet --nodes 1000 --pods-per-node 30 --seed 1 --time-scale 1 --restart --out bench/results/fleet
	$(TERWAY_BENCH) report --in bench/results/fleet --out bench/results/fleet

.PHONY: bench-check
bench-check: terway-bench ## Rerun the quick set and gate it against bench/results/quick (10 % on machine-independent figures)
	rm -rf $(BENCH_CHECK_DIR)
	$(call bench-quick,$(BENCH_CHECK_DIR))
	$(TERWAY_BENCH) check --baseline bench/results/quick --current $(BENCH_CHECK_DIR)

$(STATICCHECK):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: tools
tools: $(STATICCHECK) ## Install the lint tools into ./bin

.PHONY: lint
lint: $(STATICCHECK) ## go vet, gofmt and staticcheck
	$(GO) vet ./...
	@out=$$(gofmt -l .); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(STATICCHECK) ./...

.PHONY: run-fakecloud
run-fakecloud: ## Run fakecloud on 127.0.0.1:18080 with a demo AccessKey
	$(GO) run ./cmd/fakecloud serve --listen 127.0.0.1:18080 \
		--access-key-id LTAIdemo --access-key-secret demo-secret --admin-token demo-admin

PROTOC_GEN_GO_VERSION      ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2

.PHONY: proto-tools
proto-tools: ## Install the protoc plugins into ./bin (protoc itself: apt install protobuf-compiler)
	@mkdir -p $(BIN)
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

.PHONY: proto
proto: ## Regenerate rpc/ from its .proto files (generated code is committed)
	cd rpc && PATH=$(BIN):$$PATH protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative rpc.proto tracing.proto details.proto records.proto

.PHONY: clean
clean: ## Remove build outputs (the lab's cache, .lab/, stays; rm -rf .lab to rebuild it)
	rm -rf $(BIN)
