"""Command line entry point: `kafkapy serve`.

`kafkapy serve` is the embedded developer default: one combined node (node id 1) listening on
PLAINTEXT://127.0.0.1:9092 with data in ./data and topic auto-creation on. Everything else comes
from a Kafka-style `server.properties` (`--config`), `KAFKAPY_*` environment variables, and
`--override key=value`, in increasing priority; `--listeners`, `--data-dir` and `--node-id` are
shorthands for the matching overrides. `--memory` runs on a temporary data dir removed at exit.

When ready it prints exactly one line to stderr: `kafkapy ready: listening on HOST:PORT ...`.
SIGINT/SIGTERM stop it cleanly (exit 0).

Cluster mode (`controller.quorum.voters` naming more than one voter, see docs/cluster.md): the
same command on every node; the ready line then waits until the node has joined (its broker
registration is unfenced) and lists the broker listeners first, then the controller listener.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from kafkapy.cli import groups as groups_cli

if TYPE_CHECKING:  # imported in serve(): `kafkapy --help` need not load the broker
    import trio

    from kafkapy.server.app import Server

__all__ = ["main"]

log = logging.getLogger("kafkapy")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafkapy", description="A Kafka-compatible broker in Python."
    )
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="run a broker (a single node, or a cluster member)")
    serve.add_argument("--config", type=Path, help="a Kafka server.properties file")
    serve.add_argument(
        "--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092 (port 0 picks a free port)"
    )
    where = serve.add_mutually_exclusive_group()
    where.add_argument("--data-dir", help="data directory (log.dirs)")
    where.add_argument("--memory", action="store_true", help="temporary data dir, removed at exit")
    serve.add_argument("--node-id", type=int, help="node.id")
    serve.add_argument(
        "--sasl-user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="a SASL user for PLAIN and SCRAM-SHA-256/512 (repeatable; adds to kafkapy.sasl.users)",
    )
    serve.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help="HTTP listener for /metrics, /healthz, /readyz and the status page "
        "(kafkapy.http.listener; a bare PORT binds 127.0.0.1)",
    )
    serve.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="set any config key"
    )
    serve.add_argument("--log-level", default=os.environ.get("KAFKAPY_LOG_LEVEL", "INFO"))
    groups_cli.add_parser(sub)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"kafkapy: --override needs KEY=VALUE, got {item!r}")
        result[key.strip()] = value
    if args.listeners:
        result["listeners"] = args.listeners
        # advertise what --listeners binds (its real port when 0), not a config file's address
        result.setdefault("advertised.listeners", "")
    if args.data_dir:
        result["log.dirs"] = args.data_dir
    if args.node_id is not None:
        result["node.id"] = str(args.node_id)
    if args.http:
        result["kafkapy.http.listener"] = args.http
    if args.sasl_user:
        given = result.get("kafkapy.sasl.users", "")
        result["kafkapy.sasl.users"] = ",".join(filter(None, [given, *args.sasl_user]))
    return result


async def _watch_signals(
    signals: AsyncIterator[int], server: Server, scope: trio.CancelScope
) -> None:
    async for signum in signals:
        if not server.shutdown_requested:
            log.info("received %s, shutting down", signal.Signals(signum).name)
            server.request_shutdown()
        else:
            log.warning("received %s again, stopping now", signal.Signals(signum).name)
            scope.cancel()


def serve(args: argparse.Namespace) -> int:
    import trio

    from kafkapy.server.app import ListenError, Server
    from kafkapy.server.broker import Broker
    from kafkapy.server.config import BrokerConfig, ConfigError
    from kafkapy.server.security import credentials_of, listener_security
    from kafkapy.storage.errors import StorageError

    env = {k: v for k, v in os.environ.items() if k != "KAFKAPY_LOG_LEVEL"}
    try:
        config = BrokerConfig.load(args.config, env, _overrides(args))
        broker = Broker(config, memory=args.memory)
        # TLS files and SASL settings are checked now, so a bad path is one clear line (exit 2)
        listener_security(config, credentials_of(broker))
    except (ConfigError, ValueError, OSError, StorageError) as e:
        print(f"kafkapy: {e}", file=sys.stderr)
        return 2

    async def run() -> None:
        server = Server(broker)
        # The receiver stays installed until the end: a second signal forces a fast exit
        # instead of a KeyboardInterrupt traceback.
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                bound = await nursery.start(server.run)
                nursery.start_soon(_watch_signals, signals, server, nursery.cancel_scope)
                if not await server.wait_ready():
                    await server.stopped.wait()
                    nursery.cancel_scope.cancel()
                    return
                addresses = ", ".join(
                    f"[{b.host}]:{b.port}" if ":" in b.host else f"{b.host}:{b.port}" for b in bound
                )
                # Printed, not logged (logging also writes to stderr, so both made it two
                # lines): tools wait for this one line, and --log-level must not hide it.
                line = f"kafkapy ready: listening on {addresses} ({broker.describe()})"
                if server.http is not None:
                    line += f", HTTP on {server.http.url}"
                print(line, file=sys.stderr, flush=True)
                await server.stopped.wait()
                nursery.cancel_scope.cancel()

    failures: list[BaseException] = []
    try:
        trio.run(run)
    except* ListenError as group:
        failures.extend(group.exceptions)
    if failures:
        print(f"kafkapy: {failures[0]}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "groups":
        return groups_cli.run(args)
    if args.command != "serve":
        parser.print_help()
        return 0 if args.command is None else 2
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return serve(args)
