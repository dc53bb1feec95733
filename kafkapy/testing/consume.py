"""consume_records: read the first N records of a topic, for a test's assertion.

Why no consumer group: a test that checks what was produced wants every partition from its log
start, not a group's committed position or a rebalance wait; assigning the partitions directly
(as `kafka-console-consumer --partition --offset earliest` does) is quick and leaves no group
behind. Uses confluent-kafka, a dependency of kafkapy already (`kafkapy consume` is built on it).
Records come back in the order they arrived, per partition in offset order.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConsumeTimeout", "ConsumedRecord", "consume_records"]

POLL_S = 0.2


class ConsumeTimeout(TimeoutError):
    """Fewer than the wanted records arrived in time; `records` holds those that did."""

    def __init__(self, message: str, records: list[ConsumedRecord]) -> None:
        super().__init__(message)
        self.records = records


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def consume_records(
    bootstrap: str,
    topic: str,
    n: int,
    *,
    timeout_s: float = 10.0,
    config: dict[str, str] | None = None,
) -> list[ConsumedRecord]:
    """The first `n` records of `topic` (every partition from its log start); ConsumeTimeout
    when fewer arrive within `timeout_s`. `config` adds client settings (security, isolation)."""
    import confluent_kafka

    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": "kafkapy-testing-consume",
        "enable.auto.commit": "false",
        "enable.partition.eof": "false",
        "logger": _silent_logger(),
        **(config or {}),
    }
    consumer = confluent_kafka.Consumer(settings)
    got: list[ConsumedRecord] = []
    try:
        deadline = time.monotonic() + timeout_s
        partitions = _partitions(consumer, topic, deadline)
        consumer.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in partitions])
        while len(got) < n and time.monotonic() < deadline:
            message = consumer.poll(min(POLL_S, max(0.0, deadline - time.monotonic())))
            if message is None or message.error() is not None:
                continue
            got.append(_record(topic, message))
    finally:
        consumer.close()
    if len(got) < n:
        raise ConsumeTimeout(f"{len(got)} of {n} records of {topic} arrived within {timeout_s:.1f} s", got)
    return got


def _record(topic: str, message: Any) -> ConsumedRecord:
    headers = message.headers() or []
    return ConsumedRecord(
        topic=topic, partition=message.partition(), offset=message.offset(), key=message.key(),
        value=message.value(), timestamp_ms=message.timestamp()[1],
        headers=[(k, v.encode() if isinstance(v, str) else v) for k, v in headers],
    )


def _partitions(consumer: object, topic: str, deadline: float) -> list[int]:
    """The topic's partition ids, waiting for the topic to appear (a producer may create it)."""
    while True:
        metadata = consumer.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))  # type: ignore[attr-defined]
        found = metadata.topics.get(topic)
        if found is not None and found.error is None and found.partitions:
            return sorted(found.partitions)
        if time.monotonic() >= deadline:
            raise ConsumeTimeout(f"topic {topic} has no partitions", [])
        time.sleep(POLL_S)


def _silent_logger() -> object:
    """librdkafka's log lines go to a logger of their own instead of the test's stderr."""
    import logging

    return logging.getLogger("kafkapy.testing.consume")
