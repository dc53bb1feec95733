"""confluent-kafka (librdkafka) against a real kafkapy broker subprocess.

librdkafka is the strictest client we test: it negotiates the highest versions it can from
ApiVersions, pipelines requests, uses fetch sessions and flexible versions, and it is what
kcat, the Go/.NET/Node wrappers and most production tools are built on. If it works here, the
wire protocol is right for a large share of real users.

Every poll loop is bounded by a deadline; failure messages say what was missing.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from compat_tests.conftest import CODEC_IDS, BrokerProcess, stored_codecs, unique_topic

pytestmark = pytest.mark.timeout(90)

N_MESSAGES = 1000
N_PARTITIONS = 3
CONSUME_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Sent:
    seq: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, str | bytes | None]]


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, str | bytes | None]]
    timestamp: int


@pytest.fixture(scope="module")
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create_topic(
    admin: AdminClient,
    name: str,
    partitions: int = N_PARTITIONS,
    config: dict[str, str] | None = None,
) -> None:
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=10,
        request_timeout=ADMIN_TIMEOUT_S,
    )
    futures[name].result(timeout=ADMIN_TIMEOUT_S)


def producer(bootstrap: str, **extra: object) -> Producer:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "linger.ms": 5,
        "enable.idempotence": False,
        "message.timeout.ms": 20000,
    }
    conf.update(extra)
    return Producer(conf)


def produce_all(
    prod: Producer, topic: str, sends: list[Sent], timestamp: int = 0
) -> dict[int, Message]:
    """Produce and wait for every delivery report; returns seq -> delivered Message."""
    delivered: dict[int, Message] = {}
    errors: list[str] = []

    def reporter(seq: int) -> Callable[[KafkaError | None, Message], None]:
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(f"seq {seq}: {err}")
            else:
                delivered[seq] = msg

        return on_delivery

    for sent in sends:
        for _ in range(1000):
            try:
                prod.produce(
                    topic,
                    key=sent.key,
                    value=sent.value,
                    headers=sent.headers,
                    on_delivery=reporter(sent.seq),
                    timestamp=timestamp,
                )
                break
            except BufferError:
                prod.poll(0.1)
        else:
            raise AssertionError("producer queue stayed full for 100s")
        prod.poll(0)
    remaining = prod.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered within 30s"
    assert not errors, f"delivery errors: {errors[:5]}"
    assert len(delivered) == len(sends)
    return delivered


def consumer(bootstrap: str, **extra: object) -> Consumer:
    conf: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"compat-{os.getpid()}-{time.monotonic_ns()}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    }
    conf.update(extra)
    return Consumer(conf)


def consume(
    cons: Consumer,
    assignments: list[TopicPartition],
    expected: int,
    timeout_s: float = CONSUME_TIMEOUT_S,
) -> list[Got]:
    """Assign, then read until `expected` messages arrived and every partition hit EOF."""
    cons.assign(assignments)
    got: list[Got] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(got) >= expected and len(eof) >= len(assignments):
            break
        msg = cons.poll(0.2)
        if msg is None:
            continue
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                eof.add(partition)
                continue
            raise AssertionError(f"consumer error: {err}")
        assert offset is not None
        eof.discard(partition)
        headers = msg.headers() or []
        assert isinstance(headers, list)
        got.append(
            Got(partition, offset, msg.key(), msg.value(), list(headers), msg.timestamp()[1])
        )
    assert len(got) == expected, (
        f"consumed {len(got)} of {expected} messages in {timeout_s}s (EOF on partitions {sorted(eof)})"
    )
    return got


def keyed_messages(n: int, tag: str) -> list[Sent]:
    return [
        Sent(
            seq=i,
            key=f"key-{i % 41}".encode(),
            value=f"{tag}-value-{i:05d}-".encode() * 4,
            headers=[("seq", str(i).encode()), ("client", b"confluent-kafka"), ("seq", b"dup")],
        )
        for i in range(n)
    ]


def _seq(got: Got) -> int:
    """The producer's sequence number, carried in the first header."""
    name, value = got.headers[0]
    assert name == "seq", f"first header is {name!r}"
    assert isinstance(value, bytes)
    return int(value)


