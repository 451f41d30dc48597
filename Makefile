# The README's commands: `make run` and `make test`. Both install what they need.
SWIFT ?= swift
VENV := .venv
PYTHON := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8080
# Where `make run` keeps its stores and topics (the disk engine), so they survive a restart.
DATA_DIR ?= .data
# Every test run is bounded; a hang fails instead of stalling CI.
TEST_TIMEOUT ?= 1200
# Seconds each libFuzzer target runs: a long session (`make fuzz`) and the check in `make test`.
FUZZ_SECONDS ?= 300
FUZZ_TEST_SECONDS ?= 30

.PHONY: all build release run test unit-test tsan-test fuzz-test e2e-test container-test fuzz soak bench bench-http bench-model bench-ws bench-state bench-storm bench-deflate bench-presence bench-cluster bench-durable bench-restart bench-hooks clean

all: build

# A built gateway is stamped with the commit it was built from (`receptionist --version`).
STAMP = python3 scripts/stamp-commit.py

build:
	@scripts/install-deps.sh build
	$(SWIFT) build
	$(STAMP) .build/debug/receptionist

release:
	@scripts/install-deps.sh build
	$(SWIFT) build -c release
	$(STAMP) .build/release/receptionist

run: release
	.build/release/receptionist serve --host $(HOST) --port $(PORT) --public Public --demo --data-dir $(DATA_DIR)

$(VENV)/.installed: Tests/e2e/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r Tests/e2e/requirements.txt
	touch $@

test: unit-test tsan-test fuzz-test e2e-test container-test

unit-test:
	@scripts/install-deps.sh test
	$(SWIFT) build --build-tests
	timeout $(TEST_TIMEOUT) $(SWIFT) test

# The concurrency suites again under ThreadSanitizer, in a build folder of their own; any report
# fails the run. The stress tests run at a tenth of their size there (TSan is ~10x slower).
tsan-test:
	@scripts/install-deps.sh test
	RECEPTIONIST_STRESS_SCALE=0.1 timeout $(TEST_TIMEOUT) $(SWIFT) test --sanitize=thread --scratch-path .build-tsan \
		--filter 'ReceptionistModelTests|ReceptionistPushTests|ReceptionistDiskTests|MailboxTests|ClusterFollowerQueueTests'

# The codecs' libFuzzer targets (docs/FUZZING.md) under AddressSanitizer with leak detection, in a
# build folder of their own. A crash, failed invariant, leak or hang fails the run.
fuzz-test:
	@scripts/install-deps.sh build
	SWIFT="$(SWIFT)" scripts/fuzz.sh $(FUZZ_TEST_SECONDS)

# A longer session with the same targets; inputs that reach new code stay in .build-fuzz/corpus/.
fuzz:
	@scripts/install-deps.sh build
	SWIFT="$(SWIFT)" scripts/fuzz.sh $(FUZZ_SECONDS)

e2e-test: $(VENV)/.installed
	@scripts/install-deps.sh test
	$(SWIFT) build --product receptionist
	$(STAMP) .build/debug/receptionist
	RECEPTIONIST_BIN=.build/debug/receptionist timeout $(TEST_TIMEOUT) $(PYTHON) -m pytest Tests/e2e

# The image from deploy/Dockerfile on a local Debian base, run under podman (as root), and the
# other files in deploy/ checked. The image has no Swift runtime, so the binary carries its own.
container-test: $(VENV)/.installed
	@scripts/install-deps.sh container
	$(SWIFT) build -c release --static-swift-stdlib --product receptionist
	$(STAMP) .build/release/receptionist
	timeout $(TEST_TIMEOUT) $(PYTHON) -m pytest -q -c Tests/container/pytest.ini Tests/container
	PYTHON=$(PYTHON) timeout $(TEST_TIMEOUT) Tests/container/run.sh .build/release/receptionist

# Mixed load against the release binary for SOAK_SECONDS, watching its memory and descriptors;
# fails unless both stay flat and the resuming clients lose nothing. Not part of `make test`.
SOAK_SECONDS ?= 600

