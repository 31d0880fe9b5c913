# Two entry points: `make demo` (console on demo data) and `make test` (lint and the quick tier of the suite).
# CI runs `make test`, then `make test-slow` (the tests marked slow), then `make fuzz`: see .ci/run.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PINS := $(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# Two installs: what the console and the CLI run on (`make demo`), and the test extra over it (`make test`).
RUNTIME_STAMP := $(VENV)/.runtime-$(PINS)
STAMP := $(VENV)/.installed-$(PINS)
DEMO_DB ?= demo/hetpool.duckdb
PORT ?= 8501
ADDRESS ?= 127.0.0.1
DEMO_ARGS ?=
# make demo's scrape interval: a minute gives the demo's story at half the samples of hetpool demo's 30 s default,
# so a first run builds it in half the time
DEMO_INTERVAL ?= 1m
# Test modules run in this many processes, each module whole in one (its fixtures stay shared).
TEST_WORKERS ?= 2

.PHONY: demo test test-slow fuzz install runtime lock native system-deps lint bench clean

# The runtime dependencies alone: no test extra (pytest, Playwright, Ray, mypy, ruff). --no-compile leaves the
# byte-compiling to the first import, which compiles only the modules the console and the CLI load.
$(RUNTIME_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-compile -c constraints.txt -e .
	rm -f $(VENV)/.runtime-*
	touch $@

$(STAMP): $(RUNTIME_STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

runtime: $(RUNTIME_STAMP)

install: $(STAMP)

# Re-pins constraints.txt to the newest releases the ranges in pyproject.toml allow.
lock:
	@PYTHON=$(PYTHON) sh scripts/lock.sh

# The replay's hot modules compiled with mypyc (from the test extra) into .native/ (replay/native.py); a no-op when
# up to date, and without a C compiler the replay runs as pure Python with the same results. On CI (CI set) a build
# that cannot be made fails the run, and the tests then insist on it (HETPOOL_COMPILED=1 where they compare the two).
native: install
	@$(PY) scripts/build_native.py $(if $(CI),--strict,)

system-deps:
	@sh scripts/system-deps.sh

# The runtime install alone: the demo builds as fast in pure Python as the compile of the replica would take. A
# replica that `make native` compiled before is used.
demo: runtime
	@mkdir -p $(dir $(DEMO_DB)) $(dir $(DEMO_DB))drop
	$(VENV)/bin/hetpool --db $(DEMO_DB) demo --replace --interval $(DEMO_INTERVAL) $(DEMO_ARGS)
	$(VENV)/bin/hetpool --db $(DEMO_DB) console --port $(PORT) --address $(ADDRESS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# The two tiers split the suite on the slow marker: every test is in exactly one (tests/test_tiers.py).
test: native system-deps lint
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow"

test-slow: native system-deps
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile -m "slow"

fuzz: native
	sh scripts/fuzz.sh $(VENV)/bin/pytest

bench: native system-deps
	$(PY) -m benchmarks.bench_ingest
	$(PY) -m benchmarks.bench_prometheus
	$(PY) -m benchmarks.bench_replay
	$(PY) -m benchmarks.bench_console
	$(PY) -m benchmarks.bench_concurrency
	$(PY) -m benchmarks.bench_registry
	$(PY) -m benchmarks.bench_cli

clean:
	rm -rf $(VENV) .native demo test-artifacts .pytest_cache .mypy_cache .ruff_cache
