"""What every client subcommand of `kafkapy` shares: where the cluster is, how to reach it, output.

Why one place: `topics`, `produce`, `groups`, `configs`, `cluster` (and the commands other modules
register) must take the same flags, read the same environment and fail the same way, or scripts
break on the second command they call.

- Where: `--bootstrap-server` > `KAFKAPY_BOOTSTRAP_SERVERS` > `bootstrap.servers` in
  `--command-config` > `bootstrap.servers` in the profile file (`KAFKAPY_PROFILE`, default
  `~/.config/kafkapy/client.properties`, optional) > 127.0.0.1:9092.
- How: `--command-config FILE`, Kafka client properties (`security.protocol`, `sasl.mechanism`,
  `sasl.username`/`sasl.password` or `sasl.jaas.config`, `ssl.ca.location`, ...); the profile's
  other keys are defaults under it.
- Output: rich tables for people, `--json` (one JSON document on stdout) for scripts.
- Exit codes: 0 ok, 1 an error from the cluster (or none reachable), 2 a usage error (click's).
  `CliError` carries the Kafka error code and what to do about it.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO, TypeVar

import click

from kafkapy.protocol import ErrorCode

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "KAFKA_COMPATIBLE",
    "CliError",
    "ClientSettings",
    "Output",
    "bytes_to_json",
    "check",
    "client_options",
    "jaas_options",
    "json_to_bytes",
    "librdkafka_logger",
    "parse_datetime_ms",
    "parse_duration_ms",
    "parse_key_values",
    "topic_argument",
]

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
PROFILE_ENV = "KAFKAPY_PROFILE"
DEFAULT_PROFILE = Path("~/.config/kafkapy/client.properties")
KAFKA_COMPATIBLE = (
    "It speaks the Kafka protocol, so it works against any Kafka-compatible cluster "
    "(Apache Kafka, Redpanda, ...), not only kafkapy."
)

F = TypeVar("F", bound=Callable[..., Any])

LIBRDKAFKA_LOGGER = "kafkapy.librdkafka"
LOG_LEVEL_ENV = "KAFKAPY_LOG_LEVEL"


def librdkafka_logger(environ: Mapping[str, str] = os.environ) -> logging.Logger:
    """The logger confluent-kafka's clients hand librdkafka's log lines to (their `logger`).

    Why: left alone, librdkafka prints `%3|1700000000.123|FAIL|rdkafka#producer-1| ...` to
    stderr whenever one bootstrap server refuses a connection, even though the command goes on
    and succeeds through another; what matters reaches the user as a delivery or consume error.
    The lines are dropped unless KAFKAPY_LOG_LEVEL asks for them (e.g. KAFKAPY_LOG_LEVEL=INFO).
    """
    log = logging.getLogger(LIBRDKAFKA_LOGGER)
    log.propagate = False
    if not log.handlers:
        level = environ.get(LOG_LEVEL_ENV, "").upper()
        if level in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            handler: logging.Handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("librdkafka %(levelname)s: %(message)s"))
            log.setLevel(level)
        else:
            handler = logging.NullHandler()
        log.addHandler(handler)
    return log

# What to do about the codes a user meets at the command line.
_ADVICE: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "check the name with `kafkapy topics list`",
    ErrorCode.TOPIC_ALREADY_EXISTS: "pick another name, or pass --if-not-exists",
    ErrorCode.INVALID_PARTITIONS: "the partition count must be at least 1",
    ErrorCode.INVALID_REPLICATION_FACTOR: "use at most as many replicas as there are brokers "
    "(`kafkapy cluster info`)",
    ErrorCode.INVALID_REPLICA_ASSIGNMENT: "name existing brokers, each once per partition "
    "(`kafkapy cluster info` lists them)",
    ErrorCode.INVALID_CONFIG: "check the key and value (`kafkapy configs describe --all` lists the keys)",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "topic names are up to 249 of [a-zA-Z0-9._-]",
    ErrorCode.GROUP_ID_NOT_FOUND: "check the name with `kafkapy groups list`",
    ErrorCode.NON_EMPTY_GROUP: "stop the group's consumers first",
    ErrorCode.UNKNOWN_MEMBER_ID: "the group is active: stop its consumers first",
    ErrorCode.REBALANCE_IN_PROGRESS: "the group is active: stop its consumers first",
    ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC: "the group still consumes this topic: stop it first",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "the principal lacks an ACL for this topic",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "the principal lacks an ACL for this group",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "the principal lacks a cluster ACL",
    ErrorCode.SASL_AUTHENTICATION_FAILED: "check the user and password in --command-config",
    ErrorCode.UNSUPPORTED_SASL_MECHANISM: "set sasl.mechanism to one the listener enables",
    ErrorCode.POLICY_VIOLATION: "the broker's policy refused it",
    ErrorCode.NOT_CONTROLLER: "the controller moved; retry",
    ErrorCode.REQUEST_TIMED_OUT: "the cluster is slow or a broker is down; retry",
    ErrorCode.UNSUPPORTED_VERSION: "the broker does not support this request version",
    ErrorCode.INVALID_REQUEST: "the broker refused the request as invalid (its message says why)",
    ErrorCode.SECURITY_DISABLED: "the broker has no authorizer: set authorizer.class.name (e.g. "
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer) in its config to use ACLs",
}


class CliError(Exception):
    """A failure to report to the user (exit status 1), not a crash.

    `code`, when the cluster answered with one, is named in the message together with what to do.
    """

    def __init__(self, message: str, code: int | None = None, hint: str | None = None) -> None:
        self.code = None if code is None else _error_code(code)
        if self.code is not None and self.code != ErrorCode.NONE:
            message = f"{message}: {self.code.name} (error code {int(self.code)})"
            hint = hint or _ADVICE.get(self.code)
        self.hint = hint
        super().__init__(message + (f" - {hint}" if hint else ""))


def _error_code(code: int) -> ErrorCode | None:
    try:
        return ErrorCode(code)
    except ValueError:
        return None


def check(code: int, what: str, message: str | None = None) -> None:
    """Raise `CliError` naming `what` unless `code` is NONE (`message` is the broker's text)."""
    if code != ErrorCode.NONE:
        raise CliError(f"{what}{f' ({message})' if message else ''}", code)


def parse_key_values(items: Iterable[str], flag: str) -> dict[str, str]:
    """`k=v` items (a repeated flag) into a dict; a missing `=` is a usage error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"needs KEY=VALUE, got {item!r}", param_hint=flag)
        out[key.strip()] = value
    return out


def _read_properties(path: Path) -> dict[str, str]:
    from kafkapy.broker.config import parse_properties

    try:
        return parse_properties(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise click.BadParameter(f"cannot read {path}: {e.strerror or e}") from None


@dataclass
class ClientSettings:
    """Where the cluster is and how to reach it (client properties), plus the output mode."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    properties: dict[str, str] = field(default_factory=dict)
    json: bool = False
    timeout_s: float = 10.0

    @property
    def servers(self) -> list[str]:
        return [s.strip() for s in self.bootstrap.split(",") if s.strip()]

    def librdkafka(self) -> dict[str, str]:
        """The properties as a confluent-kafka config (Java-only keys left out)."""
        conf = {k: v for k, v in self.properties.items() if not _java_only(k)}
        jaas = jaas_options(self.properties.get("sasl.jaas.config", ""))
        for ours, theirs in (("sasl.username", "username"), ("sasl.password", "password")):
            if ours not in conf and theirs in jaas:
                conf[ours] = jaas[theirs]
        truststore = self.properties.get("ssl.truststore.location")
        if "ssl.ca.location" not in conf and truststore and self.properties.get(
            "ssl.truststore.type", ""
        ).upper() == "PEM":
            conf["ssl.ca.location"] = truststore
        conf["bootstrap.servers"] = self.bootstrap
        return conf

    @classmethod
    def resolve(
        cls,
        bootstrap: str | None,
        command_config: Path | None,
        json_output: bool,
        environ: Mapping[str, str] = os.environ,
    ) -> ClientSettings:
        props: dict[str, str] = {}
        profile = environ.get(PROFILE_ENV)
        profile_path = Path(profile) if profile else DEFAULT_PROFILE.expanduser()
        if profile or profile_path.is_file():
            props.update(_read_properties(profile_path))
        if command_config is not None:
            props.update(_read_properties(command_config))
        chosen = (
            bootstrap
            or environ.get("KAFKAPY_BOOTSTRAP_SERVERS")
            or props.get("bootstrap.servers")
            or DEFAULT_BOOTSTRAP
        )
        props.pop("bootstrap.servers", None)
        return cls(bootstrap=chosen, properties=props, json=json_output)


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(text: str) -> dict[str, str]:
    """The `name="value"` options of Java's `sasl.jaas.config` (librdkafka has no such key)."""
    return dict(_JAAS_OPTION.findall(text))


def _java_only(key: str) -> bool:
    return key in {"sasl.jaas.config", "ssl.truststore.type", "ssl.keystore.type"} or key.startswith(
        ("ssl.truststore.", "ssl.keystore.")
    )


def client_options(func: F) -> F:
    """Add --bootstrap-server, --command-config and --json; the command gets `settings`."""

    @click.option(
        "--bootstrap-server",
        "bootstrap_server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="brokers to start from [env KAFKAPY_BOOTSTRAP_SERVERS; default 127.0.0.1:9092]",
    )
    @click.option(
        "--command-config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        help="client properties file (security.protocol, sasl.*, ssl.*, bootstrap.servers)",
    )
    @click.option("--json", "json_output", is_flag=True, help="print JSON for scripts")
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        bootstrap_server: str | None,
        command_config: Path | None,
        json_output: bool,
        **kwargs: Any,
    ) -> Any:
        settings = ClientSettings.resolve(bootstrap_server, command_config, json_output)
        try:
            return func(*args, settings=settings, **kwargs)
        except CliError as e:
            print(f"kafkapy: {e}", file=sys.stderr)
            return 1

    return wrapper  # type: ignore[return-value]


