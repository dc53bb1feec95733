"""Fetch and ListOffsets below the local log start of a tiered topic, through real sockets.

The remote tier is real: segments a broker's `PartitionLog` rolled are copied by the storage
copier into a real S3 server (SeaweedFS; KAFKAPY_TEST_S3=moto for moto_server), the metadata
records are replayed into the broker's metadata store, and the local log start is moved past
the copied segments, as local retention does. Then clients fetch from offset 0.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.broker.remote_fetch import (
    REMOTE_STORAGE_ENABLE,
    RemoteTier,
    epoch_for_offset,
    parse_leader_epoch_checkpoint,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.messages import FetchRequest, ListOffsetsRequest
from kafkapy.protocol.records import build_control_batch, iter_batches
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker
from kafkapy.server.http.metrics import BrokerCollector
from kafkapy.storage import PartitionLog
from kafkapy.storage.remote.copier import leader_epoch_checkpoint_bytes
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3Config, S3ObjectStore
from kafkapy.testing.cluster import free_ports
from kafkapy.testing.object_store import S3Server
from kafkapy.testing.remote_tier import copy_rolled_segments
from tests.server.helpers import Client, create_topic, running_broker, wait_until
from tests.storage.helpers import BASE_TS, batch

TOPIC = "tiered"
PRODUCER = 7
FETCH_V = 12
LIST_OFFSETS_V = 9


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    kind = os.environ.get("KAFKAPY_TEST_S3", "seaweedfs")
    with S3Server(kind) as server:  # type: ignore[arg-type]
        yield server


def _write(plog: PartitionLog) -> None:
    """60 batches over several rolled segments, an aborted transaction in the first."""
    for i in range(60):
        if i == 5:
            first = plog.log_end_offset
            txn = batch([b"aborted-1", b"aborted-2"], producer_id=PRODUCER, producer_epoch=0,
                        transactional=True, ts=BASE_TS + i)
            plog.append(txn, now_ms=BASE_TS, leader_epoch=0)
            marker = build_control_batch(False, producer_id=PRODUCER, producer_epoch=0,
                                         coordinator_epoch=0, timestamp_ms=BASE_TS + i)
            last = plog.append(marker, now_ms=BASE_TS, from_client=False, leader_epoch=0).base_offset
            plog.append_aborted_txn(PRODUCER, first, last, last + 1)
        values = [f"v{i}-{j}".encode() * (1 + (i * 7 + j) % 40) for j in range(1 + i % 5)]
        plog.append(batch(values, ts=BASE_TS + 10 * i), now_ms=BASE_TS, leader_epoch=0)
        if i % 12 == 11:
            plog.roll(BASE_TS)
    plog.high_watermark = plog.log_end_offset
    plog.flush()


def _all_bytes(plog: PartitionLog) -> bytes:
    """Every batch of the log (a local read stops at its segment's end)."""
    out, offset = b"", 0
    while offset < plog.log_end_offset:
        data = plog.read_bytes(offset, 1 << 30)
        out += data
        offset = _next_offset(data)
    return out


class Tiered:
    """A running broker whose topic's partitions each have a remote tier (module docstring)."""

    def __init__(self, broker: Broker, server: Server, port: int) -> None:
        self.broker = broker
        self.server = server
        self.port = port
        self.expected: dict[int, bytes] = {}
        self.local_start: dict[int, int] = {}
        self.last_copied: dict[int, int] = {}
        self.remote_bytes: dict[int, int] = {}


@asynccontextmanager
async def tiered(tmp_path: Path, s3_server: S3Server, partitions: int = 1, *, tier_partitions: int | None = None,
                 store: S3ObjectStore | None = None, fetch_max_wait_ms: int = 30_000) -> AsyncIterator[Tiered]:
    """A broker with `partitions` partitions written by `_write`; the first `tier_partitions`
    (default all) copied to the remote tier and their local log start moved to the last copied
    segment's base (that segment is in both tiers, as local retention leaves it)."""
    async with running_broker(tmp_path) as (broker, server, port):
        await create_topic(port, TOPIC, partitions)
        info = broker.topics.get(TOPIC)
        assert info is not None
        info.configs[REMOTE_STORAGE_ENABLE] = "true"
        real = S3ObjectStore(s3_server.config(key_prefix=f"b-{uuid.uuid4().hex[:12]}"))
        metadata = RemoteLogMetadataStore()
        state = Tiered(broker, server, port)
        for p in range(partitions):
            plog = broker.logs.get(TOPIC, p)
            assert plog is not None
            _write(plog)
            state.expected[p] = _all_bytes(plog)
            state.local_start[p] = 0
            if p >= (tier_partitions if tier_partitions is not None else partitions):
                continue
            copied = copy_rolled_segments(plog, TOPIC, p, real, metadata, now_ms=BASE_TS)
            assert len(copied) >= 3
            state.local_start[p] = plog.delete_records_before(copied[-1].start_offset)
            state.last_copied[p] = copied[-1].end_offset
            state.remote_bytes[p] = sum(s.segment_size_in_bytes for s in copied[:-1])  # only remote
        broker.remote_tier = RemoteTier(metadata, RemoteLogReader(store or real, chunk_bytes=4096, cache_bytes=64 << 10),
                                        fetch_max_wait_ms=fetch_max_wait_ms)
        yield state


def _topic_metrics(server: Server) -> dict[str, float]:
    """The broker's per-topic counters for TOPIC, as /metrics exposes them."""
    return {s.name: s.value for family in BrokerCollector(server).collect() for s in family.samples
            if s.labels.get("topic") == TOPIC}


def fetch_req(offsets: dict[int, int], *, read_committed: bool = False, replica_id: int = -1,
              max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(
        replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes, session_epoch=-1,
        isolation_level=1 if read_committed else 0,
        topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
            FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=3000)
            for p, o in offsets.items()])])


