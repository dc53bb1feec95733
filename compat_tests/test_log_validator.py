"""Record-level produce rules as real clients see them (Kafka's LogValidator): keyless records
on a compacted topic, timestamps outside `message.timestamp.(before|after).max.ms`, and the
max timestamp of a batch whose header leaves it unset (ListOffsets by timestamp)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from .conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)


def _create(broker: BrokerProcess, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1, config=config)])
    futures[name].result(timeout=30)


def _deliver(broker: BrokerProcess, topic: str, sends: list[tuple[bytes | None, int]]) -> list[KafkaError | None]:
    """Produce (key, timestamp) records one request each; the delivery error of each."""
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.timeout.ms": 20000,
                  "retries": 0, "enable.idempotence": False})
    for key, ts in sends:
        p.produce(topic, value=b"v", key=key, timestamp=ts,
                  on_delivery=lambda err, _msg: errors.append(err))
        p.flush(30)
    assert len(errors) == len(sends)
    return errors


def test_librdkafka_keyless_record_on_compacted_topic_is_invalid_record(
    broker: BrokerProcess, topic_name: str
) -> None:
    """librdkafka's 0011 expects INVALID_RECORD for a keyless message on a compacted topic."""
    _create(broker, topic_name, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    keyless, keyed = _deliver(broker, topic_name, [(None, now), (b"k", now)])
    assert keyless is not None
    assert keyless.code() == KafkaError.INVALID_RECORD
    assert keyed is None
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic_name})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
    finally:
        c.close()
    assert (low, high) == (0, 1)  # only the keyed record was written


def test_librdkafka_timestamp_out_of_range_is_invalid_timestamp(
    broker: BrokerProcess, topic_name: str
) -> None:
    _create(broker, topic_name, {"message.timestamp.before.max.ms": "60000",
                                 "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    old, future, fine = _deliver(broker, topic_name, [(None, now - 3_600_000), (None, now + 3_600_000), (None, now)])
    assert old is not None
    assert future is not None
    assert (old.code(), future.code()) == (KafkaError.INVALID_TIMESTAMP, KafkaError.INVALID_TIMESTAMP)
    assert fine is None
