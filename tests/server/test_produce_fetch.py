"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch semantics through real sockets."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.protocol import ApiKey, RequestHeader, decode_response
from kafkapy.protocol.compression import compress
from kafkapy.protocol.crc import crc32c
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
)
from kafkapy.protocol.raw_response import FileRegion
from kafkapy.protocol.records import (
    Compression,
    Record,
    build_batch,
    decode_records,
    iter_batches,
    parse_batch_header,
)
from kafkapy.server.zerocopy import close_fds, read_region
from kafkapy.storage import validator

from .helpers import Client, batch, create_topic, list_topics, running_broker, topic_overrides

PRODUCE_V = 9
FETCH_V = 12


def produce_req(topic: str, records: bytes | None, *, acks: int = -1, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def fetch_req(topic: str, offset: int, *, wait_ms: int = 0, min_bytes: int = 0, max_bytes: int = 1 << 20,
              partition_max: int = 1 << 20, partitions: tuple[int, ...] = (0,)) -> FetchRequest:
    return FetchRequest(max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, session_epoch=-1,
                        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                            FetchRequest.FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=partition_max)
                            for p in partitions])])


def values(records: bytes | memoryview | None) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    buf = bytes(records or b"")
    for pos, header in iter_batches(buf):
        for r in decode_records(buf, pos, header):
            out.append((header.base_offset + r.offset_delta, r.value))
    return out


async def test_produce_then_fetch_round_trip_with_offsets_and_leader_epoch(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        await create_topic(port, "t", 2)
        client = await Client.connect(port)
        r1 = await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"a", b"b")))
        r2 = await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"c")))
        p1, p2 = r1.responses[0].partition_responses[0], r2.responses[0].partition_responses[0]
        assert (p1.error_code, p1.base_offset, p1.log_start_offset) == (0, 0, 0)
        assert (p2.base_offset, p2.log_append_time_ms) == (2, -1)
        fetched = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))
        part = fetched.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, part.log_start_offset) == (0, 3, 0)
        assert values(part.records) == [(0, b"a"), (1, b"b"), (2, b"c")]
        # the partition leader epoch is the leader's, whatever the producer put there
        assert parse_batch_header(bytes(part.records)).partition_leader_epoch == 0


async def test_fetch_inside_a_batch_returns_the_whole_batch() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"0", b"1", b"2")))
        part = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 1))).responses[0].partitions[0]
        assert values(part.records) == [(0, b"0"), (1, b"1"), (2, b"2")]


async def test_fetch_checks_the_clients_leader_epoch() -> None:
    """One node leads in epoch 0: a consumer naming epoch 0 (what Metadata told it) or none
    reads; a newer epoch is UNKNOWN_LEADER_EPOCH (the client retries), as on a cluster leader."""
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"x")))
        for epoch, code, records in [(-1, ErrorCode.NONE, [(0, b"x")]), (0, ErrorCode.NONE, [(0, b"x")]),
                                     (1, ErrorCode.UNKNOWN_LEADER_EPOCH, [])]:
            req = fetch_req("t", 0)
            req.topics[0].partitions[0].current_leader_epoch = epoch
            part = (await client.request(ApiKey.FETCH, FETCH_V, req)).responses[0].partitions[0]
            assert (part.error_code, values(part.records)) == (code, records)


async def test_fetch_offset_out_of_range_reports_log_start() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"x")))
        part = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 5))).responses[0].partitions[0]
        assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert part.log_start_offset == 0
        at_end = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 1))).responses[0].partitions[0]
        assert at_end.error_code == 0
        assert values(at_end.records) == []


async def test_long_poll_fetch_wakes_on_append_from_another_connection() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        consumer, producer = await Client.connect(port), await Client.connect(port)
        await consumer.send(ApiKey.FETCH, FETCH_V, fetch_req("t", 0, wait_ms=10_000, min_bytes=1))
        await trio.sleep(0.2)
        start = trio.current_time()
        await producer.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"wake")))
        _, resp = await consumer.receive(wait_s=5)
        assert trio.current_time() - start < 2
        assert values(resp.responses[0].partitions[0].records) == [(0, b"wake")]


async def test_long_poll_fetch_times_out_with_empty_records() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        start = trio.current_time()
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0, wait_ms=300, min_bytes=1))
        assert trio.current_time() - start >= 0.29
        assert values(resp.responses[0].partitions[0].records) == []


