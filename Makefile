# The two commands of the README: `make up` and `make test`. Everything else they need is
# installed here, into .venv, from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed
BENCH_STAMP := $(VENV)/.bench-installed

# Debian packages a root worker and the tests use: a C compiler and the kernel's headers (the
# sandbox launcher is built from source once per host), nft (attempt networks), ip, nsenter,
# setpriv.
SYSTEM_PACKAGES := gcc libc6-dev linux-libc-dev nftables iproute2 util-linux
# What only `make test` needs besides: the browser the dashboard's test drives (Playwright,
# from the dev extra, uses this system chromium; it never downloads a browser), the load
# balancer the scale-out test puts in front of three API processes, and pg_auto_failover (of
# the installed PostgreSQL's version) for the database failover test's formation.
POSTGRES_VERSION := $(shell ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)
FAILOVER_PACKAGES := $(if $(POSTGRES_VERSION),postgresql-$(POSTGRES_VERSION)-auto-failover)
TEST_PACKAGES := chromium haproxy busybox-static $(FAILOVER_PACKAGES)

.PHONY: up test lint unit bench postgres redis system-packages test-packages failover-packages clean

# Each slow step says what it does first: a first `make up` is quiet for a minute otherwise.
$(BIN)/python:
	@echo "make: creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing Herder and its dependencies into $(VENV) (pip, a minute or so)"
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	@echo "make: installing Herder with its test tools into $(VENV) (pip, a few minutes)"
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(RUNTIME_STAMP)

# The bench's extras (the Celery peer) only for `make bench`: the tests never need them.
$(BENCH_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@ $(DEV_STAMP) $(RUNTIME_STAMP)

# Quick when all are there (dpkg -s); apt-get update only when one is missing. A user who is
# not root is told what is missing: only a root worker (and the browser test) needs them.
define install_missing
	@missing=$$(for package in $(1); do \
		dpkg -s $$package >/dev/null 2>&1 || echo $$package; done); \
	if [ -z "$$missing" ] || ! command -v dpkg >/dev/null; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "not installed ($(2)): $$missing"; exit 0; fi; \
	echo "make: installing system packages ($(2)): $$missing"; \
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing
endef

system-packages:
	$(call install_missing,$(SYSTEM_PACKAGES),a root worker needs them)

test-packages:
	$(call install_missing,$(TEST_PACKAGES),the dashboard's browser test needs them)

failover-packages:
	$(call install_missing,$(FAILOVER_PACKAGES),the failover scenario needs them)

# `make up PORT=9090` (the API's port) and `make up ARGS="--home /srv/herder"` (any of
# `herder up --help`) pass through to herder up.
PORT ?=
ARGS ?=
up: system-packages $(RUNTIME_STAMP)
	$(BIN)/herder up $(if $(PORT),--port $(PORT)) $(ARGS)

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

postgres:
	scripts/ensure-postgres.sh

# The lint runs beside the tests; their PostgreSQL is a server of their own, or the machine's
# (scripts/ensure-postgres.sh) where none can be made.
test: system-packages test-packages $(DEV_STAMP)
	scripts/run-tests.sh $(PYTEST_ARGS)

unit: $(DEV_STAMP)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

redis:
	scripts/ensure-redis.sh

bench: system-packages failover-packages $(BENCH_STAMP) postgres redis
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .test-results .pytest_cache .mypy_cache .ruff_cache
