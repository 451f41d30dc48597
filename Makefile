# The README's commands: `make run` and `make test`. Both install what they need.
SWIFT ?= swift
VENV := .venv
PYTHON := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8080
# Every test run is bounded; a hang fails instead of stalling CI.
TEST_TIMEOUT ?= 1200

.PHONY: all build release run test unit-test e2e-test bench clean

all: build

build:
	@scripts/install-deps.sh build
	$(SWIFT) build

release:
	@scripts/install-deps.sh build
	$(SWIFT) build -c release

run: release
	.build/release/receptionist serve --host $(HOST) --port $(PORT) --public Public

$(VENV)/.installed: Tests/e2e/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r Tests/e2e/requirements.txt
	touch $@

test: unit-test e2e-test

unit-test:
	@scripts/install-deps.sh test
	$(SWIFT) build --build-tests
	timeout $(TEST_TIMEOUT) $(SWIFT) test

e2e-test: $(VENV)/.installed
	@scripts/install-deps.sh test
	$(SWIFT) build --product receptionist
	RECEPTIONIST_BIN=.build/debug/receptionist timeout $(TEST_TIMEOUT) $(PYTHON) -m pytest Tests/e2e

bench:
	@scripts/install-deps.sh bench
	$(SWIFT) build -c release --product receptionist
	bench/http.sh

clean:
	rm -rf .build $(VENV)
