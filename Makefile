# The two commands a new user types are `make demo` and `make test`.
GO      ?= go
KOALA   := bin/koala
PKGS    := ./...

.PHONY: all build demo test test-short up down status install bench bench-profile soak clean vet ui-assets

all: build

build:
	$(GO) build -o $(KOALA) ./cmd/koala

# Sets up and starts the whole local stack, runs the hello-world scale-out,
# prints its summary and writes results/<workflow>/throughput.png.
demo: build
	./$(KOALA) stack up
	./$(KOALA) run experiments/hello.json
	@echo "The stack keeps running so you can browse http://127.0.0.1:8233 (Temporal) and http://127.0.0.1:8280 (koala ui) — stop it with: make down"

install: build
	./$(KOALA) stack install

# Unit tests plus the end-to-end tests, which start their own Temporal, NATS,
# Kafka and ClickHouse processes on free ports (installed on first use); then
# the data plane and the state packages, which hold the concurrent code,
# again under the race detector.
RACE_PKGS := ./dataplane/... ./statesvc/...
test: install
	$(GO) vet $(PKGS)
	$(GO) test -count=1 -timeout 40m $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)

test-short: build
	$(GO) test -count=1 -short $(PKGS)

up: build
	./$(KOALA) stack up

down: build
	./$(KOALA) stack down

status: build
	./$(KOALA) stack status

# Benchmarks against the local stack (about 28 min on 2 cores): go test
# hot-path benchmarks, steady state per core (hello, counter, nexmark-q5,
# Nexmark q1, the counter over 10 M keys; tuned variants labelled), component
# ceilings, disruption per protocol at 70 % of a probed rate, the autoscaler
# through a 2x input step with lazy and stop-and-restart (~3.5 min; alone:
# BENCH_FLAGS='--phases autoscale'), scaling with
# state (in-process), RSS under backpressure, q6* over 2 GB of state
# (large-state); writes BENCHMARKS.md and results/bench/. One row alone:
# BENCH_FLAGS='--phases large-state --rows q6-1task'.
# BENCH_RUN_DIR is the stack's run directory (worker PID files); BENCH_FLAGS go
# to `koala bench`, e.g. BENCH_FLAGS='--phases ceilings,rss' (koala bench --help).
# CPU profiles: `make bench-profile` or `make bench BENCH_FLAGS=--profile`
# (the stack's workers then get a pprof endpoint: stack up --worker-pprof;
# a stack already running without it must be stopped first, make down).
BENCH_RUN_DIR ?= $(if $(KOALA_HOME),$(KOALA_HOME),.koala)/run
BENCH_FLAGS   ?=
BENCH_STACK_FLAGS ?= $(if $(filter --profile,$(BENCH_FLAGS)),--worker-pprof)
bench: build
	./$(KOALA) stack up --run-dir $(BENCH_RUN_DIR) $(BENCH_STACK_FLAGS)
	GO=$(GO) ./$(KOALA) bench --run-dir $(BENCH_RUN_DIR) $(BENCH_FLAGS)

bench-profile:
	$(MAKE) bench BENCH_FLAGS='--profile $(BENCH_FLAGS)'

# Chaos soak on the local stack (koala soak --help): random reconfigurations
# and faults for SOAK_MINUTES with seed SOAK_SEED, then the oracle checks
# every output; exits 1 unless all are exact. A failing seed reproduces its
# run: make soak SOAK_SEED=<seed>. Results under results/soak-<seed>-<time>/.
SOAK_MINUTES ?= 15
SOAK_SEED    ?= 1
soak: build
	./$(KOALA) stack up
	./$(KOALA) soak --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED)

vet:
	$(GO) vet $(PKGS)

# koala ui's charting library: npm installs the version pinned in
# experiments/ui/web/package-lock.json and its dist files are copied into
# experiments/ui/assets, which the binary embeds (committed, so that a
# build needs no npm). Run after changing the version in package.json.
UI_WEB := experiments/ui/web
ui-assets:
	cd $(UI_WEB) && npm ci --no-audit --no-fund
	cp $(UI_WEB)/node_modules/uplot/dist/uPlot.iife.min.js $(UI_WEB)/node_modules/uplot/dist/uPlot.min.css experiments/ui/assets/
	cp $(UI_WEB)/node_modules/uplot/LICENSE experiments/ui/assets/uPlot.LICENSE

clean: down
	rm -rf bin results
