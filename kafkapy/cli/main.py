"""Command line entry point: `kafkapy serve` and the client subcommands.

`kafkapy serve` is the embedded developer default: one combined node (node id 1) listening on
PLAINTEXT://127.0.0.1:9092 with data in ./data and topic auto-creation on. Everything else comes
from a Kafka-style `server.properties` (`--config`), `KAFKAPY_*` environment variables, and
`--override key=value`, in increasing priority; `--listeners`, `--data-dir` and `--node-id` are
shorthands for the matching overrides. `--memory` runs on a temporary data dir removed at exit.

When ready it prints exactly one line to stderr: `kafkapy ready: listening on HOST:PORT ...`
(ending with `, HTTP on http://HOST:PORT/` when `--http` opened the HTTP listener).
SIGINT/SIGTERM stop it cleanly (exit 0).

Cluster mode (`controller.quorum.voters` naming more than one voter, see docs/cluster.md): the
same command on every node; the ready line then waits until the node has joined (its broker
registration is unfenced) and lists the broker listeners first, then the controller listener.

Why click: every command family (topics, groups, chaos, ...) is one click group or command in a
module of its own, shares options through `kafkapy.cli.common.client_options`, and gets usage
errors with exit status 2 for free. Exit status: 0 ok, 1 an error (from the cluster, or a broker
that cannot start), 2 usage or configuration.

Start-up time: a family's module (and what it pulls in: the protocol codecs, rich, trio, the
broker) is imported only when that family runs (`LazyGroup`), so `kafkapy --help` and
`kafkapy --version` load click alone; `perf/cli_bench.py` measures it.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:  # imported in serve(): `kafkapy --help` need not load the broker
    import trio

    from kafkapy.server.app import BoundListener, Server
    from kafkapy.server.broker import Broker

__all__ = ["LAZY_COMMANDS", "LazyGroup", "Terminated", "cli", "main"]

log = logging.getLogger("kafkapy")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


# name -> (module:attribute, the one-line summary `kafkapy --help` shows without importing it;
# tests/cli/test_main.py checks each against the command's own help)
LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "acls": ("kafkapy.cli.acls:acls", "Create, list or delete ACLs (kafka-acls.sh)."),
    "broker-api-versions": ("kafkapy.cli.brokers:broker_api_versions",
                            "The API versions every broker supports, and which this client would use "
                            "(kafka-broker-api-versions.sh)."),
    "delete-records": ("kafkapy.cli.partitions:delete_records",
                       "Delete the records of partitions below an offset (kafka-delete-records.sh)."),
    "leader-election": ("kafkapy.cli.partitions:leader_election",
                        "Elect partition leaders: the preferred replica or, losing data, any live one "
                        "(kafka-leader-election.sh)."),
    "log-dirs": ("kafkapy.cli.brokers:log_dirs",
                 "Describe the log directories of brokers: each partition's size and lag (kafka-log-dirs.sh)."),
    "reassign-partitions": ("kafkapy.cli.partitions:reassign_partitions",
                            "Move partition replicas between brokers: execute, verify or cancel a plan, "
                            "or generate one (kafka-reassign-partitions.sh)."),
    "transactions": ("kafkapy.cli.transactions:transactions",
                     "List, describe or abort transactions (kafka-transactions.sh)."),
    "chaos": ("kafkapy.cli.chaos:chaos",
              "Run seeded faults against a local kafkapy cluster and check what clients saw."),
    "cluster": ("kafkapy.cli.cluster:cluster",
                "Inspect a cluster, its metadata quorum, or start a local one."),
    "configs": ("kafkapy.cli.configs:configs",
                "Describe or alter topic, broker and group configs (kafka-configs.sh)."),
    "consume": ("kafkapy.cli.consume:consume",
                "Consume records and print them (a group, or assigned partitions)."),
    "dump-log": ("kafkapy.cli.dump_log:dump_log",
                 "Print segments, indexes, snapshots and checkpoints of a data directory (kafka-dump-log)."),
    "groups": ("kafkapy.cli.groups:groups",
               "List, describe, reset or delete consumer groups (kafka-consumer-groups.sh)."),
    "produce": ("kafkapy.cli.produce:produce", "Produce records from stdin or a file, one per line."),
    "quotas": ("kafkapy.cli.quotas:quotas",
               "Describe or alter client quotas (kafka-configs.sh --entity-type users/clients)."),
    "topics": ("kafkapy.cli.topics:topics",
               "Create, list, describe, alter and delete topics (kafka-topics.sh)."),
    "users": ("kafkapy.cli.users:users",
              "Create, list or delete SCRAM users (kafka-configs.sh --entity-type users)."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands in `LAZY_COMMANDS` are imported when first used.

    Listing them (`kafkapy --help`) shows the summaries stored with them instead of importing
    each module for its docstring; `kafkapy topics ...` imports kafkapy.cli.topics only.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.commands or cmd_name not in LAZY_COMMANDS:
            return super().get_command(ctx, cmd_name)
        module_name, _, attribute = LAZY_COMMANDS[cmd_name][0].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{LAZY_COMMANDS[cmd_name][0]} is not a click command")
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        for name in self.list_commands(ctx):
            if name in self.commands:
                command = self.commands[name]
                if command.hidden:
                    continue
                rows.append((name, command.get_short_help_str(limit)))
            else:
                summary = click.Command(name, help=LAZY_COMMANDS[name][1])
                rows.append((name, summary.get_short_help_str(limit)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from importlib import metadata

    try:
        version = metadata.version("kafkapy")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        version = "unknown"
    click.echo(f"kafkapy {version}")
    ctx.exit()


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True,
              callback=_print_version, help="Show the version and exit.")
@click.pass_context
def cli(ctx: click.Context) -> int:
    """kafkapy: a Kafka-compatible broker in Python, and the tools to drive it.

    `kafkapy serve` runs a broker; the other commands are clients that speak the Kafka
    protocol, so they work against any Kafka-compatible cluster, not only kafkapy.
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
    return 0


