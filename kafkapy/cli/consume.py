"""`kafkapy consume TOPIC` (kafka-console-consumer, kcat -C) on confluent-kafka (librdkafka).

Two modes, as Kafka's tools have them: with `--group` the consumer joins the group, gets its
partitions from the group's assignor and commits what it read (on close, and every 5 s);
without one it is assigned the partitions itself (all, or `--partition`) and commits nothing.

Where it starts: the group's committed offsets (group mode; `--from-beginning` only decides where
a group with none starts), or the end (new records only), the beginning (`--from-beginning`), an
offset (`--offset N`; `--offset -N` is N records before the end of each partition;
kafka-console-consumer's `--offset earliest|latest` too) or a time
(`--since 10m`, `--timestamp ISO-or-ms`: the first record at or after it, ListOffsets). It stops
after `--max-messages`, at the end of every partition (`--exit-at-end`, kcat's -e), after
`--timeout-ms` without a record, or on Ctrl-C or SIGTERM (the record being printed is finished,
the consumer commits and leaves its group, exit 0).

Output: the value per line (text), one JSON object per line (`--format json`: topic, partition,
offset, timestamp, key, value, headers; bytes as in `kafkapy produce --format json`), or a kcat
`-f` template (`--template '%k=%s\\n'`: %t topic, %p partition, %o offset, %k key, %K key
length, %s value, %S value length, %T timestamp, %h headers, %% a percent sign).
"""

from __future__ import annotations

import json
import re
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO

import click

from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    CliError,
    bytes_to_json,
    client_options,
    librdkafka_logger,
    parse_datetime_ms,
    parse_duration_ms,
    parse_key_values,
    topic_argument,
)
from kafkapy.cli.offsets import EARLIEST, LATEST, list_offsets
from kafkapy.cli.wire import Admin

__all__ = ["consume", "format_template"]

POLL_S = 0.2
_TOKEN = re.compile(rb"%[tpokKsSTh%]|\\[ntr\\]")
_ESCAPES = {b"\\n": b"\n", b"\\t": b"\t", b"\\r": b"\r", b"\\\\": b"\\"}


def _headers_text(headers: list[tuple[str, bytes | None]] | None) -> bytes:
    return b",".join(k.encode() + b"=" + (v if v is not None else b"") for k, v in headers or [])


def format_template(template: str) -> Callable[[Any], bytes]:
    """A kcat `-f` template compiled into a function of a confluent-kafka message."""
    fields: dict[bytes, Callable[[Any], bytes]] = {
        b"%t": lambda m: m.topic().encode(),
        b"%p": lambda m: str(m.partition()).encode(),
        b"%o": lambda m: str(m.offset()).encode(),
        b"%k": lambda m: m.key() or b"",
        b"%K": lambda m: str(-1 if m.key() is None else len(m.key())).encode(),
        b"%s": lambda m: m.value() or b"",
        b"%S": lambda m: str(-1 if m.value() is None else len(m.value())).encode(),
        b"%T": lambda m: str(m.timestamp()[1]).encode(),
        b"%h": lambda m: _headers_text(m.headers()),
        b"%%": lambda m: b"%",
    }
    raw = template.encode()
    parts: list[bytes | Callable[[Any], bytes]] = []
    pos = 0
    for match in _TOKEN.finditer(raw):
        parts.append(raw[pos : match.start()])
        token = match.group()
        parts.append(_ESCAPES[token] if token in _ESCAPES else fields[token])
        pos = match.end()
    parts.append(raw[pos:])

    def render(msg: Any) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(msg) for p in parts)

    return render


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stop_on_interrupt() -> tuple[list[int], list[Any]]:
    """Ctrl-C (SIGINT) and SIGTERM (`timeout`, `kill`, a container stop) as a flag the poll loop
    checks (non-empty once one arrived) instead of an exception that could land between writing
    a record and counting it, or inside librdkafka; either way the consumer then closes: it
    commits what it printed and leaves its group, so the next member is not kept waiting for
    the session timeout. Also returns the handlers it replaced."""
    pressed: list[int] = []
    previous = [signal.signal(sig, lambda signum, frame: pressed.append(signum)) for sig in STOP_SIGNALS]
    return pressed, previous