def _next_offset(data: bytes) -> int:
    return max(h.base_offset + h.last_offset_delta for _, h in iter_batches(data)) + 1


async def _consume(client: Client, hw: int, *, read_committed: bool = False) -> tuple[bytes, set[tuple[int, int]]]:
    """Fetch partition 0 from offset 0 to `hw`: the bytes and the aborted transactions."""
    got, aborted, offset = b"", set(), 0
    while offset < hw:
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: offset}, read_committed=read_committed))
        part = resp.responses[0].partitions[0]
        assert part.error_code == ErrorCode.NONE, (offset, ErrorCode(part.error_code).name)
        assert part.log_start_offset == 0  # the remote tier's, not the local log's
        data = bytes(part.records or b"")
        assert data, offset
        got += data
        aborted |= {(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()}
        offset = _next_offset(data)
    return got, aborted


@pytest.mark.slow
async def test_a_consumer_reads_both_tiers_from_offset_0_byte_exact(tmp_path: Path, s3_server: S3Server) -> None:
    async with tiered(tmp_path, s3_server) as t:
        assert t.local_start[0] > 0
        client = await Client.connect(t.port)
        plog = t.broker.logs.get(TOPIC, 0)
        assert plog is not None
        got, _ = await _consume(client, plog.high_watermark)
        assert got == t.expected[0]
        metrics = _topic_metrics(t.server)
        assert metrics["kafka_server_brokertopicmetrics_remotefetchrequests_total"] > 0
        assert metrics["kafka_server_brokertopicmetrics_remotefetchbytes_total"] == t.remote_bytes[0]
        assert metrics.get("kafka_server_brokertopicmetrics_remotefetcherrors_total", 0) == 0


@pytest.mark.slow
async def test_read_committed_gets_the_aborted_transaction_from_the_copied_index(
        tmp_path: Path, s3_server: S3Server) -> None:
    async with tiered(tmp_path, s3_server) as t:
        client = await Client.connect(t.port)
        plog = t.broker.logs.get(TOPIC, 0)
        assert plog is not None
        got, aborted = await _consume(client, plog.high_watermark, read_committed=True)
        assert got == t.expected[0]
        first_aborted = next(h.base_offset for _, h in iter_batches(t.expected[0]) if h.producer_id == PRODUCER)
        assert aborted == {(PRODUCER, first_aborted)}
        assert first_aborted < t.local_start[0]  # it was served from the remote tier


@pytest.mark.slow
async def test_one_remote_partition_per_fetch_the_others_answer_empty(tmp_path: Path, s3_server: S3Server) -> None:
    async with tiered(tmp_path, s3_server, partitions=3, tier_partitions=2) as t:
        client = await Client.connect(t.port)
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: 0, 1: 0, 2: 0}))
        parts = {p.partition_index: p for p in resp.responses[0].partitions}
        assert [parts[p].error_code for p in range(3)] == [0, 0, 0]
        with_data = [p for p in range(3) if parts[p].records]
        assert with_data == [0, 2]  # partition 1 waits for a later fetch; 2 is local
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req({1: 0}))
        part = resp.responses[0].partitions[0]
        assert part.error_code == 0
        assert bytes(part.records or b"") == t.expected[1][:len(part.records or b"")]


