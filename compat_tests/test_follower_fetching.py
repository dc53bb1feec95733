"""Follower fetching (KIP-392) with real consumers against a three-node cluster, racks a/b/c.

What users rely on:
- With `replica.selector.class=...RackAwareReplicaSelector`, a consumer with `client.rack=b`
  (confluent-kafka), `client_rack="b"` (kafka-python 3, aiokafka 0.14) or `rackId: 'b'`
  (kafkajs 2) reads every record of partitions led on rack a, and the bytes come from the rack-b
  follower: its per-topic follower bytes grow by what the consumer read, the leader sends that
  consumer nothing.
- read_committed on the follower: committed transactional records are seen, the records of an
  aborted transaction never are.
- Back to the leader: when the follower a consumer reads from stops and leaves the ISR, the
  same consumer reads every later record from the leader.
- kafka-python 3.0 forgets the preferred replica whenever the follower answers without naming
  one, so it asks the leader again after each read from the follower: the leader names the
  follower every time (also in an incremental fetch session where nothing else changed), and
  the consumer reads on to the end - not stuck at the leader when the follower's first answer
  stopped below the end (its high watermark or last stable offset still behind the leader's).
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import (  # noqa: F401  (the autouse fixture)
    ADMIN_TIMEOUT_S,
    _cluster_logs_on_failure,
    partitions,
    start_cluster,
    wait_until,
)
from compat_tests.test_kafkajs import KafkaJs, node  # noqa: F401  (the fixture: npm ci, node)
from kafkapy.broker.replica_selector import RACK_AWARE_SELECTOR
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(300)

#: node 1 (rack a) leads both partitions; node 2 is rack b, node 3 rack c
ASSIGNMENT = [[1, 2, 3], [1, 3, 2]]
FOLLOWER_BYTES = "kafkapy_server_brokertopicmetrics_followerbytesout_total"
CONSUMER_BYTES = "kafka_server_brokertopicmetrics_bytesout_total"


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(
        tmp_path_factory.mktemp("follower-fetch"), 3, racks=["a", "b", "c"], http=True,
        overrides={"replica.selector.class": RACK_AWARE_SELECTOR},
    )
    try:
        yield c
    finally:
        c.stop()


def topic_bytes(cluster: ClusterProcesses, node_id: int, name: str, topic: str) -> float:
    broker = cluster.nodes[node_id]
    with urllib.request.urlopen(f"http://{broker.host}:{broker.http_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name and s.labels.get("topic") == topic
    )


def prepare(cluster: ClusterProcesses, prefix: str) -> tuple[str, list[bytes]]:
    """A topic led by node 1 holding committed plain and transactional records and one aborted
    transaction, replicated to every node; the values a read_committed consumer must see."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic(prefix)
    admin.create_topics([NewTopic(topic, num_partitions=len(ASSIGNMENT), replica_assignment=ASSIGNMENT)])[topic].result(timeout=ADMIN_TIMEOUT_S)
    # every replica in the ISR: a follower outside it is never named (node 2 may still be
    # rejoining after the test that stops it)
    wait_until(
        "leaders and full ISRs",
        lambda: all(v[0] == 1 and len(v[2]) == 3 for v in partitions(admin, topic).values()) or None,
        cluster, timeout_s=120,
    )
    expected = [f"plain-{i}".encode() for i in range(40)]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i, v in enumerate(expected):
        producer.produce(topic, value=v, partition=i % 2)
    producer.flush(30)
    txn = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"tx-{topic}"})
    txn.init_transactions(30)
    for commit in (False, True):
        txn.begin_transaction()
        for p in (0, 1):
            txn.produce(topic, value=f"{'committed' if commit else 'aborted'}-{p}".encode(), partition=p)
        if commit:
            txn.commit_transaction(30)
            expected += [b"committed-0", b"committed-1"]
        else:
            txn.abort_transaction(30)
    return topic, expected


