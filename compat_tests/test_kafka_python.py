"""kafka-python 3.x against a real kafkapy broker subprocess.

kafka-python is pure Python with its own protocol implementation (generated from Kafka's JSON
schemas since 3.0), so it exercises a different encoder/decoder than librdkafka: different
version choices, different batching and its own admin client. The consumer runs without a group
(`group_id=None`, manual assignment) so these tests need no group coordinator.

Every poll loop is bounded by a deadline; failure messages say what was missing.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # type: ignore[import-untyped]
from kafka.admin import (  # type: ignore[import-untyped]
    AlterConfigOp,
    ConfigResource,
    ConfigResourceType,
    KafkaAdminClient,
)

from compat_tests.conftest import CODEC_IDS, BrokerProcess, stored_codecs, unique_topic

pytestmark = pytest.mark.timeout(90)

N_MESSAGES = 1000
N_PARTITIONS = 3
CONSUME_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Sent:
    seq: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        yield client
    finally:
        client.close()


def create_topic(
    admin: KafkaAdminClient,
    name: str,
    partitions: int = N_PARTITIONS,
    configs: dict[str, str] | None = None,
) -> None:
    admin.create_topics(
        {name: {"num_partitions": partitions, "replication_factor": 1, "configs": configs or {}}},
        timeout_ms=10000,
    )
    admin.wait_for_topics([name], timeout_ms=10000)


def producer(bootstrap: str, **extra: Any) -> KafkaProducer:
    conf: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "acks": "all",
        "linger_ms": 5,
        "request_timeout_ms": 15000,
        "enable_idempotence": False,
    }
    conf.update(extra)
    return KafkaProducer(**conf)


def produce_all(
    prod: KafkaProducer, topic: str, sends: list[Sent], timestamp_ms: int | None = None
) -> dict[int, Any]:
    """Send everything, flush, and return seq -> RecordMetadata (raises on any failed send)."""
    futures = [
        (
            s.seq,
            prod.send(
                topic, key=s.key, value=s.value, headers=s.headers, timestamp_ms=timestamp_ms
            ),
        )
        for s in sends
    ]
    prod.flush(timeout=30)
    return {seq: fut.get(timeout=5) for seq, fut in futures}


def consumer(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
    )


def poll_n(cons: KafkaConsumer, expected: int, timeout_s: float = CONSUME_TIMEOUT_S) -> list[Any]:
    """Poll until `expected` records arrived, then check that nothing extra follows."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        for records in cons.poll(timeout_ms=200, max_records=500).values():
            got.extend(records)
    assert len(got) == expected, f"consumed {len(got)} of {expected} records in {timeout_s}s"
    extra = cons.poll(timeout_ms=300)
    assert not any(extra.values()), f"unexpected extra records: {extra}"
    return got


def keyed_messages(n: int, tag: str) -> list[Sent]:
    return [
        Sent(
            seq=i,
            key=f"key-{i % 41}".encode(),
            value=f"{tag}-value-{i:05d}-".encode() * 4,
            headers=[("seq", str(i).encode()), ("client", b"kafka-python"), ("empty", b"")],
        )
        for i in range(n)
    ]


def check_roundtrip(sends: list[Sent], metas: dict[int, Any], got: list[Any]) -> None:
    """Nothing lost or doubled, acked offsets match, order per partition, keys sticky."""
    by_seq = {int(r.headers[0][1]): r for r in got}
    assert len(by_seq) == len(sends), "duplicate or missing sequence numbers"
    partitions_per_key: dict[bytes | None, set[int]] = defaultdict(set)
    for sent in sends:
        rec = by_seq[sent.seq]
        meta = metas[sent.seq]
        assert (rec.partition, rec.offset) == (meta.partition, meta.offset), f"seq {sent.seq}"
        assert rec.key == sent.key
        assert rec.value == sent.value
        assert list(rec.headers) == sent.headers
        partitions_per_key[sent.key].add(rec.partition)
    assert all(len(p) == 1 for p in partitions_per_key.values()), (
        "a key landed on several partitions"
    )
    per_partition: dict[int, list[Any]] = defaultdict(list)
    for rec in got:
        per_partition[rec.partition].append(rec)
    for partition, records in per_partition.items():
        assert [r.offset for r in records] == list(range(len(records))), f"partition {partition}"
        seqs = [int(r.headers[0][1]) for r in records]
        assert seqs == sorted(seqs), f"partition {partition}: produce order not kept"