@pytest.mark.slow
async def test_a_store_that_is_down_answers_unknown_server_error_and_local_reads_go_on(
        tmp_path: Path, s3_server: S3Server) -> None:
    (dead_port,) = free_ports(1)
    dead = S3ObjectStore(S3Config(bucket=s3_server.bucket, endpoint_url=f"http://127.0.0.1:{dead_port}",
                                  path_style=True, credentials_file=s3_server.credentials_file,
                                  connect_timeout_s=1, read_timeout_s=1, max_attempts=1))
    async with tiered(tmp_path, s3_server, partitions=2, tier_partitions=1, store=dead) as t:
        client = await Client.connect(t.port)
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: 0, 1: 0}))
        parts = {p.partition_index: p for p in resp.responses[0].partitions}
        assert parts[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert not parts[0].records
        assert parts[1].error_code == 0
        assert bytes(parts[1].records or b"") == t.expected[1][:len(parts[1].records or b"")]
        assert _topic_metrics(t.server)["kafka_server_brokertopicmetrics_remotefetcherrors_total"] == 1
        # a local offset of the tiered partition is still served
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: t.local_start[0]}))
        assert resp.responses[0].partitions[0].records


@pytest.mark.slow
async def test_a_remote_read_past_remote_fetch_max_wait_answers_empty_and_never_blocks_the_broker(
        tmp_path: Path, s3_server: S3Server) -> None:
    """A store that accepts and never answers: the partition answers empty once
    `remote.fetch.max.wait.ms` passes (Kafka's DelayedRemoteFetch expiring), without waiting for
    the store's own timeout; meanwhile other clients are served (the GET is on a worker thread)."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")

        async def hold(stream: trio.SocketStream) -> None:
            await trio.sleep_forever()

        nursery.start_soon(trio.serve_listeners, hold, listeners)
        port = listeners[0].socket.getsockname()[1]
        silent = S3ObjectStore(S3Config(bucket=s3_server.bucket, endpoint_url=f"http://127.0.0.1:{port}",
                                        path_style=True, credentials_file=s3_server.credentials_file,
                                        read_timeout_s=60, max_attempts=1))
        async with tiered(tmp_path, s3_server, store=silent, fetch_max_wait_ms=5000) as t:
            remote_client, local_client = await Client.connect(t.port), await Client.connect(t.port)
            answered: list[str] = []
            remote_part: list[Any] = []

            async def remote_fetch() -> None:
                resp = await remote_client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: 0}))
                remote_part.append(resp.responses[0].partitions[0])
                answered.append("remote")

            async with trio.open_nursery() as fetches:
                fetches.start_soon(remote_fetch)
                await wait_until(lambda: t.broker.stats.remote_fetch_requests[TOPIC] == 1, "the remote read")
                resp = await local_client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: t.local_start[0]}))
                assert resp.responses[0].partitions[0].records
                answered.append("local")
            assert answered == ["local", "remote"]
            assert (remote_part[0].error_code, remote_part[0].records or b"") == (0, b"")
        nursery.cancel_scope.cancel()


async def _list_offsets(client: Client, timestamp: int, version: int = LIST_OFFSETS_V) -> tuple[int, int, int, int]:
    req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=TOPIC, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    part = (await client.request(ApiKey.LIST_OFFSETS, version, req)).topics[0].partitions[0]
    return part.error_code, part.offset, part.timestamp, part.leader_epoch


@pytest.mark.slow
async def test_list_offsets_answers_over_both_tiers(tmp_path: Path, s3_server: S3Server) -> None:
    async with tiered(tmp_path, s3_server) as t:
        client = await Client.connect(t.port)
        assert await _list_offsets(client, -2) == (0, 0, -1, 0)
        assert await _list_offsets(client, -4) == (0, t.local_start[0], -1, 0)
        assert await _list_offsets(client, -5) == (0, t.last_copied[0], -1, 0)
        # batch i has its records at BASE_TS + 10 i (+ j): batch 3 is remote
        expected = next(h.base_offset for _, h in iter_batches(t.expected[0]) if h.base_timestamp == BASE_TS + 30)
        assert expected < t.local_start[0]
        assert await _list_offsets(client, BASE_TS + 29) == (0, expected, BASE_TS + 30, 0)
        # a timestamp only the local tier reaches
        last = [h for _, h in iter_batches(t.expected[0])][-1]
        assert (await _list_offsets(client, last.base_timestamp))[1] == last.base_offset
        assert (await _list_offsets(client, BASE_TS + 10_000))[:2] == (0, -1)


async def test_a_topic_that_is_not_tiered_keeps_its_answers(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        await create_topic(port, TOPIC, 1)
        broker.remote_tier = RemoteTier(RemoteLogMetadataStore(), RemoteLogReader(None))  # type: ignore[arg-type]
        plog = broker.logs.get(TOPIC, 0)
        assert plog is not None
        _write(plog)
        start = plog.delete_records_before(plog.segments[1].base_offset)
        client = await Client.connect(port)
        resp = await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: 0}))
        part = resp.responses[0].partitions[0]
        assert (part.error_code, part.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, start)
        assert await _list_offsets(client, -2) == (0, start, -1, 0)
        assert await _list_offsets(client, -4) == (0, start, -1, 0)
        assert await _list_offsets(client, -5) == (0, -1, -1, -1)


# -- the pure pieces: bytes parsed from the store, epochs looked up ---------------------------------

epoch_entries = st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**62)), max_size=20).map(
    lambda es: sorted({e: o for e, o in es}.items()))


@given(epoch_entries, st.integers(0, 2**62))
def test_a_copied_leader_epoch_checkpoint_parses_back(entries: list[tuple[int, int]], end: int) -> None:
    data = leader_epoch_checkpoint_bytes(entries, end)
    assert parse_leader_epoch_checkpoint(data) == [(e, o) for e, o in entries if o <= end]


@given(st.binary(max_size=200))
def test_a_checkpoint_object_that_is_not_one_raises_protocol_error_only(data: bytes) -> None:
    try:
        entries = parse_leader_epoch_checkpoint(data)
    except ProtocolError:
        return
    assert all(isinstance(e, int) and isinstance(o, int) for e, o in entries)


@given(st.lists(st.tuples(st.integers(0, 100), st.integers(0, 1000)), max_size=10, unique_by=lambda t: t[1])
       .map(lambda es: sorted(es, key=lambda t: t[1])), st.integers(-1, 1100))
def test_the_epoch_of_an_offset_is_the_last_entry_starting_at_or_before_it(
        entries: list[tuple[int, int]], offset: int) -> None:
    expected = [e for e, o in entries if o <= offset]
    assert epoch_for_offset(entries, offset) == (expected[-1] if expected else -1)