def check_roundtrip(sends: list[Sent], delivered: dict[int, Message], got: list[Got]) -> None:
    """What users rely on: nothing lost or doubled, order per partition, keys sticky."""
    by_seq = {_seq(g): g for g in got}
    assert len(by_seq) == len(sends), "duplicate or missing sequence numbers"
    partitions_per_key: dict[bytes | None, set[int]] = defaultdict(set)
    for sent in sends:
        g = by_seq[sent.seq]
        d = delivered[sent.seq]
        assert (g.partition, g.offset) == (d.partition(), d.offset()), (
            f"seq {sent.seq}: consumed at {g.partition}/{g.offset}, acked at {d.partition()}/{d.offset()}"
        )
        assert g.key == sent.key
        assert g.value == sent.value
        assert g.headers == sent.headers, f"seq {sent.seq}: headers {g.headers} != {sent.headers}"
        partitions_per_key[sent.key].add(g.partition)
    assert all(len(p) == 1 for p in partitions_per_key.values()), (
        f"a key landed on several partitions: { {k: p for k, p in partitions_per_key.items() if len(p) > 1} }"
    )
    per_partition: dict[int, list[Got]] = defaultdict(list)
    for g in got:
        per_partition[g.partition].append(g)
    for partition, records in per_partition.items():
        offsets = [r.offset for r in records]
        assert offsets == list(range(len(records))), (
            f"partition {partition}: offsets {offsets[:10]}..."
        )
        seqs = [_seq(r) for r in records]
        assert seqs == sorted(seqs), f"partition {partition}: produce order not kept"


def test_metadata_lists_broker_and_topic(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name)
    md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    brokers = [(str(b.host), b.port) for b in md.brokers.values()]
    assert brokers == [(broker.host, broker.port)]
    topic = md.topics[topic_name]
    assert topic.error is None
    assert sorted(topic.partitions) == list(range(N_PARTITIONS))
    assert all(p.leader in md.brokers for p in topic.partitions.values())


def test_keyed_produce_consume_1000(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name)
    sends = keyed_messages(N_MESSAGES, "plain")
    prod = producer(broker.bootstrap)
    delivered = produce_all(prod, topic_name, sends)
    cons = consumer(broker.bootstrap)
    try:
        got = consume(
            cons,
            [TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(N_PARTITIONS)],
            N_MESSAGES,
        )
    finally:
        cons.close()
    assert {g.partition for g in got} == set(range(N_PARTITIONS)), (
        "41 keys should hit every partition"
    )
    check_roundtrip(sends, delivered, got)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: BrokerProcess, admin: AdminClient, codec: str) -> None:
    topic = unique_topic(f"codec-{codec}")
    create_topic(admin, topic)
    sends = keyed_messages(300, codec)
    # Large batches so each request really carries a compressed multi-record batch.
    prod = producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20})
    delivered = produce_all(prod, topic, sends)
    cons = consumer(broker.bootstrap)
    try:
        got = consume(
            cons,
            [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(N_PARTITIONS)],
            len(sends),
        )
    finally:
        cons.close()
    check_roundtrip(sends, delivered, got)
    for partition in range(N_PARTITIONS):
        codecs = stored_codecs(broker, topic, partition)
        assert codecs, f"no batches stored for partition {partition}"
        assert set(codecs) == {CODEC_IDS[codec]}, f"stored codecs {codecs}: not {codec}-compressed"


