"""`kafkapy produce TOPIC`: records from stdin or a file (kafka-console-producer, kcat -P).

Why confluent-kafka (librdkafka) here and not the project's codecs: a producer worth the name
batches, compresses with every codec, retries, keeps idempotent sequence numbers and runs
transactions; librdkafka does all of that and is the client most users script against. The admin
client (`kafkapy.cli.wire.Admin`) still checks first that a broker answers, so an unreachable
cluster is one clear line within seconds instead of librdkafka's message timeout.

Large inputs: a progress bar on stderr when it is a terminal (through a file's size for `--file`
or stdin redirected from a file, the bytes so far for a pipe; none while a person types), and a
rate line at the end for 1,000 records or more, or with `--verbose`.

Input: one record per line. `--key-separator SEP` splits `key SEP value`; `--format json` takes
one JSON object per line with `key`, `value`, `headers` (an object or a list of [name, value])
and `partition`; a key, value or header value is a string (UTF-8) or {"base64": "..."} for bytes,
as `kafkapy consume --format json` prints them, so the two round-trip any record.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import click

from kafkapy.cli.common import (
    KAFKA_COMPATIBLE,
    ClientSettings,
    CliError,
    Output,
    client_options,
    json_to_bytes,
    librdkafka_logger,
    parse_key_values,
    topic_argument,
)
from kafkapy.cli.wire import Admin
from kafkapy.protocol.errors import ErrorCode

__all__ = ["produce"]

SUMMARY_RECORDS = 1000
_LOCAL_UNKNOWN_TOPIC = -188  # librdkafka's RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC
ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}


@dataclass
class Record:
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    partition: int | None = None


def _json_record(line: str, n: int) -> Record:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as e:
        raise CliError(f"line {n}: not JSON ({e.msg})") from None
    if not isinstance(doc, dict):
        raise CliError(f"line {n}: expected a JSON object with key/value/headers/partition")
    raw = doc.get("headers") or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    try:
        headers = [(str(k), json_to_bytes(v, f"line {n} header {k}")) for k, v in pairs]
    except (TypeError, ValueError):
        raise CliError(f"line {n}: headers are an object or a list of [name, value]") from None
    partition = doc.get("partition")
    if partition is not None and not isinstance(partition, int):
        raise CliError(f"line {n}: partition must be a number")
    return Record(json_to_bytes(doc.get("value"), f"line {n} value"),
                  json_to_bytes(doc.get("key"), f"line {n} key"), headers, partition)


def read_records(
    source: IO[bytes], fmt: str, key_separator: str | None, headers: list[tuple[str, bytes | None]]
) -> Iterator[Record]:
    """The records of `source`, one per line (the line ending is not part of the value)."""
    sep = key_separator.encode() if key_separator is not None else None
    for n, raw in enumerate(source, 1):
        line = raw.rstrip(b"\n").removesuffix(b"\r")
        if fmt == "json":
            if not line.strip():
                continue
            record = _json_record(line.decode("utf-8", errors="replace"), n)
            record.headers = headers + record.headers
            yield record
        elif sep is not None:
            key, found, value = line.partition(sep)
            if not found:
                raise CliError(f"line {n} has no key separator {key_separator!r}")
            yield Record(value, key, list(headers))
        else:
            yield Record(line, None, list(headers))


def _config(settings: ClientSettings, acks: str, compression: str, idempotent: bool,
            transactional_id: str | None, extra: dict[str, str]) -> dict[str, Any]:
    conf: dict[str, Any] = {
        **settings.librdkafka(),
        "logger": librdkafka_logger(),
        "client.id": "kafkapy-produce",
        "acks": ACKS[acks],
        "compression.type": compression,
        "linger.ms": 5,
        "message.timeout.ms": 30_000,
        # below message.timeout.ms: a topic the metadata keeps missing is reported as unknown
        # (UNKNOWN_TOPIC_OR_PARTITION) after 10 s, never as a message timeout; with librdkafka's
        # default (30 s, the same as the message timeout) the two timers race
        "topic.metadata.propagation.max.ms": 10_000,
    }
    if idempotent or transactional_id:
        conf["enable.idempotence"] = True
    if transactional_id:
        conf["transactional.id"] = transactional_id
    conf.update(extra)
    return conf


class _Delivery:
    """Counts deliveries and keeps the first failure (librdkafka calls back from poll/flush)."""

    def __init__(self, out: Output, verbose: bool) -> None:
        self.out, self.verbose = out, verbose
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None
        self.first_code: int | None = None  # a Kafka error code, when the failure was one

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = f"{err.name()} ({err.str()})"
                code = err.code()
                # librdkafka's own "unknown topic" (-188, learnt from Metadata) is Kafka's code 3
                self.first_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if code == _LOCAL_UNKNOWN_TOPIC else (
                    code if code > 0 else None)
            return
        self.delivered += 1
        if self.verbose:
            if self.out.json:
                self.out.line(json.dumps({"topic": msg.topic(), "partition": msg.partition(),
                                          "offset": msg.offset()}))
            else:
                self.out.line(f"{msg.topic()} partition {msg.partition()} offset {msg.offset()}")


def input_size(source: IO[bytes]) -> int | None:
    """The size of `source` when it is a regular file (`--file`, or stdin redirected from one)."""
    try:
        status = os.fstat(source.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
    return status.st_size if stat.S_ISREG(status.st_mode) else None


def _progress(total: int | None, show: bool) -> Any:
    """A bar on stderr: how far through the input (a file's size known) or how much so far (a pipe)."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    columns = [TextColumn("producing {task.fields[records]:,} records"), BarColumn(), DownloadColumn(),
               TransferSpeedColumn()]
    progress = Progress(*columns, console=Console(stderr=True), disable=not show, transient=True)
    progress.add_task("produce", total=total, records=0)
    return progress


