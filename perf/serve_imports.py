"""Where `kafkapy serve` spends its start: CPU time of each import stage, in dependency order.

Why: `perf/cli_bench.py` says how long `serve --memory` takes to its ready line; this says which
part of the import graph the time goes to, so a lazy import is aimed where it pays. Each stage
is timed with `time.process_time()` (CPU of this process, less sensitive to a loaded machine than
wall time) and counts only what the stages before it did not already import; the API message
modules are counted where they first load, the last line shows what is left. The stages through
`kafkapy.server.app` are what `serve` imports before its ready line; the handler modules (and the
message and coordinator classes they use) load later, on each API's first request.

    .venv/bin/python perf/serve_imports.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import subprocess
import sys
import time

STAGES: list[tuple[str, list[str]]] = [
    ("trio", ["trio"]),
    ("click + kafkapy.cli.main", ["click", "kafkapy.cli.main"]),
    ("protocol: codec (construct), records, compression",
     ["kafkapy.protocol.codec", "kafkapy.protocol.records", "kafkapy.protocol.compression"]),
    ("storage", ["kafkapy.storage"]),
    ("raft + controller", ["kafkapy.raft", "kafkapy.controller"]),
    ("coordinator: idempotence; group and txn facades (their classes load on first use)",
     ["kafkapy.coordinator.group", "kafkapy.coordinator.txn", "kafkapy.coordinator.idempotence"]),
    ("the rest of kafkapy.server.app", ["kafkapy.server.app"]),
]


def one_run() -> None:
    """Time the stages in this (fresh) interpreter and print one line per stage."""
    lines: list[tuple[str, float]] = []
    for name, modules in STAGES:
        start = time.process_time()
        for module in modules:
            importlib.import_module(module)
        lines.append((name, time.process_time() - start))
    start = time.process_time()
    handlers = importlib.import_module("kafkapy.broker.handlers")
    for info in pkgutil.iter_modules(handlers.__path__):
        importlib.import_module(f"kafkapy.broker.handlers.{info.name}")
    lines.append(("request handler modules (serve loads each on its API's first request)", time.process_time() - start))
    messages = importlib.import_module("kafkapy.protocol.messages")
    start = time.process_time()
    for api in messages.APIS.values():
        importlib.import_module(f"kafkapy.protocol.messages.{api.module}")
    lines.append(("API message modules not loaded yet", time.process_time() - start))
    for name, seconds in lines:
        print(f"{seconds * 1000:7.0f} ms  {name}")
    print(f"{sum(s for _, s in lines) * 1000:7.0f} ms  total")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="fresh interpreters to run")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        one_run()
        return 0
    for _ in range(args.repeat):
        subprocess.run([sys.executable, __file__, "--child"], check=True)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