async def test_min_bytes_waits_for_enough_data() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        consumer, producer = await Client.connect(port), await Client.connect(port)
        first = batch(b"x" * 10)
        await producer.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", first))
        await consumer.send(ApiKey.FETCH, FETCH_V, fetch_req("t", 0, wait_ms=5000, min_bytes=len(first) + 1))
        await trio.sleep(0.2)
        await producer.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"y" * 10)))
        _, resp = await consumer.receive(wait_s=4)
        assert [v for _, v in values(resp.responses[0].partitions[0].records)] == [b"x" * 10, b"y" * 10]


async def test_max_bytes_limits_but_first_batch_always_comes() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 2)
        client = await Client.connect(port)
        for p in (0, 1):
            for _ in range(3):
                await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"z" * 1000), partition=p))
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0, max_bytes=10, partitions=(0, 1)))
        p0, p1 = resp.responses[0].partitions
        assert len(values(p0.records)) == 1  # one whole batch despite max_bytes=10 (KIP-74)
        assert values(p1.records) == []


async def test_produce_errors_per_partition() -> None:
    async with running_broker(None, **{"auto.create.topics.enable": "false", "message.max.bytes": "2000"}) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)

        async def code(req: ProduceRequest) -> int:
            resp = await client.request(ApiKey.PRODUCE, PRODUCE_V, req)
            return int(resp.responses[0].partition_responses[0].error_code)

        assert await code(produce_req("missing", batch(b"x"))) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert await code(produce_req("t", batch(b"x"), partition=7)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        corrupt = bytearray(batch(b"hello"))
        corrupt[-1] ^= 0xFF
        assert await code(produce_req("t", bytes(corrupt))) == ErrorCode.CORRUPT_MESSAGE
        assert await code(produce_req("t", batch(b"x" * 5000))) == ErrorCode.MESSAGE_TOO_LARGE
        assert await code(produce_req("t", batch(b"x"), acks=2)) == ErrorCode.INVALID_REQUIRED_ACKS
        assert await code(produce_req("__consumer_offsets", batch(b"x"))) == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert await code(produce_req("t", batch(b"ok"))) == ErrorCode.NONE


async def test_acks_zero_sends_no_response_but_appends() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.send(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"silent"), acks=0))
        client.pending.clear()  # no response will come for it
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))
        assert values(resp.responses[0].partitions[0].records) == [(0, b"silent")]


async def test_produce_auto_creates_topics() -> None:
    async with running_broker(None, **{"num.partitions": "3"}) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("fresh", batch(b"x")))
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert (await list_topics(port))["fresh"].partitions == 3


async def test_log_append_time_topic_stamps_broker_time() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1, {"message.timestamp.type": "LogAppendTime"})
        client = await Client.connect(port)
        resp = await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"x", timestamp=1000)))
        stamped = resp.responses[0].partition_responses[0].log_append_time_ms
        assert stamped > 1_600_000_000_000
        part = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))).responses[0].partitions[0]
        header = parse_batch_header(bytes(part.records))
        assert (header.timestamp_type, header.max_timestamp) == (1, stamped)


async def test_list_offsets_earliest_latest_timestamp_and_max() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        for ts in (1000, 3000, 2000):
            await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"v", timestamp=ts)))

        async def lookup(ts: int, version: int = 7) -> tuple[int, int, int]:
            req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name="t", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=ts)])])
            p = (await client.request(ApiKey.LIST_OFFSETS, version, req)).topics[0].partitions[0]
            return int(p.error_code), p.offset, p.timestamp

        assert await lookup(-2) == (0, 0, -1)
        assert await lookup(-1) == (0, 3, -1)
        assert await lookup(1500) == (0, 1, 3000)
        assert await lookup(2500) == (0, 1, 3000)
        assert await lookup(9999) == (0, -1, -1)
        assert await lookup(-3) == (0, 1, 3000)


async def test_offset_for_leader_epoch() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"a", b"b")))
        req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic="t", partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=5, leader_epoch=0),
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=3, current_leader_epoch=0, leader_epoch=0),
            ])])
        parts = (await client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, req)).topics[0].partitions
        assert [(p.error_code, p.leader_epoch, p.end_offset) for p in parts] == [
            (0, 0, 2), (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]


async def test_acknowledged_messages_survive_restart(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        await create_topic(port, "keep", 1, {"retention.ms": "-1"})
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("keep", batch(b"1", b"2")))
        topic_id = (await list_topics(port))["keep"].topic_id
    async with running_broker(tmp_path) as (_, _, port):
        assert (await list_topics(port))["keep"].topic_id == topic_id
        assert await topic_overrides(port, "keep") == {"retention.ms": "-1"}
        client = await Client.connect(port)
        part = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("keep", 0))).responses[0].partitions[0]
        assert values(part.records) == [(0, b"1"), (1, b"2")]


