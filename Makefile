# The two commands of the README: `make up` and `make test`. Everything else they need is
# installed here, into .venv, from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME_STAMP := $(VENV)/.runtime-installed
DEV_STAMP := $(VENV)/.dev-installed

.PHONY: up test lint unit bench postgres clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(RUNTIME_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(RUNTIME_STAMP)

up: $(RUNTIME_STAMP)
	$(BIN)/herder up

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy

postgres:
	scripts/ensure-postgres.sh

test: lint postgres
	$(BIN)/pytest --junitxml=.test-results/junit.xml $(PYTEST_ARGS)

unit: $(DEV_STAMP)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

bench: $(DEV_STAMP) postgres
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) .test-results .pytest_cache .mypy_cache .ruff_cache