def consume_confluent(cluster: ClusterProcesses, topic: str, want: int) -> list[bytes]:
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}", "client.rack": "b",
        "auto.offset.reset": "earliest", "isolation.level": "read_committed", "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        end = time.monotonic() + 2  # nothing more (the aborted records) arrives
        while time.monotonic() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_a_rack_b_consumer_reads_committed_records_from_the_rack_b_follower(racked: ClusterProcesses) -> None:
    topic, expected = prepare(racked, "ff-confluent")
    got = consume_confluent(racked, topic, len(expected))
    assert sorted(got) == sorted(expected)
    assert not [v for v in got if v.startswith(b"aborted")]
    assert topic_bytes(racked, 2, FOLLOWER_BYTES, topic) > 0
    assert topic_bytes(racked, 2, CONSUMER_BYTES, topic) == topic_bytes(racked, 2, FOLLOWER_BYTES, topic)
    assert topic_bytes(racked, 1, CONSUMER_BYTES, topic) == 0  # the leader sent the consumer nothing
    assert topic_bytes(racked, 3, CONSUMER_BYTES, topic) == 0


def test_kafka_python_client_rack_reads_from_the_follower_too(racked: ClusterProcesses) -> None:
    topic, expected = prepare(racked, "ff-kafka-python")
    # assigned, not subscribed: what is tested is the follower read. kafka-python 3.0.12 in a
    # group can lose its own rejoin - its first JoinGroup, before it knew the topic's
    # partitions, assigned nothing; when the second join ends after a poll() timed out, the
    # next poll finds nothing to rejoin and never applies the assignment (no partitions, no
    # heartbeats: the coordinator removes it after session.timeout.ms) - 1 run in 20 here.
    consumer = KafkaConsumer(
        bootstrap_servers=racked.bootstrap, client_rack="b", auto_offset_reset="earliest",
        isolation_level="read_committed", enable_auto_commit=False,
    )
    consumer.assign([KafkaTopicPartition(topic, p) for p in range(len(ASSIGNMENT))])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(expected) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        for records in consumer.poll(timeout_ms=2000).values():  # nothing more (the aborted records)
            got += [r.value for r in records]
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected)
    assert topic_bytes(racked, 2, FOLLOWER_BYTES, topic) > 0
    assert topic_bytes(racked, 1, CONSUMER_BYTES, topic) == 0


