# kafkapy developer entry points. `make run` and `make test` are the whole quick start.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[test]'
	touch $(TEST_STAMP)

run: $(STAMP)
	$(PY) -m kafkapy serve --data-dir ./data

test: $(TEST_STAMP)
	$(PY) -m ruff check kafkapy tests compat_tests perf
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) -m pytest -q

lint: $(TEST_STAMP)
	$(PY) -m ruff check kafkapy tests compat_tests perf
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy

bench: $(TEST_STAMP)
	$(PY) perf/protocol_bench.py
	$(PY) perf/storage_bench.py
	$(PY) perf/bench.py
	$(PY) perf/groups_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