def test_seek_offset_timestamp_end(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    base_ts = int(time.time() * 1000) - 1_000_000
    sends = [
        Sent(i, f"k{i}".encode(), f"v{i}".encode(), [("seq", str(i).encode())]) for i in range(100)
    ]
    prod = producer(broker.bootstrap, **{"linger.ms": 0})
    # One message per timestamp, 1 s apart, so offsets_for_times has exact answers.
    for sent in sends:
        produce_all(prod, topic_name, [sent], timestamp=base_ts + sent.seq * 1000)

    cons = consumer(broker.bootstrap)
    try:
        # Seek to an offset.
        got = consume(cons, [TopicPartition(topic_name, 0, 42)], 100 - 42)
        assert [g.offset for g in got] == list(range(42, 100))
        assert got[0].value == b"v42"
        assert got[0].timestamp == base_ts + 42 * 1000

        # Seek to a timestamp: exact hit, and between two records (-> the later one).
        found = cons.offsets_for_times(
            [TopicPartition(topic_name, 0, base_ts + 50_000)], timeout=ADMIN_TIMEOUT_S
        )
        assert found[0].offset == 50
        found = cons.offsets_for_times(
            [TopicPartition(topic_name, 0, base_ts + 60_500)], timeout=ADMIN_TIMEOUT_S
        )
        assert found[0].offset == 61
        found = cons.offsets_for_times(
            [TopicPartition(topic_name, 0, base_ts + 10_000_000)], timeout=ADMIN_TIMEOUT_S
        )
        assert found[0].offset in (-1, OFFSET_END), "past the last timestamp means no offset"
        got = consume(cons, [TopicPartition(topic_name, 0, 61)], 100 - 61)
        assert got[0].value == b"v61"

        low, high = cons.get_watermark_offsets(
            TopicPartition(topic_name, 0), timeout=ADMIN_TIMEOUT_S
        )
        assert (low, high) == (0, 100)
    finally:
        cons.close()

    # Seek to the end: only messages produced after the seek are seen.
    cons = consumer(broker.bootstrap)
    try:
        cons.assign([TopicPartition(topic_name, 0, OFFSET_END)])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = cons.poll(0.2)
            if msg is None:
                continue
            err = msg.error()
            assert err is not None, f"read an old message at offset {msg.offset()}"
            if err.code() == KafkaError._PARTITION_EOF:
                break
        else:
            raise AssertionError("no EOF after seeking to the end")
        produce_all(prod, topic_name, [Sent(100, b"k100", b"after-end", [])])
        deadline = time.monotonic() + 10
        fresh = None
        while fresh is None and time.monotonic() < deadline:
            msg = cons.poll(0.2)
            if msg is not None and not msg.error():
                fresh = msg
        assert fresh is not None, "message produced after seek-to-end not consumed in 10s"
        assert (fresh.offset(), fresh.value()) == (100, b"after-end")
    finally:
        cons.close()


def test_large_message_900k(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=1)
    value = os.urandom(900 * 1024)
    prod = producer(broker.bootstrap)
    delivered = produce_all(prod, topic_name, [Sent(0, b"big", value, [("seq", b"0")])])
    assert delivered[0].offset() == 0
    cons = consumer(broker.bootstrap)
    try:
        got = consume(cons, [TopicPartition(topic_name, 0, OFFSET_BEGINNING)], 1)
    finally:
        cons.close()
    assert got[0].key == b"big"
    assert got[0].value == value


def test_null_key_and_empty_value(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    create_topic(admin, topic_name, partitions=1)
    sends = [
        Sent(0, None, b"", [("seq", b"0")]),
        Sent(1, None, b"value-with-null-key", [("seq", b"1")]),
        Sent(2, b"key-with-null-value", None, [("seq", b"2")]),
        Sent(3, b"", b"", [("seq", b"3")]),
    ]
    prod = producer(broker.bootstrap)
    produce_all(prod, topic_name, sends)
    cons = consumer(broker.bootstrap)
    try:
        got = consume(cons, [TopicPartition(topic_name, 0, OFFSET_BEGINNING)], len(sends))
    finally:
        cons.close()
    assert [(g.key, g.value) for g in got] == [(s.key, s.value) for s in sends]


def _source(entry: ConfigEntry) -> ConfigSource:
    """librdkafka hands back the source as an int; the stubs say ConfigSource."""
    return ConfigSource(getattr(entry.source, "value", entry.source))


def _topic_config(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    result = admin.describe_configs([resource], request_timeout=ADMIN_TIMEOUT_S)
    entries: dict[str, ConfigEntry] = next(iter(result.values())).result(timeout=ADMIN_TIMEOUT_S)
    return entries


def test_describe_and_alter_topic_config(admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=1, config={"retention.ms": "3600000"})
    entries = _topic_config(admin, topic_name)
    assert entries["retention.ms"].value == "3600000"
    assert _source(entries["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert "cleanup.policy" in entries, "describe must list defaults too"
    assert entries["cleanup.policy"].value == "delete"

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry(
                "max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    futures = admin.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S)
    next(iter(futures.values())).result(timeout=ADMIN_TIMEOUT_S)
    entries = _topic_config(admin, topic_name)
    assert entries["retention.ms"].value == "7200000"
    assert entries["max.message.bytes"].value == "2000000"

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    futures = admin.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S)
    next(iter(futures.values())).result(timeout=ADMIN_TIMEOUT_S)
    entries = _topic_config(admin, topic_name)
    assert _source(entries["retention.ms"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["max.message.bytes"].value == "2000000"


def test_delete_topic(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    create_topic(admin, topic_name, partitions=2)
    produce_all(producer(broker.bootstrap), topic_name, keyed_messages(10, "del"))
    futures = admin.delete_topics(
        [topic_name], operation_timeout=10, request_timeout=ADMIN_TIMEOUT_S
    )
    futures[topic_name].result(timeout=ADMIN_TIMEOUT_S)
    deadline = time.monotonic() + 10
    while topic_name in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
        assert time.monotonic() < deadline, "deleted topic still listed after 10s"
        time.sleep(0.2)
    # Re-creating the name gives a new, empty topic.
    create_topic(admin, topic_name, partitions=1)
    cons = consumer(broker.bootstrap)
    try:
        low, high = cons.get_watermark_offsets(
            TopicPartition(topic_name, 0), timeout=ADMIN_TIMEOUT_S
        )
    finally:
        cons.close()
    assert (low, high) == (0, 0)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_seek_into_the_middle_of_a_batch(
    broker: BrokerProcess, admin: AdminClient, topic_name: str, codec: str
) -> None:
    """The broker returns the whole batch holding the offset; the client drops the records
    before it. Must hold for compressed batches too, where the broker cannot cut the batch."""
    create_topic(admin, topic_name, partitions=1)
    sends = [Sent(i, b"k", f"v{i}".encode(), [("seq", str(i).encode())]) for i in range(100)]
    # One flush after queueing everything with a long linger: a single 100-record batch.
    prod = producer(broker.bootstrap, **{"linger.ms": 200, "compression.type": codec})
    delivered = produce_all(prod, topic_name, sends)
    assert [delivered[i].offset() for i in range(100)] == list(range(100))
    cons = consumer(broker.bootstrap)
    try:
        got = consume(cons, [TopicPartition(topic_name, 0, 37)], 100 - 37)
    finally:
        cons.close()
    assert [g.offset for g in got] == list(range(37, 100))
    assert [g.value for g in got] == [f"v{i}".encode() for i in range(37, 100)]


def test_acks_zero(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    """acks=0: the broker sends no Produce response, and still appends every batch in order."""
    create_topic(admin, topic_name, partitions=1)
    sends = [
        Sent(i, None, f"fire-and-forget-{i}".encode(), [("seq", str(i).encode())])
        for i in range(200)
    ]
    prod = producer(broker.bootstrap, acks="0")
    produce_all(prod, topic_name, sends)
    cons = consumer(broker.bootstrap)
    try:
        got = consume(cons, [TopicPartition(topic_name, 0, OFFSET_BEGINNING)], len(sends))
    finally:
        cons.close()
    assert [g.value for g in got] == [s.value for s in sends]
    assert [g.offset for g in got] == list(range(len(sends)))


def test_admin_partitions_records_cluster_offsets(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    """The admin APIs behind librdkafka's AdminClient: CreatePartitions, DeleteRecords,
    DescribeCluster, DescribeTopics and ListOffsets (earliest, latest, max timestamp)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import NewPartitions, OffsetSpec  # type: ignore[attr-defined]

    create_topic(admin, topic_name, partitions=1)
    base_ts = int(time.time() * 1000) - 100_000
    prod = producer(broker.bootstrap, **{"linger.ms": 0})
    # Timestamps rise except for offset 6, which carries the largest one.
    for i in range(10):
        ts = base_ts + (50_000 if i == 6 else i * 1000)
        produce_all(prod, topic_name, [Sent(i, b"k", f"v{i}".encode(), [])], timestamp=ts)

    tp0 = TopicPartition(topic_name, 0)
    specs = {
        "earliest": OffsetSpec.earliest(),  # type: ignore[no-untyped-call]
        "latest": OffsetSpec.latest(),  # type: ignore[no-untyped-call]
        "max_timestamp": OffsetSpec.max_timestamp(),  # type: ignore[no-untyped-call]
    }
    found = {}
    for name, spec in specs.items():
        futures = admin.list_offsets({tp0: spec}, request_timeout=ADMIN_TIMEOUT_S)
        found[name] = futures[tp0].result(timeout=ADMIN_TIMEOUT_S)
    assert found["earliest"].offset == 0
    assert found["latest"].offset == 10
    assert (found["max_timestamp"].offset, found["max_timestamp"].timestamp) == (
        6,
        base_ts + 50_000,
    )

    deleted = admin.delete_records(
        [TopicPartition(topic_name, 0, 4)], request_timeout=ADMIN_TIMEOUT_S
    )
    assert deleted[tp0].result(timeout=ADMIN_TIMEOUT_S).low_watermark == 4
    cons = consumer(broker.bootstrap)
    try:
        assert cons.get_watermark_offsets(tp0, timeout=ADMIN_TIMEOUT_S) == (4, 10)
        got = consume(cons, [TopicPartition(topic_name, 0, OFFSET_BEGINNING)], 6)
        assert [g.offset for g in got] == list(range(4, 10))
    finally:
        cons.close()

    created = admin.create_partitions(
        [NewPartitions(topic_name, 3)], request_timeout=ADMIN_TIMEOUT_S
    )
    created[topic_name].result(timeout=ADMIN_TIMEOUT_S)
    description = admin.describe_topics(
        TopicCollection([topic_name]), request_timeout=ADMIN_TIMEOUT_S
    )
    topic = description[topic_name].result(timeout=ADMIN_TIMEOUT_S)
    assert [p.id for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader is not None and p.leader.id == 1 for p in topic.partitions)
    # The new partitions take writes at once.
    # (a new producer: an existing one only learns of new partitions at its next metadata refresh)
    fresh = producer(broker.bootstrap)
    fresh.produce(topic_name, value=b"to-partition-2", partition=2)
    assert fresh.flush(15) == 0
    cons = consumer(broker.bootstrap)
    try:
        high = cons.get_watermark_offsets(TopicPartition(topic_name, 2), timeout=ADMIN_TIMEOUT_S)
    finally:
        cons.close()
    assert high == (0, 1)

    cluster = admin.describe_cluster(request_timeout=ADMIN_TIMEOUT_S).result(
        timeout=ADMIN_TIMEOUT_S
    )
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(1, broker.host, broker.port)]
    assert cluster.controller is not None
    assert cluster.controller.id == 1
    assert cluster.cluster_id


def test_topic_config_changes_take_effect_live(
    broker: BrokerProcess, admin: AdminClient, topic_name: str
) -> None:
    """IncrementalAlterConfigs on a live topic changes what the next produce gets: LogAppendTime
    stamps, and a lower max.message.bytes refuses what was accepted a moment ago."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    create_topic(admin, topic_name, partitions=1)
    prod = producer(broker.bootstrap, **{"linger.ms": 0})
    old_ts = int(time.time() * 1000) - 3_600_000
    produce_all(prod, topic_name, [Sent(0, b"k", b"x" * 5000, [])], timestamp=old_ts)

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry(
                "message.timestamp.type",
                "LogAppendTime",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    futures = admin.incremental_alter_configs([resource], request_timeout=ADMIN_TIMEOUT_S)
    next(iter(futures.values())).result(timeout=ADMIN_TIMEOUT_S)

    before = int(time.time() * 1000)
    produce_all(prod, topic_name, [Sent(1, b"k", b"small", [])], timestamp=old_ts)
    errors: list[KafkaError] = []
    prod.produce(
        topic_name,
        value=b"x" * 5000,
        on_delivery=lambda err, _msg: errors.append(err) if err is not None else None,
    )
    prod.flush(15)
    assert [e.code() for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE], errors

    cons = consumer(broker.bootstrap)
    try:
        cons.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
        stamps: list[tuple[int, int]] = []
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(stamps) < 2 and time.monotonic() < deadline:
            msg = cons.poll(0.2)
            if msg is not None and msg.error() is None:
                stamps.append(msg.timestamp())
    finally:
        cons.close()
    assert stamps[0] == (TIMESTAMP_CREATE_TIME, old_ts)
    kind, ts = stamps[1]
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before - 5000 <= ts <= int(time.time() * 1000) + 5000, "not the broker's append time"


def test_idempotent_producer(broker: BrokerProcess, admin: AdminClient, topic_name: str) -> None:
    """enable.idempotence=true (the Java client's default): every message once, in order."""
    create_topic(admin, topic_name)
    sends = keyed_messages(300, "idempotent")
    prod = producer(
        broker.bootstrap, **{"enable.idempotence": True, "max.in.flight.requests.per.connection": 5}
    )
    delivered = produce_all(prod, topic_name, sends)
    cons = consumer(broker.bootstrap)
    try:
        got = consume(
            cons,
            [TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(N_PARTITIONS)],
            len(sends),
        )
    finally:
        cons.close()
    check_roundtrip(sends, delivered, got)