def test_the_consumer_returns_to_the_leader_when_its_follower_leaves_the_isr(racked: ClusterProcesses) -> None:
    """The rack-b consumer reads from node 2; node 2 stops, leaves the ISR and is named no
    more, and the same consumer reads every later record from the leader (node 1)."""
    admin = AdminClient({"bootstrap.servers": racked.bootstrap})
    topic = unique_topic("ff-leaves-isr")
    admin.create_topics([NewTopic(topic, num_partitions=len(ASSIGNMENT), replica_assignment=ASSIGNMENT)])[topic].result(timeout=ADMIN_TIMEOUT_S)
    wait_until("leaders", lambda: all(v[0] == 1 and len(v[2]) == 3 for v in partitions(admin, topic).values()) or None, racked)
    producer = Producer({"bootstrap.servers": racked.bootstrap, "acks": "all"})

    def produce(prefix: str) -> list[bytes]:
        values = [f"{prefix}-{i}".encode() for i in range(20)]
        for i, v in enumerate(values):
            producer.produce(topic, value=v, partition=i % 2)
        assert producer.flush(60) == 0
        return values

    consumer = Consumer({
        "bootstrap.servers": racked.bootstrap, "group.id": f"g-{topic}", "client.rack": "b",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    got: list[bytes] = []

    def read(want: int, what: str) -> None:
        deadline = time.monotonic() + 120
        while len(got) < want:
            assert time.monotonic() < deadline, f"{what}: {len(got)} of {want} records"
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())

    try:
        before = produce("before")
        read(len(before), "from the follower")
        assert topic_bytes(racked, 2, FOLLOWER_BYTES, topic) > 0
        assert topic_bytes(racked, 1, CONSUMER_BYTES, topic) == 0
        racked.terminate(2)
        wait_until("node 2 out of the ISR", lambda: all(2 not in v[2] for v in partitions(admin, topic).values()) or None, racked)
        after = produce("after")
        read(len(before) + len(after), "from the leader")
        assert sorted(got) == sorted(before + after)
        assert topic_bytes(racked, 1, CONSUMER_BYTES, topic) > 0  # the leader served the rest
    finally:
        consumer.close()
        racked.restart(2)


def assert_read_from_the_rack_b_follower(cluster: ClusterProcesses, topic: str, expected: list[bytes]) -> None:
    """Every record byte the consumer got came from node 2 as a follower: its follower bytes
    cover at least the values read and are all it sent for the topic; nodes 1 and 3 sent none."""
    follower_bytes = topic_bytes(cluster, 2, FOLLOWER_BYTES, topic)
    assert follower_bytes >= sum(len(v) for v in expected)
    assert topic_bytes(cluster, 2, CONSUMER_BYTES, topic) == follower_bytes
    assert topic_bytes(cluster, 1, CONSUMER_BYTES, topic) == 0  # the leader sent the consumer nothing
    assert topic_bytes(cluster, 3, CONSUMER_BYTES, topic) == 0


def wait_for_group_coordinator(cluster: ClusterProcesses, group: str) -> None:
    """Until the group's coordinator has loaded its __consumer_offsets partition: kafkajs's
    consumer treats COORDINATOR_LOAD_IN_PROGRESS on its first JoinGroup as a crash (consume.js
    fails on any crash), and on a fresh cluster under load the load can outlast the wait
    FindCoordinator gives it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def answered() -> bool | None:
        try:
            admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
        except KafkaException:
            return None
        return True

    wait_until(f"the coordinator of {group}", answered, cluster, timeout_s=120)


def test_kafkajs_rack_id_reads_committed_records_from_the_rack_b_follower(
    racked: ClusterProcesses,
    node: str,  # noqa: F811  (the fixture imported above)
) -> None:
    """kafkajs 2 sends `rackId` in Fetch v11 and routes each partition to the preferred read
    replica the leader names (ConsumerGroup.findReadReplicaForPartitions), read_committed by
    default: it reads every committed record from node 2 and none of the aborted ones."""
    topic, expected = prepare(racked, "ff-kafkajs")
    wait_for_group_coordinator(racked, f"g-{topic}")
    kafkajs = KafkaJs(node, racked.bootstrap)
    # consume.js waits (up to timeout_s) until every expected record arrived, then fetches 2 s
    # more; KafkaJs.consume fails on any extra record (an aborted one) as on a missing one.
    got = kafkajs.consume(topic, f"g-{topic}", len(expected), rackId="b", settleMs=2000, timeout_s=90.0)
    assert sorted(m["value"].encode() for m in got) == sorted(expected)
    assert_read_from_the_rack_b_follower(racked, topic, expected)


def test_aiokafka_client_rack_reads_committed_records_from_the_rack_b_follower(racked: ClusterProcesses) -> None:
    """aiokafka 0.14 sends `client_rack` in Fetch v11 and fetches from the preferred read replica
    it caches (Fetcher._select_read_replica)."""
    topic, expected = prepare(racked, "ff-aiokafka")

    async def consume() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=racked.bootstrap, client_rack="b", auto_offset_reset="earliest",
            isolation_level="read_committed", enable_auto_commit=False,
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            consumer.assign([AioTopicPartition(topic, p) for p in range(len(ASSIGNMENT))])
            deadline = time.monotonic() + 60
            while len(got) < len(expected) and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records]
            for records in (await consumer.getmany(timeout_ms=2000)).values():  # nothing more (the aborted)
                got += [r.value for r in records]
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(asyncio.wait_for(consume(), 120))
    assert sorted(got) == sorted(expected)
    assert_read_from_the_rack_b_follower(racked, topic, expected)
