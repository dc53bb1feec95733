"""Consumer groups with kafka-python and aiokafka against a kafkapy subprocess.

Fan-out: two groups each read every message of a topic, each at its own pace - one group's
commits never move the other's position. And a committed position is where the next member of
the same group starts, across client libraries.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KTopicPartition

if TYPE_CHECKING:
    from compat_tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
PER_PARTITION = 30
TOTAL = PARTITIONS * PER_PARTITION


def setup_topic(bootstrap: str, topic: str) -> set[bytes]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[
        topic
    ].result(timeout=15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            value = f"{p}-{i}".encode()
            producer.produce(topic, value, partition=p)
            sent.add(value)
    assert producer.flush(15) == 0
    return sent


def kafka_python_read_all(bootstrap: str, topic: str, group: str) -> list[bytes]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=20_000,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    got: list[bytes] = []
    try:
        for msg in consumer:
            got.append(msg.value)
            if len(got) >= TOTAL:
                break
        consumer.commit()
        positions = {p: consumer.committed(KTopicPartition(topic, p)) for p in range(PARTITIONS)}
        assert positions == dict.fromkeys(range(PARTITIONS), PER_PARTITION)
    finally:
        consumer.close()
    return got


async def aiokafka_read(bootstrap: str, topic: str, group: str, at_least: int) -> list[bytes]:
    """Read at least `at_least` messages, commit what was read, leave the group."""
    from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]

    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < at_least:
            assert time.monotonic() < deadline, f"aiokafka read {len(got)} of {at_least}"
            batches = await consumer.getmany(timeout_ms=500, max_records=10)
            for messages in batches.values():
                got.extend(m.value for m in messages if m.value is not None)
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


def test_fan_out_two_groups_each_read_everything(broker: BrokerProcess, topic_name: str) -> None:
    sent = setup_topic(broker.bootstrap, topic_name)
    slow = f"slow-{topic_name}"
    # the slow group reads a third, commits and stops...
    first = asyncio.run(aiokafka_read(broker.bootstrap, topic_name, slow, TOTAL // 3))
    # ...while the fast group reads everything
    fast = kafka_python_read_all(broker.bootstrap, topic_name, f"fast-{topic_name}")
    assert sorted(fast) == sorted(sent)
    # the slow group resumes from its own commit: the rest, nothing twice
    rest = asyncio.run(aiokafka_read(broker.bootstrap, topic_name, slow, TOTAL - len(first)))
    assert sorted(first + rest) == sorted(sent)


def test_commit_from_one_client_is_where_another_resumes(
    broker: BrokerProcess, topic_name: str
) -> None:
    sent = setup_topic(broker.bootstrap, topic_name)
    group = f"handover-{topic_name}"
    first = asyncio.run(aiokafka_read(broker.bootstrap, topic_name, group, 20))
    consumer = KafkaConsumer(
        topic_name,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=10_000,
    )
    try:
        rest = []
        for msg in consumer:
            rest.append(msg.value)
            if len(first) + len(rest) >= TOTAL:
                break
    finally:
        consumer.close()
    assert sorted(first + rest) == sorted(sent)


async def aiokafka_three_members(bootstrap: str, topic: str, group: str) -> list[set[int]]:
    from aiokafka import AIOKafkaConsumer

    consumers = [
        AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
            session_timeout_ms=6000, heartbeat_interval_ms=500,
        )
        for _ in range(3)
    ]
    for c in consumers:
        await c.start()
    try:
        deadline = time.monotonic() + 40
        while True:
            owned = [{tp.partition for tp in c.assignment()} for c in consumers]
            if all(owned) and sum(map(len, owned)) == 6 and set().union(*owned) == set(range(6)):
                return owned
            assert time.monotonic() < deadline, f"assignments never settled: {owned}"
            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
    finally:
        for c in consumers:
            await c.stop()


def test_aiokafka_three_members_share_six_partitions(broker: BrokerProcess, topic_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, num_partitions=6, replication_factor=1)])[
        topic_name
    ].result(timeout=15)
    owned = asyncio.run(aiokafka_three_members(broker.bootstrap, topic_name, f"aio-{topic_name}"))
    assert sorted(map(len, owned)) == [2, 2, 2]