def test_keyed_produce_consume_1000(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name)
    sends = keyed_messages(N_MESSAGES, "plain")
    prod = producer(broker.bootstrap)
    try:
        metas = produce_all(prod, topic_name, sends)
    finally:
        prod.close(timeout=5)
    cons = consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(topic_name, p) for p in range(N_PARTITIONS)]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        got = poll_n(cons, N_MESSAGES)
        assert cons.end_offsets(tps) == {
            tp: sum(1 for r in got if r.partition == tp.partition) for tp in tps
        }
    finally:
        cons.close()
    assert {r.partition for r in got} == set(range(N_PARTITIONS))
    check_roundtrip(sends, metas, got)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: BrokerProcess, admin: KafkaAdminClient, codec: str) -> None:
    topic = unique_topic(f"kp-codec-{codec}")
    create_topic(admin, topic)
    sends = keyed_messages(300, codec)
    prod = producer(broker.bootstrap, compression_type=codec, linger_ms=20)
    try:
        metas = produce_all(prod, topic, sends)
    finally:
        prod.close(timeout=5)
    cons = consumer(broker.bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(N_PARTITIONS)]
        cons.assign(tps)
        cons.seek_to_beginning(*tps)
        got = poll_n(cons, len(sends))
    finally:
        cons.close()
    check_roundtrip(sends, metas, got)
    for partition in range(N_PARTITIONS):
        codecs = stored_codecs(broker, topic, partition)
        assert codecs, f"no batches stored for partition {partition}"
        assert set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {codecs}: not {codec}-compressed"


def test_seek_offset_timestamp_end(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    base_ts = int(time.time() * 1000) - 1_000_000
    prod = producer(broker.bootstrap, linger_ms=0)
    cons = consumer(broker.bootstrap)
    tp = TopicPartition(topic_name, 0)
    try:
        # One message per timestamp, 1 s apart, so offsets_for_times has exact answers.
        for i in range(100):
            produce_all(
                prod,
                topic_name,
                [Sent(i, f"k{i}".encode(), f"v{i}".encode(), [])],
                base_ts + i * 1000,
            )
        cons.assign([tp])

        cons.seek(tp, 42)
        got = poll_n(cons, 100 - 42)
        assert [r.offset for r in got] == list(range(42, 100))
        assert (got[0].value, got[0].timestamp) == (b"v42", base_ts + 42_000)

        found = cons.offsets_for_times({tp: base_ts + 50_000}, timeout_ms=15000)
        assert found[tp] is not None
        assert (found[tp].offset, found[tp].timestamp) == (50, base_ts + 50_000)
        found = cons.offsets_for_times({tp: base_ts + 60_500}, timeout_ms=15000)
        assert found[tp] is not None
        assert found[tp].offset == 61
        found = cons.offsets_for_times({tp: base_ts + 10_000_000}, timeout_ms=15000)
        assert found[tp] is None, "no record at or after that timestamp"
        cons.seek(tp, 61)
        assert poll_n(cons, 100 - 61)[0].value == b"v61"

        assert cons.beginning_offsets([tp]) == {tp: 0}
        cons.seek_to_end(tp)
        assert cons.position(tp, timeout_ms=15000) == 100
        produce_all(prod, topic_name, [Sent(100, b"k100", b"after-end", [])])
        got = poll_n(cons, 1, timeout_s=10)
        assert (got[0].offset, got[0].value) == (100, b"after-end")
    finally:
        cons.close()
        prod.close(timeout=5)


def test_large_message_900k(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    value = os.urandom(900 * 1024)
    prod = producer(broker.bootstrap)
    try:
        metas = produce_all(prod, topic_name, [Sent(0, b"big", value, [])])
    finally:
        prod.close(timeout=5)
    assert metas[0].offset == 0
    cons = consumer(broker.bootstrap)
    try:
        cons.assign([TopicPartition(topic_name, 0)])
        cons.seek_to_beginning()
        got = poll_n(cons, 1)
    finally:
        cons.close()
    assert (got[0].key, got[0].value) == (b"big", value)


def test_null_key_and_empty_value(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    sends = [
        Sent(0, None, b"", []),
        Sent(1, None, b"value-with-null-key", []),
        Sent(2, b"key-with-null-value", None, []),
        Sent(3, b"", b"", [("empty-header", b"")]),
    ]
    prod = producer(broker.bootstrap)
    try:
        produce_all(prod, topic_name, sends)
    finally:
        prod.close(timeout=5)
    cons = consumer(broker.bootstrap)
    try:
        cons.assign([TopicPartition(topic_name, 0)])
        cons.seek_to_beginning()
        got = poll_n(cons, len(sends))
    finally:
        cons.close()
    assert [(r.key, r.value, list(r.headers)) for r in got] == [
        (s.key, s.value, s.headers) for s in sends
    ]


def _topic_configs(admin: KafkaAdminClient, topic: str) -> dict[str, dict[str, Any]]:
    result = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all"
    )
    configs: dict[str, dict[str, Any]] = result["topic"][topic]
    return configs


def test_describe_and_alter_topic_config(admin: KafkaAdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=1, configs={"retention.ms": "3600000"})
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"]["value"] == "3600000"
    assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert configs["cleanup.policy"]["value"] == "delete"

    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic_name,
                configs={
                    "retention.ms": (AlterConfigOp.SET, "7200000"),
                    "segment.bytes": "10485760",
                },
            )
        ]
    )
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"]["value"] == "7200000"
    assert configs["segment.bytes"]["value"] == "10485760"

    admin.alter_configs(
        [
            ConfigResource(
                ConfigResourceType.TOPIC,
                topic_name,
                configs={"retention.ms": (AlterConfigOp.DELETE, None)},
            )
        ]
    )
    configs = _topic_configs(admin, topic_name)
    assert configs["retention.ms"]["config_source"] != "DYNAMIC_TOPIC_CONFIG"
    assert configs["segment.bytes"]["value"] == "10485760"