def topic_argument(func: F) -> F:
    """TOPIC as an argument, or `--topic TOPIC` as Kafka's console producer and consumer take it;
    the command gets `topic`."""

    @click.argument("topic_argument", metavar="TOPIC", required=False)
    @click.option("--topic", "topic_flag", metavar="TOPIC", help="the topic (Kafka's spelling of TOPIC)")
    @functools.wraps(func)
    def wrapper(*args: Any, topic_argument: str | None, topic_flag: str | None, **kwargs: Any) -> Any:
        if topic_argument and topic_flag and topic_argument != topic_flag:
            raise click.UsageError(f"two topics named: {topic_argument} and --topic {topic_flag}")
        topic = topic_argument or topic_flag
        if not topic:
            raise click.UsageError("name the topic (TOPIC or --topic TOPIC)")
        return func(*args, topic=topic, **kwargs)

    return wrapper  # type: ignore[return-value]


class Output:
    """Rich tables on a terminal (plain aligned columns when piped), or one JSON document."""

    def __init__(self, settings: ClientSettings, stream: TextIO | None = None) -> None:
        self.json = settings.json
        self.stream = stream or sys.stdout

    def console(self) -> Any:
        from rich.console import Console

        terminal = self.stream.isatty()
        # piped output must not wrap at 80 columns: scripts split lines on whitespace
        return Console(
            file=self.stream,
            width=None if terminal else 1000,
            no_color=not terminal,
            highlight=False,
            markup=False,
            emoji=False,
        )

    def emit(self, data: Any) -> None:
        json.dump(data, self.stream, indent=2, default=str)
        self.stream.write("\n")

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
    ) -> None:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(
            title=title,
            title_justify="left",
            box=box.SIMPLE_HEAD if self.stream.isatty() else None,
            show_edge=False,
            pad_edge=False,
            header_style="bold",
        )
        for c in columns:
            table.add_column(c, overflow="fold")
        for row in rows:
            table.add_row(*(Text("-" if v is None else str(v)) for v in row))
        console = self.console()
        if self.stream.isatty():
            console.print(table)
            return
        with console.capture() as capture:
            console.print(table)
        self.stream.write("".join(line.rstrip() + "\n" for line in capture.get().splitlines()))

    def line(self, text: str) -> None:
        self.stream.write(text + "\n")

    def records(
        self, columns: Sequence[tuple[str, str]], items: Sequence[Mapping[str, Any]], title: str | None = None
    ) -> None:
        """`items` as a table (`columns` = (key, header)) or, with --json, as they are."""
        if self.json:
            self.emit(list(items))
        else:
            self.table([h for _, h in columns], [[i.get(k) for k, _ in columns] for i in items], title)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_ISO_DURATION = re.compile(
    r"^(-)?P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE
)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int:
    """`10m`, `90s`, `2h`, `1d`, `500ms` or ISO-8601 as Kafka's tools take it (`PT10M`, `P1DT2H`)."""
    m = _DURATION.match(text.strip().lower())
    if m:
        return int(float(m.group(1)) * _UNIT_MS[m.group(2)])
    iso = _ISO_DURATION.match(text.strip())
    if iso and any(iso.groups()[1:]):
        days, hours, minutes, seconds = (float(g or 0) for g in iso.groups()[1:])
        total = int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)
        return -total if iso.group(1) else total
    raise click.BadParameter(f"{text!r} is not a duration (e.g. 10m, 2h, 1d, PT10M)")


def parse_datetime_ms(text: str) -> int:
    """An ISO-8601 date-time (`2024-05-01T12:00:00`, `...Z`, `...+02:00`) or epoch ms, as ms.

    Without a zone it is local time, as in Kafka's `--to-datetime`.
    """
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a date-time (YYYY-MM-DDTHH:mm:SS[.sss][zone])") from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def bytes_to_json(data: bytes | None) -> str | dict[str, str] | None:
    """A key, value or header value for JSON: text when it is UTF-8, else {"base64": ...}."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def json_to_bytes(value: Any, what: str) -> bytes | None:
    """The inverse of `bytes_to_json` (numbers and objects other than {"base64"} as JSON text)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and set(value) == {"base64"}:
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (ValueError, TypeError):
            raise CliError(f"{what}: not valid base64") from None
    return json.dumps(value).encode()