soak: $(VENV)/.installed
	@scripts/install-deps.sh test
	$(SWIFT) build -c release --product receptionist
	$(STAMP) .build/release/receptionist
	SOAK_SECONDS=$(SOAK_SECONDS) RECEPTIONIST_BIN=.build/release/receptionist \
		timeout $$(( $(SOAK_SECONDS) + 300 )) $(PYTHON) Tests/soak/soak.py

bench: bench-model bench-http bench-ws bench-state bench-cluster bench-durable bench-restart bench-hooks

bench-model:
	@scripts/install-deps.sh build
	$(SWIFT) build -c release --product receptionist-bench
	.build/release/receptionist-bench model --threads 1 2 --changes-per-set 1 16 256
	# The same workload kept by the disk engine beside memory (commits handed over, 4,096 in flight).
	.build/release/receptionist-bench model --threads 1 --changes-per-set 1 16 256 --policies coalesce \
		--engines memory disk-interval disk-always --window 4096

# Durable commits: the disk engine with --fsync always beside the redis engine on a Redis that
# syncs every write (bench/durable.sh: 64 writers, one request in flight each, single changes).
bench-durable:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	bench/durable.sh 10 64 1
	bench/durable.sh 10 64 64

# A store of 1,000,000 models and 100,000 retained change sets, restarted (bench/restart.sh).
bench-restart:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	bench/restart.sh 1000000 100000 3

# The hooks' cost (bench/hooks.sh): a connect storm of 10,000 through the connect hook against
# the same storm with tokens, and publishing through the publish hook against a token's claim.
bench-hooks: $(VENV)/.installed
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	bench/hooks.sh 10000 20000

bench-http:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	bench/http.sh

# The peers for bench-ws that PyPI carries (socketify, a binding over uWebSockets) live apart from the tests' venv.
.venv-bench/.installed: bench/peers/requirements.txt
	@scripts/install-deps.sh bench
	python3 -m venv .venv-bench
	.venv-bench/bin/pip install --quiet --disable-pip-version-check -r bench/peers/requirements.txt
	touch $@

bench-ws: .venv-bench/.installed
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	$(SWIFT) build -c release --product receptionist-bench
	bench/ws.sh

# The reconnect storm alone (bench/storm.sh through bench/ws.sh): 10,000 store subscribers dropped
# at once and resuming, half from inside the history and half from too far back.
bench-storm:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	$(SWIFT) build -c release --product receptionist-bench
	BENCH_SERVERS=receptionist BENCH_SCENARIOS=storm bench/ws.sh

# permessage-deflate beside socketify's shared compressor, and presence under churn: two of
# bench-ws's scenarios alone (docs/PERFORMANCE.md).
bench-deflate: .venv-bench/.installed
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	$(SWIFT) build -c release --product receptionist-bench
	BENCH_SERVERS="receptionist socketify" BENCH_SCENARIOS=compression bench/ws.sh

bench-presence:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	$(SWIFT) build -c release --product receptionist-bench
	BENCH_SERVERS=receptionist BENCH_SCENARIOS=presence bench/ws.sh

# Publishing through the cluster path against one node (bench/cluster.sh): the same
# request-response publisher, one node with the memory engine, one and two with the redis engine,
# and the floor (bench/floor/relay.c: answering only, or after one INCR in Redis).
bench-cluster:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	$(SWIFT) build -c release --product receptionist-bench
	bench/cluster.sh

# State sync (bench/state.sh): a store animated at 2,000 change sets a second, pushed to 1,000
# subscribers taking every change (beside socketify relaying the same stream), to 1,000 with
# maxRate 10, and to 10,000 with maxRate 10 in ten filter groups.
bench-state: .venv-bench/.installed
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	$(SWIFT) build -c release --product receptionist-bench
	bench/state.sh

clean:
	rm -rf .build .build-tsan .build-fuzz $(VENV) .venv-bench