def _json_line(msg: Any) -> bytes:
    kind, ts = msg.timestamp()
    doc = {
        "topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
        "timestamp": ts, "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(kind),
        "key": bytes_to_json(msg.key()), "value": bytes_to_json(msg.value()),
        "headers": [[k, bytes_to_json(v)] for k, v in msg.headers() or []],
    }
    return json.dumps(doc).encode() + b"\n"


def _start_offsets(
    admin: Admin, topic: str, partitions: list[int], from_beginning: bool, offset: int | None,
    at_ms: int | None,
) -> dict[int, int]:
    """The first offset to read of each partition (absolute), or {} to use the default."""
    tps = [(topic, p) for p in partitions]
    if at_ms is not None:
        ends = list_offsets(admin, tps, LATEST)
        found = list_offsets(admin, tps, at_ms)
        return {p: found[(topic, p)] if found.get((topic, p), -1) >= 0 else ends[(topic, p)] for p in partitions}
    if offset is not None:
        starts, ends = list_offsets(admin, tps, EARLIEST), list_offsets(admin, tps, LATEST)
        if offset >= 0:
            return {p: min(max(offset, starts[(topic, p)]), ends[(topic, p)]) for p in partitions}
        return {p: max(ends[(topic, p)] + offset, starts[(topic, p)]) for p in partitions}
    if from_beginning:
        return {p: -2 for p in partitions}  # librdkafka's OFFSET_BEGINNING
    return {}


_LAST = 2**63 - 1  # `--offset latest`: clamped down to each partition's end


