"""The broker layer runs on any event loop the server layer provides: importing it (the coordinator
drivers, the partition facade, configuration) loads no trio, and it waits only through the runtime
port the server installs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafkapy.broker import runtime

BROKER_MODULES = [
    "kafkapy.broker.partitions",
    "kafkapy.broker.coordinator_runtime",
    "kafkapy.broker.group_driver",
    "kafkapy.broker.txn_driver",
    "kafkapy.broker.txn_markers",
    "kafkapy.broker.internal_topics",
    "kafkapy.broker.idempotence",
    "kafkapy.broker.notify",
    "kafkapy.broker.faults",
    "kafkapy.broker.config",
    "kafkapy.broker.stats",
    "kafkapy.broker.context",
    "kafkapy.broker.request_ports",
    "kafkapy.broker.handlers.registry",
]


def test_importing_the_broker_layer_loads_no_trio() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {BROKER_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'trio' or m.startswith('trio.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_loading_every_request_handler_loads_neither_trio_nor_the_server() -> None:
    """The handlers decide what a request means on any event loop: registering all of them (the
    client APIs and the controller listener's) imports no trio and no kafkapy.server module."""
    code = (
        "import sys\n"
        "from kafkapy.broker.handlers import load_handlers\n"
        "load_handlers()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'trio' or m.startswith('kafkapy.server')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_server_package_installs_trio_as_the_runtime() -> None:
    import trio

    import kafkapy.server  # noqa: F401

    rt = runtime.get()
    assert isinstance(rt.event(), trio.Event)

    async def main() -> float:
        with rt.move_on_after(0.01) as scope:
            await rt.event().wait()
        assert scope.cancelled_caught
        return await rt.run_sync_in_thread(lambda: 1.5)

    assert trio.run(main) == 1.5


def test_without_a_runtime_the_broker_layer_says_which_to_install() -> None:
    code = (
        "from kafkapy.broker import runtime\n"
        "try:\n"
        "    runtime.get()\n"
        "except RuntimeError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "import kafkapy.server" in out.stdout


pytestmark = pytest.mark.timeout(60)
