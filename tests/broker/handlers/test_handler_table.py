"""The handler table: every API a listener advertises dispatches to a handler, and a started
broker imports an API's handler module only when a client first asks for that API.

Why it matters to users: ApiVersions is answered from the table, so each API it lists must reach
its handler on first use (the module is imported then); and a broker that imported every handler
and message module at start took ~0.1 s longer to be ready."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.broker.handlers import (
    BROKER_HANDLERS,
    CONTROLLER_HANDLERS,
    HandlerEntry,
    load_handlers,
)
from kafkapy.broker.handlers.registry import (
    CONTROLLER_REGISTRY,
    REGISTRY,
    advertised_versions,
    controller_handler,
    lookup,
)
from kafkapy.protocol import SUPPORTED_VERSIONS, ApiKey

ENTRIES = [(False, k, e) for k, e in BROKER_HANDLERS.items()] + [(True, k, e) for k, e in CONTROLLER_HANDLERS.items()]
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("controller", "api_key", "entry"), ENTRIES,
    ids=[f"{'controller' if c else 'broker'}-{ApiKey(k).name}" for c, k, _ in ENTRIES],
)
def test_every_api_in_the_table_dispatches_to_its_handler(controller: bool, api_key: int, entry: HandlerEntry) -> None:
    """Looked up by the int key a request header carries, each API reaches a coroutine function
    of the module the table names, serving exactly the advertised range (within the codec's)."""
    spec = lookup(int(api_key), controller=controller)
    assert spec is not None
    assert inspect.iscoroutinefunction(spec.func)
    assert spec.func.__module__ == f"kafkapy.broker.handlers.{entry.module}"
    assert (spec.min_version, spec.max_version) == (entry.min_version, entry.max_version)
    codec_low, codec_high = SUPPORTED_VERSIONS[ApiKey(api_key)]
    assert codec_low <= entry.min_version <= entry.max_version <= codec_high
    assert (int(api_key), entry.min_version, entry.max_version) in advertised_versions(controller=controller)


def test_the_loaded_registries_are_exactly_the_tables() -> None:
    """No handler module registers an API the table does not list (it would be served but never
    advertised, nor found before its module happened to load)."""
    load_handlers()
    assert set(REGISTRY) == set(BROKER_HANDLERS)
    assert set(CONTROLLER_REGISTRY) == set(CONTROLLER_HANDLERS)


def test_a_handler_the_table_does_not_place_is_refused() -> None:
    """ApiVersions answers from the table, so a handler it does not list would be served but
    never advertised: registering one fails (DescribeCluster on the controller listener)."""

    async def handle(ctx: object, req: object) -> None:
        return None

    handle.__module__ = "kafkapy.broker.handlers.describe_cluster"
    with pytest.raises(ValueError, match="handler table"):
        controller_handler(ApiKey.DESCRIBE_CLUSTER, min_version=0, max_version=1)(handle)
    assert int(ApiKey.DESCRIBE_CLUSTER) not in CONTROLLER_REGISTRY


def test_an_api_nobody_serves_is_not_found() -> None:
    assert lookup(9999) is None
    assert lookup(int(ApiKey.VOTE)) is None  # a controller-listener API, asked on a broker listener


_FRESH_BROKER = """
import sys, trio
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import DescribeClusterRequest
from tests.server.helpers import Client, running_broker

def loaded(module):
    return f"kafkapy.broker.handlers.{module}" in sys.modules

COORDINATORS = ("kafkapy.coordinator.group.coordinator", "kafkapy.coordinator.txn.coordinator")

async def main():
    async with running_broker(None) as (_, _, port):
        before = {m: loaded(m) for m in ("fetch", "groups", "transactions", "describe_cluster")}
        client = await Client.connect(port)
        resp = await client.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest())
        await client.aclose()
        print(before, resp.error_code, len(resp.brokers), loaded("describe_cluster"), loaded("fetch"))
        print([m for m in COORDINATORS if m in sys.modules])

trio.run(main)
"""


def test_a_started_broker_imports_a_handler_module_on_the_first_request_of_its_api() -> None:
    """In a fresh interpreter (this one has imported every handler by now): at ready no handler
    module of an API nobody used is imported; the first DescribeCluster imports its module and
    is answered (one broker, no error); Fetch's module is still not imported, nor are the group
    and transaction coordinators (their drivers build them on a first group or transaction)."""
    out = subprocess.run(
        [sys.executable, "-c", _FRESH_BROKER], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    before = "{'fetch': False, 'groups': False, 'transactions': False, 'describe_cluster': False}"
    *_, answered, coordinators = out.stdout.strip().split("\n")
    assert answered == f"{before} 0 1 True False"
    assert coordinators == "[]"