async def test_fault_hook_drops_connection_after_append_without_answer() -> None:
    async with running_broker(None, **{"kafkapy.test.fault.drop.after.produce.append": "2"}) as (broker, _, port):
        await create_topic(port, "f", 1)
        client = await Client.connect(port)

        def req(v: bytes) -> ProduceRequest:
            return ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
                name="f", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(v))])])

        assert (await client.request(ApiKey.PRODUCE, 9, req(b"1"))).responses[0].partition_responses[0].base_offset == 0
        await client.send(ApiKey.PRODUCE, 9, req(b"2"))
        assert await client.read_frame(wait_s=5) is None  # closed, no acknowledgement
        plog = broker.partition_log("f", 0)
        assert plog is not None
        assert plog.log_end_offset == 2  # ... but the record was appended
        again = await Client.connect(port)  # the hook fires once
        assert (await again.request(ApiKey.PRODUCE, 9, req(b"3"))).responses[0].partition_responses[0].base_offset == 2


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_fetch_responses_do_not_leak_file_descriptors() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"x" * 10_000)))
        await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))
        before = _open_fds()
        for _ in range(40):
            part = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))).responses[0].partitions[0]
            assert values(part.records) == [(0, b"x" * 10_000)]
        # pipelined and then abandoned: the connection closes the duplicates it still owned
        other = await Client.connect(port)
        for _ in range(10):
            await other.send(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))
        await other.aclose()
        await trio.sleep(0.3)
        assert _open_fds() <= before + 1


async def test_a_small_fetch_answer_carries_its_records_and_no_file_descriptor() -> None:
    """Records the connection would copy rather than sendfile are read by the handler: no fd is
    duplicated for them (and closed again) per request; a large batch still goes by its fd."""
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 2)
        client = await Client.connect(port)
        small, large = batch(b"x" * 100), batch(b"y" * 10_000)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", small))
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", large, partition=1))
        for partition, records, fds in [(0, small, 0), (1, large, 1)]:
            header = RequestHeader(ApiKey.FETCH, FETCH_V, 1, "c")
            ctx = RequestContext(broker.ports, header, ConnectionState("PLAINTEXT", "test"), 0)
            raw = await handle_fetch(ctx, fetch_req("t", 0, partitions=(partition,)))
            try:
                assert len(raw.fds()) == fds
                body = b"".join(read_region(s) if isinstance(s, FileRegion) else bytes(s) for s in raw.segments)
                _, answer = decode_response(ApiKey.FETCH, FETCH_V, struct.pack(">i", 1) + b"\x00" + body)
                assert values(answer.responses[0].partitions[0].records) == values(records)
            finally:
                close_fds(raw.fds())


async def test_produce_v0_to_v2_is_advertised_but_answered_unsupported() -> None:
    """Old librdkafka only compresses when Produce v0 is listed; the request itself is refused."""
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "old", 1)
        client = await Client.connect(port)
        versions = await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert [(k.min_version, k.max_version) for k in versions.api_keys if k.api_key == ApiKey.PRODUCE] == [(0, 11)]
        resp = await client.request(ApiKey.PRODUCE, 2, produce_req("old", batch(b"x")))
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNSUPPORTED_VERSION
        plog = broker.partition_log("old", 0)
        assert plog is not None
        assert plog.log_end_offset == 0


async def test_read_committed_fetch_lists_aborted_transactions() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "tx", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("tx", batch(b"a", b"b")))
        plog = broker.partition_log("tx", 0)
        assert plog is not None
        plog.append_aborted_txn(7, 0, 1, 0)
        committed = fetch_req("tx", 0)
        committed.isolation_level = 1
        part = (await client.request(ApiKey.FETCH, FETCH_V, committed)).responses[0].partitions[0]
        assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(7, 0)]
        uncommitted = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req("tx", 0))).responses[0].partitions[0]
        assert uncommitted.aborted_transactions is None