def test_delete_topic(broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=2)
    prod = producer(broker.bootstrap)
    try:
        produce_all(prod, topic_name, keyed_messages(10, "del"))
    finally:
        prod.close(timeout=5)
    admin.delete_topics([topic_name], timeout_ms=10000)
    deadline = time.monotonic() + 10
    while topic_name in admin.list_topics():
        assert time.monotonic() < deadline, "deleted topic still listed after 10s"
        time.sleep(0.2)


def test_delete_topic_by_id(admin: KafkaAdminClient, topic_name: str) -> None:
    """DeleteTopics v6+ names topics by id (KIP-516); the id is the one Metadata reported."""
    create_topic(admin, topic_name, partitions=1)
    (described,) = admin.describe_topic_partitions([topic_name])["topics"]
    topic_id = described["topic_id"]
    assert isinstance(topic_id, uuid.UUID)
    assert topic_id.int != 0
    admin.delete_topics([topic_id], timeout_ms=10000)
    deadline = time.monotonic() + 10
    while topic_name in admin.list_topics():
        assert time.monotonic() < deadline, "topic deleted by id still listed after 10s"
        time.sleep(0.2)


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_seek_into_the_middle_of_a_batch(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str, codec: str | None
) -> None:
    """The broker returns the whole batch holding the offset; the client drops the records
    before it (a compressed batch cannot be cut)."""
    create_topic(admin, topic_name, partitions=1)
    sends = [Sent(i, b"k", f"v{i}".encode(), []) for i in range(100)]
    prod = producer(broker.bootstrap, linger_ms=200, compression_type=codec)
    try:
        metas = produce_all(prod, topic_name, sends)
    finally:
        prod.close(timeout=5)
    assert [metas[i].offset for i in range(100)] == list(range(100))
    cons = consumer(broker.bootstrap)
    tp = TopicPartition(topic_name, 0)
    try:
        cons.assign([tp])
        cons.seek(tp, 37)
        got = poll_n(cons, 100 - 37)
    finally:
        cons.close()
    assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(37, 100)]


def test_admin_log_dirs_topic_partitions_cluster(
    broker: BrokerProcess, admin: KafkaAdminClient, topic_name: str
) -> None:
    """DescribeLogDirs, DescribeTopicPartitions, DescribeCluster and broker configs with
    synonyms, as kafka-python's admin client asks for them."""
    create_topic(admin, topic_name, partitions=2)
    prod = producer(broker.bootstrap)
    try:
        prod.send(topic_name, b"sized", partition=0).get(timeout=10)
    finally:
        prod.close(timeout=5)

    (entry,) = admin.describe_log_dirs()
    assert entry["broker"] == 1
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for log_dir in entry["log_dirs"]
        for t in log_dir["topics"]
        for p in t["partitions"]
    }
    assert sizes[(topic_name, 0)] > 0
    assert sizes[(topic_name, 1)] == 0

    described = admin.describe_topic_partitions([topic_name])
    (topic,) = described["topics"]
    assert (topic["name"], topic["error_code"]) == (topic_name, 0)
    assert [
        (p["partition_index"], p["leader_id"], p["isr_nodes"]) for p in topic["partitions"]
    ] == [
        (0, 1, [1]),
        (1, 1, [1]),
    ]

    cluster = admin.describe_cluster()
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (1, broker.host, broker.port)
    ]

    result = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic_name)],
        include_synonyms=True,
        config_filter="all",
    )
    retention = result["topic"][topic_name]["retention.ms"]
    assert retention["config_source"] == "DEFAULT_CONFIG"
    # The topic default comes from the broker's log.retention.* keys: DescribeConfigs says which.
    assert retention["synonyms"], "a topic default should name the broker key it comes from"


def test_producer_with_default_settings(broker: BrokerProcess, topic_name: str) -> None:
    """What the README's first example does: a producer with kafka-python's defaults."""
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        meta = prod.send(topic_name, b"hello").get(timeout=15)  # auto-creates the topic
    finally:
        prod.close(timeout=5)
    assert meta.offset == 0
