"""Consumer groups with confluent-kafka (librdkafka) consumers against a kafkapy subprocess.

What users rely on: partitions of a topic are shared out among a group's members, each to
exactly one; a static member (group.instance.id) that restarts within its session timeout gets
its partitions back without the others noticing; with the cooperative-sticky assignor a new
member takes only some partitions while the others keep consuming.

Every poll loop is bounded by a deadline.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic  # type: ignore[attr-defined]

from compat_tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(120)

SESSION_MS = 6000
DEADLINE_S = 40.0


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[
        name
    ].result(timeout=15)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "m") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"{tag}-{p}-{i}".encode(), partition=p)
    assert producer.flush(15) == 0


class Member:
    """A consumer plus the rebalance events it saw."""

    def __init__(self, bootstrap: str, group: str, topic: str, **extra: object) -> None:
        config: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            **extra,
        }
        self.consumer = Consumer(config)
        self.events: list[tuple[str, set[int]]] = []
        self.owned: set[int] = set()
        self.values: list[bytes] = []
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        got = {p.partition for p in partitions}
        self.events.append(("assign", got))
        self.owned |= got

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = {p.partition for p in partitions}
        self.events.append(("revoke", lost))
        self.owned -= lost

    def poll(self, timeout: float = 0.05) -> None:
        msg = self.consumer.poll(timeout)
        if msg is not None and msg.error() is None:
            value = msg.value()
            assert value is not None
            self.values.append(value)

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[Member], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():
        if time.monotonic() > deadline:
            state = {i: sorted(m.owned) for i, m in enumerate(members)}
            raise AssertionError(f"timed out waiting for {what}; owned: {state}")
        for m in members:
            m.poll()


@contextmanager
def members(bootstrap: str, group: str, topic: str, n: int, **extra: object) -> Iterator[list[Member]]:
    ms = [Member(bootstrap, group, topic, **extra) for _ in range(n)]
    try:
        yield ms
    finally:
        for m in ms:
            m.close()


def partitioned(ms: list[Member], total: int) -> bool:
    """Every partition owned by exactly one member, and every member owns some."""
    owned = [m.owned for m in ms]
    return (
        all(owned)
        and sum(len(o) for o in owned) == total
        and set().union(*owned) == set(range(total))
    )


def test_three_consumers_share_six_partitions(broker: BrokerProcess, topic_name: str) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    with members(broker.bootstrap, "three", topic_name, 3) as ms:
        poll_until(ms, lambda: partitioned(ms, 6), "6 partitions shared by 3 consumers")
        assert sorted(len(m.owned) for m in ms) == [2, 2, 2]
        produce(broker.bootstrap, topic_name, 6, 20)
        poll_until(ms, lambda: sum(len(m.values) for m in ms) >= 120, "all 120 messages")
        values = [v for m in ms for v in m.values]
        assert len(values) == len(set(values)) == 120  # each message to exactly one member


def test_static_member_restart_keeps_partitions_without_rebalance(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 4)
    a = Member(broker.bootstrap, "static", topic_name, **{"group.instance.id": "inst-a"})
    b = Member(broker.bootstrap, "static", topic_name, **{"group.instance.id": "inst-b"})
    try:
        poll_until([a, b], lambda: partitioned([a, b], 4), "2 static members sharing 4 partitions")
        poll_until([a, b], lambda: len(b.events) >= 1 and len(a.events) >= 1, "callbacks")
        a_partitions = set(a.owned)
        b_events = list(b.events)
        a.close()  # a static member does not leave the group on close
        a = Member(broker.bootstrap, "static", topic_name, **{"group.instance.id": "inst-a"})
        poll_until([a, b], lambda: a.owned == a_partitions, "the restarted member's partitions")
        for _ in range(20):  # give a rebalance, if any, the chance to show up at b
            a.poll()
            b.poll()
        assert b.events == b_events, "the other member saw a rebalance"
    finally:
        a.close()
        b.close()


def test_cooperative_sticky_moves_only_some_partitions(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name, 6)
    coop = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(broker.bootstrap, "coop", topic_name, **coop)
    second: Member | None = None
    try:
        poll_until([first], lambda: first.owned == set(range(6)), "the first member owning all 6")
        produce(broker.bootstrap, topic_name, 6, 5, tag="before")
        poll_until([first], lambda: len(first.values) >= 30, "first batch")
        second = Member(broker.bootstrap, "coop", topic_name, **coop)
        both = [first, second]
        poll_until(both, lambda: partitioned(both, 6), "6 partitions over 2 cooperative members")
        revoked = [p for kind, p in first.events if kind == "revoke"]
        # incremental: the first member only ever gave up part of its partitions...
        assert revoked
        assert all(len(r) < 6 for r in revoked)
        kept = set(range(6)) - set().union(*revoked)
        assert kept
        assert kept <= first.owned
        # ...and kept consuming the rest: messages to kept partitions reach it
        produce(broker.bootstrap, topic_name, 6, 5, tag="after")
        poll_until(both, lambda: sum(v.startswith(b"after") for m in both for v in m.values) >= 30,
                   "messages produced after the rebalance")
        got_after = {v.decode() for v in first.values if v.startswith(b"after")}
        assert {f"after-{p}-0" for p in kept} <= got_after
    finally:
        first.close()
        if second is not None:
            second.close()


def test_admin_describe_reports_authorized_operations(broker: BrokerProcess, topic_name: str) -> None:
    """KIP-430 as librdkafka's admin client asks for it: without an authorizer every operation
    a group supports is allowed; without the option the broker reports nothing."""
    create_topic(broker.bootstrap, topic_name, 1)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with members(broker.bootstrap, "described", topic_name, 1) as ms:
        poll_until(ms, lambda: partitioned(ms, 1), "the member's assignment")
        asked = admin.describe_consumer_groups(["described"], include_authorized_operations=True)
        group = asked["described"].result(timeout=15)
        assert [m.client_id for m in group.members] == ["rdkafka"]
        assert set(group.authorized_operations) == {
            AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,  # the group's configs (KIP-848)
        }
        plain = admin.describe_consumer_groups(["described"])["described"].result(timeout=15)
        assert not plain.authorized_operations