def _send_all(
    producer: Any, topic: str, records: Iterator[Record], partition: int | None, delivery: _Delivery,
    source: IO[bytes], show_progress: bool,
) -> tuple[int, int]:
    """Hand every record to librdkafka (waiting while its queue is full); (records, bytes)."""
    produced = read = 0
    size = input_size(source)
    shown_at = time.monotonic()
    with _progress(size, show_progress) as progress:
        task = progress.task_ids[0]
        for record in records:
            target = record.partition if record.partition is not None else partition
            kwargs: dict[str, Any] = {"value": record.value, "key": record.key,
                                      "headers": record.headers or None, "on_delivery": delivery}
            if target is not None:
                kwargs["partition"] = target
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
            produced += 1
            read += len(record.value or b"") + len(record.key or b"") + 1
            if show_progress and (produced % 1000 == 0 or time.monotonic() - shown_at > 0.2):
                # a file: its position, so the bar ends at 100%; a pipe: the bytes so far
                progress.update(task, completed=source.tell() if size is not None else read, records=produced)
                shown_at = time.monotonic()
        progress.update(task, completed=size if size is not None else read, records=produced)
    return produced, read


def _abort(producer: Any) -> None:
    from confluent_kafka import KafkaException

    # nothing to abort, or the coordinator is gone: the transaction timeout aborts it
    with contextlib.suppress(KafkaException):
        producer.abort_transaction(10)


@click.command(help=f"Produce records from stdin or a file, one per line. {KAFKA_COMPATIBLE}")
@topic_argument
@click.option("--file", "input_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="read records from this file instead of stdin")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one value per line; json: {key, value, headers, partition} per line")
@click.option("--key-separator", help="split each text line into KEY SEP VALUE")
@click.option("--header", multiple=True, metavar="K=V", help="a header on every record (repeatable)")
@click.option("--partition", type=click.IntRange(min=0), help="write every record to this partition")
@click.option("--acks", type=click.Choice(list(ACKS)), default="all", show_default=True)
@click.option("--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]),
              default="none", show_default=True)
@click.option("--idempotent", is_flag=True, help="enable.idempotence (no duplicates on retries)")
@click.option("--transactional-id", help="write all records in one transaction")
@click.option("--producer-property", multiple=True, metavar="K=V", help="any librdkafka producer setting")
@click.option("-v", "--verbose", is_flag=True, help="print the partition and offset of every record")
@client_options
def produce(
    settings: ClientSettings, topic: str, input_file: Path | None, fmt: str, key_separator: str | None,
    header: tuple[str, ...], partition: int | None, acks: str, compression: str, idempotent: bool,
    transactional_id: str | None, producer_property: tuple[str, ...], verbose: bool,
) -> int:
    from confluent_kafka import KafkaException, Producer

    headers: list[tuple[str, bytes | None]] = [
        (k, v.encode()) for k, v in parse_key_values(header, "--header").items()
    ]
    extra = parse_key_values(producer_property, "--producer-property")
    with Admin(settings) as admin:  # a clear error now if no broker answers
        if partition is not None:
            count = len(admin.topic_partitions(topic))
            if partition >= count:
                raise CliError(f"topic {topic} has {count} partitions; there is no partition {partition}")
    out = Output(settings)
    delivery = _Delivery(out, verbose)
    try:
        producer = Producer(_config(settings, acks, compression, idempotent, transactional_id, extra))
    except KafkaException as e:
        raise CliError(f"producer configuration: {e.args[0].str()}") from None
    source: IO[bytes] = input_file.open("rb") if input_file else sys.stdin.buffer
    # a person typing records sees no bar; a file or a pipe does, when stderr is a terminal
    show_progress = sys.stderr.isatty() and (input_file is not None or not sys.stdin.isatty())
    started = time.monotonic()
    produced = 0
    try:
        if transactional_id:
            producer.init_transactions(30)
            producer.begin_transaction()
        produced, read = _send_all(producer, topic, read_records(source, fmt, key_separator, headers),
                                   partition, delivery, source, show_progress)
        if transactional_id:
            producer.commit_transaction(30)
        remaining = producer.flush(35)
    except KafkaException as e:
        if transactional_id:
            _abort(producer)
        raise CliError(f"producing to {topic} failed: {e.args[0].name()} ({e.args[0].str()})") from None
    except (CliError, KeyboardInterrupt):  # a bad line or Ctrl-C: what was sent so far stays sent
        if transactional_id:
            _abort(producer)
        else:
            producer.flush(10)
        raise
    finally:
        if input_file:
            source.close()
    elapsed = max(time.monotonic() - started, 1e-6)
    if delivery.failed and delivery.first_code is not None:
        raise CliError(f"{delivery.failed + remaining} of {produced} records to {topic} were not delivered",
                       delivery.first_code)
    if remaining or delivery.failed:
        raise CliError(
            f"{delivery.failed + remaining} of {produced} records to {topic} were not delivered"
            f"{f': {delivery.first_error}' if delivery.first_error else ' (timed out)'}"
        )
    if produced >= SUMMARY_RECORDS or verbose:
        click.echo(f"produced {produced} records to {topic} in {elapsed:.2f} s "
                   f"({produced / elapsed:,.0f} records/s, {read / elapsed / 1e6:.1f} MB/s)", err=True)
    return 0