def _overrides(
    override: tuple[str, ...],
    listeners: str | None,
    data_dir: str | None,
    node_id: int | None,
    sasl_user: tuple[str, ...],
    http: str | None = None,
    log_request: str | None = None,
) -> dict[str, str]:
    result: dict[str, str] = {}
    for item in override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"needs KEY=VALUE, got {item!r}", param_hint="--override")
        result[key.strip()] = value
    if listeners:
        result["listeners"] = listeners
        # advertise what --listeners binds (its real port when 0), not a config file's address
        result.setdefault("advertised.listeners", "")
    if data_dir:
        result["log.dirs"] = data_dir
    if node_id is not None:
        result["node.id"] = str(node_id)
    if http:
        result["kafkapy.http.listener"] = http
    if log_request:
        result["kafkapy.log.requests"] = log_request
    if sasl_user:
        given = result.get("kafkapy.sasl.users", "")
        result["kafkapy.sasl.users"] = ",".join(filter(None, [given, *sasl_user]))
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


@cli.command()
@click.option("--config", type=click.Path(path_type=Path), help="a Kafka server.properties file")
@click.option("--listeners", help="e.g. PLAINTEXT://127.0.0.1:9092 (port 0 picks a free port)")
@click.option("--data-dir", help="data directory (log.dirs)")
@click.option("--memory", is_flag=True, help="temporary data dir, removed at exit")
@click.option("--node-id", type=int, help="node.id")
@click.option(
    "--sasl-user",
    multiple=True,
    metavar="NAME:PASSWORD",
    help="a SASL user for PLAIN and SCRAM-SHA-256/512 (repeatable; adds to kafkapy.sasl.users)",
)
@click.option(
    "--http",
    metavar="[HOST:]PORT",
    help="HTTP listener for /metrics, /healthz, /readyz and the status page "
    "(kafkapy.http.listener; a bare PORT binds 127.0.0.1)",
)
@click.option(
    "--log-request",
    metavar="APIS",
    help="log one line per request of these APIs (logger kafkapy.request), e.g. "
    "Produce,Fetch or all (kafkapy.log.requests)",
)
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="set any config key (repeatable)")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default="INFO",
    show_default=True,
    envvar="KAFKAPY_LOG_LEVEL",
    show_envvar=True,
)
def serve(
    config: Path | None,
    listeners: str | None,
    data_dir: str | None,
    memory: bool,
    node_id: int | None,
    sasl_user: tuple[str, ...],
    http: str | None,
    log_request: str | None,
    override: tuple[str, ...],
    log_level: str,
) -> int:
    """Run a broker (a single node, or a cluster member)."""
    if data_dir and memory:
        raise click.UsageError("--data-dir and --memory exclude each other")
    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    overrides = _overrides(override, listeners, data_dir, node_id, sasl_user, http, log_request)
    return run_server(config, overrides, memory)


