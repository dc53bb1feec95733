"""KIP-848 consumer groups (`group.protocol=consumer`) with confluent-kafka (librdkafka 2.16,
where the protocol is GA and opt-in) against a kafkapy subprocess.

What users rely on: two members share a topic's partitions, each partition to exactly one and
every record read once; when one leaves the other takes over every partition; committed
offsets are where a new member resumes. The broker hands out partitions incrementally, so a
member joining takes partitions only after their previous owner revoked them.

The broker runs with `group.consumer.heartbeat.interval.ms=500` (Kafka's default is 5 s): a
member learns of a new assignment at its next heartbeat, and the story has three of them.
Every poll loop is bounded by a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic
from compat_tests.test_groups_confluent import create_topic

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 4
DEADLINE_S = 40.0


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("kip848"))
    try:
        yield factory.start(extra_args=["--override", "group.consumer.heartbeat.interval.ms=500"])
    finally:
        problems = factory.close()
        assert not problems, problems


def produce(bootstrap: str, topic: str, per_partition: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


def expected(tag: str, per_partition: int) -> list[str]:
    return sorted(f"{tag}-{p}-{i}" for p in range(PARTITIONS) for i in range(per_partition))


class Member:
    """A consumer-protocol consumer plus what it owns and read (partition of every value)."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.owned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.read: list[tuple[int, str]] = []
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.owned |= {p.partition for p in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = {p.partition for p in partitions}
        if lost:
            self.revoked.append(lost)
        self.owned -= lost

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            value = msg.value()
            partition = msg.partition()
            assert value is not None
            assert partition is not None
            self.read.append((partition, value.decode()))

    def values(self) -> list[str]:
        return sorted(v for _, v in self.read)


def poll_until(ms: list[Member], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            state = {i: sorted(m.owned) for i, m in enumerate(ms)}
            raise AssertionError(f"timed out waiting for {what}; owned: {state}")
        for m in ms:
            m.poll()


def test_consumer_protocol_split_leave_and_resume(kip848_broker: BrokerProcess) -> None:
    bootstrap = kip848_broker.bootstrap
    topic, group = unique_topic("kip848"), unique_topic("kip848-group")
    create_topic(bootstrap, topic, PARTITIONS)
    a = Member(bootstrap, group, topic)
    b: Member | None = None
    try:
        poll_until([a], lambda: len(a.owned) == PARTITIONS, "the first member to own all")
        b = Member(bootstrap, group, topic)
        both = [a, b]
        poll_until(
            both,
            lambda: bool(a.owned) and bool(b.owned) and len(a.owned | b.owned) == PARTITIONS,
            "two members to split the partitions",
        )
        assert not a.owned & b.owned
        # incremental: "a" gave up only what moved to "b", and nothing else
        assert a.revoked == [b.owned]
        produce(bootstrap, topic, 10, "first")
        poll_until(both, lambda: len(a.read) + len(b.read) >= 40, "the 40 records")
        assert sorted(a.values() + b.values()) == expected("first", 10)
        assert {p for p, _ in a.read} <= a.owned
        assert {p for p, _ in b.read} <= b.owned
        a.consumer.commit(asynchronous=False)
        b.consumer.commit(asynchronous=False)
        b.consumer.close()  # leaves the group (member epoch -1)
        b = None
        poll_until([a], lambda: len(a.owned) == PARTITIONS, "the survivor to own all")
        before = len(a.read)
        produce(bootstrap, topic, 2, "second")
        poll_until([a], lambda: len(a.read) - before >= 8, "the 8 new records")
        assert sorted(v for _, v in a.read[before:]) == expected("second", 2)
        a.consumer.commit(asynchronous=False)
    finally:
        a.consumer.close()
        if b is not None:
            b.consumer.close()
    produce(bootstrap, topic, 1, "third")
    c = Member(bootstrap, group, topic)
    try:
        poll_until([c], lambda: len(c.read) >= 4, "the resumed member's 4 records")
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # nothing older may follow
            c.poll()
        assert c.values() == expected("third", 1), "did not resume from the committed offsets"
    finally:
        c.consumer.close()
