"""aiokafka (asyncio) against a real kafkapy broker subprocess.

aiokafka keeps its own hand-written protocol structs (not generated from Kafka's JSON), picks its
own API versions and uses the legacy (non-incremental) AlterConfigs API, so it catches a different
class of wire bugs than kafka-python or librdkafka.

pytest-trio's trio_mode is on for the whole suite, so these tests are plain sync functions that
drive asyncio with `asyncio.run(asyncio.wait_for(...))`; every await is bounded that way and every
poll loop by a deadline.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from aiokafka import (  # type: ignore[import-untyped]
    AIOKafkaConsumer,
    AIOKafkaProducer,
    TopicPartition,
)
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # type: ignore[import-untyped]
from aiokafka.admin.config_resource import (  # type: ignore[import-untyped]
    ConfigResource,
    ConfigResourceType,
)

from compat_tests.conftest import CODEC_IDS, BrokerProcess, stored_codecs, unique_topic

pytestmark = pytest.mark.timeout(90)

T = TypeVar("T")

N_MESSAGES = 1000
N_PARTITIONS = 3
CONSUME_TIMEOUT_S = 30.0
TEST_TIMEOUT_S = 60.0
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs ConfigSource code


@dataclass(frozen=True)
class Sent:
    seq: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def run(coro: Awaitable[T], timeout_s: float = TEST_TIMEOUT_S) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout_s)

    return asyncio.run(bounded())


async def create_topic(
    bootstrap: str, name: str, partitions: int = N_PARTITIONS, configs: dict[str, str] | None = None
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    await admin.start()
    try:
        resp = await admin.create_topics(
            [NewTopic(name, partitions, 1, topic_configs=configs or {})], timeout_ms=10000
        )
        errors = [(t[0], t[1]) for t in resp.topic_errors if t[1] != 0]
        assert not errors, f"CreateTopics errors: {errors}"
    finally:
        await admin.close()


async def produce_all(
    bootstrap: str, topic: str, sends: list[Sent], timestamp_ms: int | None = None, **extra: Any
) -> dict[int, Any]:
    """Send everything with acks=all; returns seq -> RecordMetadata (raises on any failure)."""
    prod = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        linger_ms=extra.pop("linger_ms", 5),
        request_timeout_ms=15000,
        enable_idempotence=False,
        **extra,
    )
    await prod.start()
    try:
        futures = [
            (
                s.seq,
                await prod.send(
                    topic, key=s.key, value=s.value, headers=s.headers, timestamp_ms=timestamp_ms
                ),
            )
            for s in sends
        ]
        return {seq: await fut for seq, fut in futures}
    finally:
        await prod.stop()


def new_consumer(bootstrap: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=15000,
    )


async def get_n(
    cons: AIOKafkaConsumer, expected: int, timeout_s: float = CONSUME_TIMEOUT_S
) -> list[Any]:
    """Fetch until `expected` records arrived, then check nothing extra follows."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < expected and time.monotonic() < deadline:
        for records in (await cons.getmany(timeout_ms=200, max_records=500)).values():
            got.extend(records)
    assert len(got) == expected, f"consumed {len(got)} of {expected} records in {timeout_s}s"
    extra = await cons.getmany(timeout_ms=300)
    assert not any(extra.values()), f"unexpected extra records: {extra}"
    return got


async def consume_from_beginning(
    bootstrap: str, topic: str, partitions: int, expected: int
) -> list[Any]:
    cons = new_consumer(bootstrap)
    await cons.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        cons.assign(tps)
        await cons.seek_to_beginning(*tps)
        return await get_n(cons, expected)
    finally:
        await cons.stop()