async def test_failed_acks_zero_produce_closes_the_connection() -> None:
    async with running_broker(None, **{"auto.create.topics.enable": "false"}) as (_, _, port):
        client = await Client.connect(port)
        await client.send(ApiKey.PRODUCE, PRODUCE_V, produce_req("nowhere", batch(b"x"), acks=0))
        assert await client.read_frame(wait_s=5) is None


def _lying_count(records: bytes, count: int) -> bytes:
    """`records` (one batch) with its header's record count and last offset delta raised to
    `count`, the CRC recomputed: framed and checksummed like a good batch."""
    out = bytearray(records)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


async def test_a_batch_whose_records_are_malformed_is_refused_and_not_written() -> None:
    """A header saying 3 records over 1 (CRC right), plain or compressed: CORRUPT_MESSAGE naming
    the missing record (v8+ record_errors), nothing written, the partition still reads."""
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", batch(b"good")))
        for codec in (Compression.NONE, Compression.LZ4, Compression.ZSTD):
            one = build_batch([Record(0, 0, None, b"x" * 40)], base_timestamp=int(time.time() * 1000),
                              compression=codec)  # fmt: skip
            resp = await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("t", _lying_count(one, 3)))
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (ErrorCode.CORRUPT_MESSAGE, -1), codec
            errors = [(e.batch_index, e.batch_index_error_message) for e in part.record_errors]
            assert errors == [(1, "Incorrect declared batch size, premature EOF reached")], codec
            assert part.error_message == errors[0][1]
        assert broker.partition_log("t", 0).log_end_offset == 1  # type: ignore[union-attr]
        fetched = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("t", 0))
        assert values(fetched.responses[0].partitions[0].records) == [(0, b"good")]


def _bomb(records: int) -> bytes:
    """One zstd batch of `records` records of 100 bytes: megabytes of records in kilobytes."""
    region = bytearray()
    for i in range(records):
        body = bytes([0, 0]) + _varint(i << 1) + b"\x01" + _varint(200) + bytes(100) + b"\x00"
        region += _varint(len(body) << 1) + body
    header = build_batch([Record(0, 0, None, b"")], base_timestamp=int(time.time() * 1000))[:61]
    compressed = compress(Compression.ZSTD, bytes(region))
    out = bytearray(header) + compressed
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">h", out, 21, int(Compression.ZSTD))
    struct.pack_into(">i", out, 23, records - 1)
    struct.pack_into(">i", out, 57, records)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


def _varint(zigzagged: int) -> bytes:
    out = bytearray()
    while zigzagged >= 0x80:
        out.append(zigzagged & 0x7F | 0x80)
        zigzagged >>= 7
    out.append(zigzagged)
    return bytes(out)


async def test_other_clients_are_served_while_a_compression_bomb_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compressed batch inflating to megabytes of small records takes seconds to walk in
    Python; the produce that carries it must not freeze the broker for every other client. The
    walk is held to at least `walk_s` of CPU with the GIL taken (as the Python walker takes it),
    so the bound does not depend on how fast the walker of the day is."""
    walk_s = 1.2
    walk = validator.walk_records

    def slow_walk(*args: Any, **kwargs: Any) -> int:
        started = time.perf_counter()
        largest = walk(*args, **kwargs)
        while time.perf_counter() - started < walk_s:
            pass
        return largest

    monkeypatch.setattr(validator, "walk_records", slow_walk)
    records = 50_000
    bomb = _bomb(records)
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "bomb", 1)
        producer, other = await Client.connect(port), await Client.connect(port)
        latencies: list[float] = []
        produced = trio.Event()

        async def ping() -> None:
            metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False)
            while not produced.is_set():
                started = time.perf_counter()
                await other.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
                await other.request(ApiKey.METADATA, 12, metadata)
                latencies.append((time.perf_counter() - started) / 2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ping)
            await trio.sleep(0.05)
            started = time.perf_counter()
            resp = await producer.request(ApiKey.PRODUCE, PRODUCE_V, produce_req("bomb", bomb))
            took = time.perf_counter() - started
            produced.set()
        part = resp.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)
        assert took >= walk_s
        assert max(latencies) < walk_s / 4, sorted(latencies)[-5:]
        assert len(latencies) >= 10, latencies
        fetched = await other.request(ApiKey.FETCH, FETCH_V, fetch_req("bomb", 0))
        assert fetched.responses[0].partitions[0].high_watermark == records