def run_server(config_file: Path | None, overrides: dict[str, str], memory: bool) -> int:
    import trio

    from kafkapy.broker.config import BrokerConfig, ConfigError
    from kafkapy.broker.data_dirs import check_data_dir
    from kafkapy.server.app import ListenError, Server
    from kafkapy.server.broker import Broker
    from kafkapy.server.connection_quotas import ConnectionQuotas
    from kafkapy.server.security import listener_security
    from kafkapy.storage.errors import StorageError
    from kafkapy.storage.file_limits import raise_open_files_limit

    raise_open_files_limit()  # before any log opens: thousands of replicas need thousands of files
    env = {k: v for k, v in os.environ.items() if k != "KAFKAPY_LOG_LEVEL"}
    try:
        config = BrokerConfig.load(config_file, env, overrides)
        if not memory:
            for data_dir in config.data_dirs:
                check_data_dir(data_dir)
        broker = Broker(config, memory=memory)
        # TLS files and SASL settings are checked now, so a bad path is one clear line (exit 2)
        listener_security(config, broker.credentials)
        ConnectionQuotas(config)  # connection limits and their overrides, likewise
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
                # Printed, not logged (logging also writes to stderr, so both made it two
                # lines): tools wait for this one line, and --log-level must not hide it.
                print(_ready_line(server, broker, bound), file=sys.stderr, flush=True)
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


def _ready_line(server: Server, broker: Broker, bound: list[BoundListener]) -> str:
    """The one line tools wait for: where the broker listens, what it serves, and what it
    serves without (offline partitions; the ERROR lines above say why)."""
    addresses = ", ".join(
        f"[{b.host}]:{b.port}" if ":" in b.host else f"{b.host}:{b.port}" for b in bound
    )
    line = f"kafkapy ready: listening on {addresses} ({broker.describe()})"
    offline = len(broker.log_states.offline())
    if offline:
        line += f", {offline} partitions offline"
    if server.http is not None:
        line += f", HTTP on {server.http.url}"
    return line


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C raises KeyboardInterrupt, so every command's Ctrl-C path
    (a producer flushes, a consumer commits and leaves its group) runs for `kill` and
    `timeout` as well."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> int:
    """Run `kafkapy` and return its exit status (click's usage errors: 2; Ctrl-C: 130;
    SIGTERM: 143). `serve` and `cluster start` install handlers of their own."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    try:
        result = cli.main(args=argv, prog_name="kafkapy", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        return e.exit_code
    except click.Abort as e:
        if isinstance(e.__cause__, Terminated):
            print("kafkapy: terminated", file=sys.stderr)
            return 128 + signal.SIGTERM
        print("kafkapy: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        # a CliError from a command without client_options (which reports its own): one line,
        # never a traceback; imported here so `kafkapy --help` loads click alone
        from kafkapy.cli.common import CliError

        if not isinstance(e, CliError):
            raise
        print(f"kafkapy: {e}", file=sys.stderr)
        return 1
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
    return result if isinstance(result, int) else 0