def keyed_messages(n: int, tag: str) -> list[Sent]:
    return [
        Sent(
            seq=i,
            key=f"key-{i % 41}".encode(),
            value=f"{tag}-value-{i:05d}-".encode() * 4,
            headers=[("seq", str(i).encode()), ("client", b"aiokafka")],
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
        assert (rec.key, rec.value) == (sent.key, sent.value)
        assert [(k, bytes(v)) for k, v in rec.headers] == sent.headers
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


def test_keyed_produce_consume_1000(broker: BrokerProcess, topic_name: str) -> None:
    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic_name)
        sends = keyed_messages(N_MESSAGES, "plain")
        metas = await produce_all(broker.bootstrap, topic_name, sends)
        got = await consume_from_beginning(broker.bootstrap, topic_name, N_PARTITIONS, N_MESSAGES)
        assert {r.partition for r in got} == set(range(N_PARTITIONS))
        check_roundtrip(sends, metas, got)

    run(scenario())


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compression_codecs(broker: BrokerProcess, codec: str) -> None:
    topic = unique_topic(f"aio-codec-{codec}")

    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic)
        sends = keyed_messages(300, codec)
        metas = await produce_all(
            broker.bootstrap, topic, sends, compression_type=codec, linger_ms=20
        )
        got = await consume_from_beginning(broker.bootstrap, topic, N_PARTITIONS, len(sends))
        check_roundtrip(sends, metas, got)
        for partition in range(N_PARTITIONS):
            codecs = stored_codecs(broker, topic, partition)
            assert codecs, f"no batches stored for partition {partition}"
            assert set(codecs) == {CODEC_IDS[codec]}, (
                f"stored codecs {codecs}: not {codec}-compressed"
            )

    run(scenario())


def test_seek_offset_timestamp_end(broker: BrokerProcess, topic_name: str) -> None:
    base_ts = int(time.time() * 1000) - 1_000_000
    tp = TopicPartition(topic_name, 0)

    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic_name, partitions=1)
        # One message per timestamp, 1 s apart, so offsets_for_times has exact answers.
        for i in range(100):
            sent = Sent(i, f"k{i}".encode(), f"v{i}".encode(), [])
            await produce_all(
                broker.bootstrap, topic_name, [sent], timestamp_ms=base_ts + i * 1000, linger_ms=0
            )
        cons = new_consumer(broker.bootstrap)
        await cons.start()
        try:
            cons.assign([tp])
            cons.seek(tp, 42)
            got = await get_n(cons, 100 - 42)
            assert [r.offset for r in got] == list(range(42, 100))
            assert (got[0].value, got[0].timestamp) == (b"v42", base_ts + 42_000)

            found = await cons.offsets_for_times({tp: base_ts + 50_000})
            assert found[tp] is not None
            assert (found[tp].offset, found[tp].timestamp) == (50, base_ts + 50_000)
            found = await cons.offsets_for_times({tp: base_ts + 60_500})
            assert found[tp] is not None
            assert found[tp].offset == 61
            found = await cons.offsets_for_times({tp: base_ts + 10_000_000})
            assert found[tp] is None, "no record at or after that timestamp"
            cons.seek(tp, 61)
            assert (await get_n(cons, 100 - 61))[0].value == b"v61"

            assert await cons.beginning_offsets([tp]) == {tp: 0}
            assert await cons.end_offsets([tp]) == {tp: 100}
            await cons.seek_to_end(tp)
            assert await cons.position(tp) == 100
            await produce_all(broker.bootstrap, topic_name, [Sent(100, b"k100", b"after-end", [])])
            got = await get_n(cons, 1, timeout_s=10)
            assert (got[0].offset, got[0].value) == (100, b"after-end")
        finally:
            await cons.stop()

    run(scenario())


def test_large_message_900k(broker: BrokerProcess, topic_name: str) -> None:
    value = os.urandom(900 * 1024)

    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic_name, partitions=1)
        metas = await produce_all(broker.bootstrap, topic_name, [Sent(0, b"big", value, [])])
        assert metas[0].offset == 0
        got = await consume_from_beginning(broker.bootstrap, topic_name, 1, 1)
        assert (got[0].key, got[0].value) == (b"big", value)

    run(scenario())