def _offset(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """N, -N, or kafka-console-consumer's `earliest` (0, raised to the log start) / `latest`."""
    if value is None:
        return None
    named = {"earliest": 0, "latest": _LAST}
    if value.strip().lower() in named:
        return named[value.strip().lower()]
    try:
        return int(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an offset (N, -N, earliest or latest)") from None


@click.command(help=f"Consume records and print them (a group, or assigned partitions). {KAFKA_COMPATIBLE}")
@topic_argument
@click.option("--group", help="join this group and commit offsets (default: no group, nothing committed)")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset")
@click.option("--offset", callback=_offset, metavar="N|-N|earliest|latest",
              help="start at offset N, N records before the end (-N), or earliest / latest")
@click.option("--since", metavar="DURATION", help="start at records this recent (10m, 2h, PT1H)")
@click.option("--timestamp", metavar="WHEN", help="start at this time (ISO-8601 or epoch ms)")
@click.option("--partition", type=click.IntRange(min=0), multiple=True, help="only these partitions (repeatable)")
@click.option("--max-messages", type=click.IntRange(min=1), help="stop after N records")
@click.option("--follow/--exit-at-end", default=True, help="wait for new records (default) or stop at the end")
@click.option("--timeout-ms", type=click.IntRange(min=1), help="stop after this long without a record")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--template", "-f", help="kcat-style output template, e.g. '%k: %s\\n'")
@click.option("--consumer-property", multiple=True, metavar="K=V", help="any librdkafka consumer setting")
@client_options
def consume(
    settings: ClientSettings, topic: str, group: str | None, from_beginning: bool, offset: int | None,
    since: str | None, timestamp: str | None, partition: tuple[int, ...], max_messages: int | None,
    follow: bool, timeout_ms: int | None, isolation_level: str, fmt: str, template: str | None,
    consumer_property: tuple[str, ...],
) -> int:
    if sum(x is not None for x in (offset, since, timestamp)) + from_beginning > 1:
        raise click.UsageError("choose one of --from-beginning, --offset, --since, --timestamp")
    if group and partition:
        raise click.UsageError("--partition assigns partitions itself: it excludes --group")
    at_ms = None
    if since is not None:
        at_ms = int(time.time() * 1000) - abs(parse_duration_ms(since))
    elif timestamp is not None:
        at_ms = parse_datetime_ms(timestamp)
    with Admin(settings) as admin:  # a clear error now for an unreachable broker or unknown topic
        known = admin.topic_partitions(topic)
        partitions = list(partition) or known
        for p in partitions:
            if p not in known:
                raise CliError(f"topic {topic} has no partition {p} (it has {len(known)})")
        starts = _start_offsets(admin, topic, partitions, from_beginning and not group, offset, at_ms)
    render = (format_template(template) if template is not None
              else _json_line if fmt == "json" or settings.json else (lambda m: (m.value() or b"") + b"\n"))
    conf = {
        **settings.librdkafka(),
        "logger": librdkafka_logger(),
        "group.id": group or "kafkapy-consume",
        "client.id": "kafkapy-consume",
        "enable.auto.commit": bool(group),
        "auto.offset.reset": "earliest" if from_beginning else "latest",
        "enable.partition.eof": True,
        "isolation.level": isolation_level,
        **parse_key_values(consumer_property, "--consumer-property"),
    }
    return _run(conf, topic, group, partitions, starts, render, max_messages, follow, timeout_ms)


def _run(
    conf: dict[str, Any], topic: str, group: str | None, partitions: list[int], starts: dict[int, int],
    render: Callable[[Any], bytes], max_messages: int | None, follow: bool, timeout_ms: int | None,
) -> int:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer(conf)
    assigned: set[int] = set()
    at_end: set[int] = set()

    # KIP-848 and cooperative assignors hand out partitions incrementally
    incremental = str(conf.get("group.protocol", "classic")).lower() == "consumer" or (
        "cooperative" in str(conf.get("partition.assignment.strategy", ""))
    )

    def on_assign(c: Any, tps: list[Any]) -> None:
        for tp in tps:
            if tp.partition in starts:
                tp.offset = starts[tp.partition]
        assigned.update(tp.partition for tp in tps)
        (c.incremental_assign if incremental else c.assign)(tps)

    def on_revoke(c: Any, tps: list[Any]) -> None:
        assigned.difference_update(tp.partition for tp in tps)
        at_end.difference_update(tp.partition for tp in tps)

    if group:
        consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    else:
        default = -1  # librdkafka's OFFSET_END: new records only
        consumer.assign([TopicPartition(topic, p, starts.get(p, default)) for p in partitions])
        assigned.update(partitions)
    stop, previous = _stop_on_interrupt()
    try:
        count = _poll_loop(consumer, topic, render, max_messages, follow, timeout_ms, assigned, at_end, stop)
    except KafkaException as e:
        raise CliError(f"consuming {topic}: {e.args[0].str()}") from None
    finally:
        consumer.close()  # leaves the group and commits what was read
        for sig, handler in zip(STOP_SIGNALS, previous, strict=True):
            signal.signal(sig, handler)
    click.echo(f"Processed a total of {count} messages", err=True)
    return 0


def _poll_loop(
    consumer: Any, topic: str, render: Callable[[Any], bytes], max_messages: int | None, follow: bool,
    timeout_ms: int | None, assigned: set[int], at_end: set[int], stop: list[int],
) -> int:
    """Print records until a limit, the end (not `follow`), a quiet `timeout_ms` or Ctrl-C."""
    from confluent_kafka import KafkaError

    out: BinaryIO = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    while (max_messages is None or count < max_messages) and not stop:
        if not follow and assigned and assigned <= at_end:
            break
        if timeout_ms is not None and (time.monotonic() - last) * 1000 >= timeout_ms:
            break
        try:
            msg = consumer.poll(POLL_S)
        except Exception as e:  # librdkafka raises a rebalance callback's failure from poll
            raise CliError(f"consuming {topic}: {e}") from None
        if msg is None:
            continue
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                at_end.add(int(msg.partition() or 0))
                continue
            if error.fatal() or not error.retriable():
                raise CliError(f"consuming {topic}: {error.name()} ({error.str()})")
            continue
        at_end.discard(int(msg.partition() or 0))
        last = time.monotonic()
        out.write(render(msg))
        out.flush()
        count += 1
    return count
