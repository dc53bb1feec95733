"""Idempotent producers with forced retries: the broker's test-only fault hook
(`kafkapy.test.fault.drop.after.produce.append=N`) closes the connection after the N-th append
instead of answering it, so the client must resend a batch the log already holds. The log then
holds every message exactly once, in order - librdkafka and kafka-python (whose default is an
idempotent producer)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from .conftest import BrokerFactory, BrokerProcess
from .test_transactions import read_all

pytestmark = pytest.mark.timeout(120)

N = 400


@pytest.fixture
def faulty_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory.start(extra_args=[
        "--override", "kafkapy.test.fault.drop.after.produce.append=3",
        "--override", "offsets.topic.num.partitions=1",
    ])


def _dropped(broker: BrokerProcess) -> bool:
    return "test fault: drop after produce append" in broker.log_text()


def test_librdkafka_retry_after_dropped_ack_is_not_duplicated(faulty_broker: BrokerProcess, topic_name: str) -> None:
    p = Producer({"bootstrap.servers": faulty_broker.bootstrap, "enable.idempotence": True,
                  "linger.ms": 2, "batch.num.messages": 20, "retry.backoff.ms": 50})
    for i in range(N):
        p.produce(topic_name, value=b"m%04d" % i, partition=0)
        if i % 50 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert _dropped(faulty_broker), "the fault hook never fired; the retry path was not exercised"
    assert read_all(faulty_broker.bootstrap, topic_name, "read_uncommitted", expect=N) == [b"m%04d" % i for i in range(N)]


def test_kafka_python_retry_after_dropped_ack_is_not_duplicated(faulty_broker: BrokerProcess, topic_name: str) -> None:
    kafka = pytest.importorskip("kafka")
    p = kafka.KafkaProducer(bootstrap_servers=faulty_broker.bootstrap, enable_idempotence=True,
                            linger_ms=2, batch_size=512, retries=10, acks="all")
    try:
        futures = [p.send(topic_name, b"k%04d" % i, partition=0) for i in range(N)]
        p.flush(timeout=60)
        offsets = [f.get(timeout=30).offset for f in futures]
    finally:
        p.close(timeout=5)
    assert _dropped(faulty_broker)
    assert offsets == list(range(N))  # each message acknowledged at its one and only offset
    assert read_all(faulty_broker.bootstrap, topic_name, "read_uncommitted", expect=N) == [b"k%04d" % i for i in range(N)]


def test_kafka_python_records_with_create_time_1970_keep_producer_state(
    broker: BrokerProcess, topic_name: str
) -> None:
    """kafka-python's own suite sends timestamp_ms=9999999 (1970) and then records stamped now:
    every batch after the first must still be accepted (expiration goes by the broker's clock,
    never by record timestamps)."""
    kafka = pytest.importorskip("kafka")
    p = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all")
    try:
        offsets = []
        for i in range(5):  # one batch each: get() waits for the acknowledgement
            stamp = 9_999_999 if i % 2 == 0 else None  # None: the client's clock
            future = p.send(topic_name, b"v%d" % i, partition=0, timestamp_ms=stamp)
            offsets.append(future.get(timeout=30).offset)
    finally:
        p.close(timeout=5)
    assert offsets == [0, 1, 2, 3, 4]
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted", expect=5) == [b"v%d" % i for i in range(5)]