def test_null_key_and_empty_value(broker: BrokerProcess, topic_name: str) -> None:
    sends = [
        Sent(0, None, b"", []),
        Sent(1, None, b"value-with-null-key", []),
        Sent(2, b"key-with-null-value", None, []),
        Sent(3, b"", b"", [("empty-header", b"")]),
    ]

    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic_name, partitions=1)
        await produce_all(broker.bootstrap, topic_name, sends)
        got = await consume_from_beginning(broker.bootstrap, topic_name, 1, len(sends))
        assert [(r.key, r.value, [(k, bytes(v)) for k, v in r.headers]) for r in got] == [
            (s.key, s.value, s.headers) for s in sends
        ]

    run(scenario())


async def _topic_configs(
    admin: AIOKafkaAdminClient, topic: str
) -> dict[str, tuple[str | None, int]]:
    """name -> (value, source); source is -1 when the broker answered DescribeConfigs v0."""
    responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    out: dict[str, tuple[str | None, int]] = {}
    for resp in responses:
        for error_code, error_message, _rtype, name, entries in resp.resources:
            assert error_code == 0, f"DescribeConfigs {name}: {error_code} {error_message}"
            for entry in entries:
                source = entry[3] if resp.API_VERSION >= 1 else -1
                out[entry[0]] = (entry[1], source)
    return out


def test_describe_and_alter_topic_config(broker: BrokerProcess, topic_name: str) -> None:
    async def scenario() -> None:
        await create_topic(
            broker.bootstrap, topic_name, partitions=1, configs={"retention.ms": "3600000"}
        )
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
        await admin.start()
        try:
            configs = await _topic_configs(admin, topic_name)
            assert configs["retention.ms"][0] == "3600000"
            assert configs["retention.ms"][1] in (DYNAMIC_TOPIC_CONFIG, -1)
            assert configs["cleanup.policy"][0] == "delete"

            # Legacy AlterConfigs replaces the whole set of topic overrides.
            responses = await admin.alter_configs(
                [
                    ConfigResource(
                        ConfigResourceType.TOPIC, topic_name, configs={"retention.ms": "7200000"}
                    )
                ]
            )
            for resp in responses:
                assert all(r[0] == 0 for r in resp.resources), f"AlterConfigs: {resp.resources}"
            configs = await _topic_configs(admin, topic_name)
            assert configs["retention.ms"][0] == "7200000"
        finally:
            await admin.close()

    run(scenario())


def test_delete_topic(broker: BrokerProcess, topic_name: str) -> None:
    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic_name, partitions=2)
        await produce_all(broker.bootstrap, topic_name, keyed_messages(10, "del"))
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
        await admin.start()
        try:
            assert topic_name in await admin.list_topics()
            resp = await admin.delete_topics([topic_name], timeout_ms=10000)
            errors = [t for t in resp.topic_error_codes if t[1] != 0]
            assert not errors, f"DeleteTopics errors: {errors}"
            deadline = time.monotonic() + 10
            while topic_name in await admin.list_topics():
                assert time.monotonic() < deadline, "deleted topic still listed after 10s"
                await asyncio.sleep(0.2)
        finally:
            await admin.close()

    run(scenario())


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_seek_into_the_middle_of_a_batch(
    broker: BrokerProcess, topic_name: str, codec: str | None
) -> None:
    """The broker returns the whole batch holding the offset; the client drops the records
    before it (a compressed batch cannot be cut)."""
    sends = [Sent(i, b"k", f"v{i}".encode(), []) for i in range(100)]
    tp = TopicPartition(topic_name, 0)

    async def scenario() -> None:
        await create_topic(broker.bootstrap, topic_name, partitions=1)
        metas = await produce_all(
            broker.bootstrap, topic_name, sends, linger_ms=200, compression_type=codec
        )
        assert [metas[i].offset for i in range(100)] == list(range(100))
        cons = new_consumer(broker.bootstrap)
        await cons.start()
        try:
            cons.assign([tp])
            cons.seek(tp, 37)
            got = await get_n(cons, 100 - 37)
        finally:
            await cons.stop()
        assert [(r.offset, r.value) for r in got] == [(i, f"v{i}".encode()) for i in range(37, 100)]

    run(scenario())
