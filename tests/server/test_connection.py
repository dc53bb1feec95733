"""Connection behaviour over real sockets: ordering, framing limits, hostile input, shutdown."""

from __future__ import annotations

import dataclasses
import logging
import socket
import struct
from pathlib import Path

import pytest
import trio
import trio.testing

from kafkapy.broker.handlers import BROKER_HANDLERS
from kafkapy.broker.handlers.registry import REGISTRY, lookup
from kafkapy.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    RequestHeader,
    decode_response,
    encode_request,
)
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkapy.server.connection import Connection

from .helpers import Client, batch, create_topic, running_broker, wait_until


async def test_api_versions_lists_registered_handlers_within_codec_ranges() -> None:
    async with running_broker(None) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        assert resp.error_code == ErrorCode.NONE
        listed = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        assert set(listed) == {int(k) for k in BROKER_HANDLERS}
        for key, (lo, hi) in listed.items():
            codec_lo, codec_hi = SUPPORTED_VERSIONS[ApiKey(key)]
            assert codec_lo <= lo <= hi <= codec_hi
        assert listed[ApiKey.API_VERSIONS] == (0, 4)
        await client.aclose()


async def test_unsupported_api_versions_version_gets_v0_error_with_our_versions() -> None:
    async with running_broker(None) as (_, _, port):
        client = await Client.connect(port)
        # ApiVersions v99: a flexible header (tagged fields) and a body we cannot know the layout of
        frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 7, 4) + b"test" + b"\x00" + b"\x01\x02\x03"
        await client.send_raw(struct.pack(">i", len(frame)) + frame)
        raw = await client.read_frame()
        assert raw is not None
        corr, resp = decode_response(ApiKey.API_VERSIONS, 0, raw)
        assert corr == 7
        assert isinstance(resp, ApiVersionsResponse)
        assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert any(k.api_key == ApiKey.PRODUCE for k in resp.api_keys)
        # the connection stays usable: the client downgrades
        ok = await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert ok.error_code == ErrorCode.NONE
        await client.aclose()


async def test_pipelined_responses_come_back_in_request_order() -> None:
    """A long-poll fetch first, then quick requests: answers still arrive in request order, and
    the quick ones are not held up by the fetch's wait (it releases its turn)."""
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        fetch = FetchRequest(
            max_wait_ms=3000, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )
        await client.send(ApiKey.FETCH, 11, fetch)
        produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"x"))])])
        await client.send(ApiKey.PRODUCE, 9, produce)
        for _ in range(20):
            await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        start = trio.current_time()
        _, fetched = await client.receive()
        # woken by the produce behind it on the same connection, long before max_wait
        assert trio.current_time() - start < 2.5
        assert fetched.responses[0].partitions[0].records
        _, produced = await client.receive()
        assert produced.responses[0].partition_responses[0].base_offset == 0
        for _ in range(20):
            _, md = await client.receive()
            assert "t" in [t.name for t in md.topics]
        await client.aclose()


async def test_produces_on_one_connection_append_in_request_order() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "order", 1)
        client = await Client.connect(port)
        for i in range(30):
            req = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
                name="order", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"%d" % i))])])
            await client.send(ApiKey.PRODUCE, 9, req)
        offsets = [(await client.receive())[1].responses[0].partition_responses[0].base_offset for _ in range(30)]
        assert offsets == list(range(30))
        await client.aclose()


async def _assert_closed(client: Client) -> None:
    assert await client.read_frame(wait_s=5) is None


async def test_oversized_length_prefix_closes_before_reading_the_body() -> None:
    async with running_broker(None, **{"socket.request.max.bytes": "1000"}) as (_, _, port):
        client = await Client.connect(port)
        await client.send_raw(struct.pack(">i", 1001))  # no body follows: must not wait for it
        await _assert_closed(client)
        big = await Client.connect(port)
        await big.send_raw(struct.pack(">i", 2**31 - 1))
        await _assert_closed(big)
        # the broker is fine for others
        other = await Client.connect(port)
        assert (await other.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0


async def test_hostile_input_closes_only_that_connection() -> None:
    async with running_broker(None) as (_, _, port):
        garbage = await Client.connect(port)
        await garbage.send_raw(struct.pack(">i", 12) + b"\xff" * 12)
        await _assert_closed(garbage)
        negative = await Client.connect(port)
        await negative.send_raw(struct.pack(">i", -5))
        await _assert_closed(negative)
        unknown = await Client.connect(port)
        frame = struct.pack(">hhih", 9999, 0, 1, -1)
        await unknown.send_raw(struct.pack(">i", len(frame)) + frame)
        await _assert_closed(unknown)
        unsupported = await Client.connect(port)
        frame = struct.pack(">hhih", ApiKey.PRODUCE, 99, 1, -1)
        await unsupported.send_raw(struct.pack(">i", len(frame)) + frame)
        await _assert_closed(unsupported)
        below_handler = await Client.connect(port)  # codec speaks Fetch v3, our handler not
        await below_handler.send(ApiKey.FETCH, 3, FetchRequest())
        await _assert_closed(below_handler)
        ok = await Client.connect(port)
        assert (await ok.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0


async def test_responses_before_a_bad_request_are_still_sent() -> None:
    async with running_broker(None) as (_, _, port):
        client = await Client.connect(port)
        await client.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        await client.send_raw(struct.pack(">i", 6) + b"\x00" * 6)
        _, resp = await client.receive()
        assert resp.error_code == 0
        await _assert_closed(client)


async def test_idle_connections_are_reaped() -> None:
    # long enough that a loaded machine still gets the first request in before the reaper
    async with running_broker(None, **{"connections.max.idle.ms": "1500"}) as (_, _, port):
        client = await Client.connect(port)
        assert (await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
        await _assert_closed(client)


async def test_shutdown_is_prompt_with_idle_connections_open(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, server, port):
        clients = [await Client.connect(port) for _ in range(5)]
        assert (await clients[0].request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
        server.request_shutdown()
        with trio.fail_after(3):
            await server.stopped.wait()
        for c in clients:
            await _assert_closed(c)
    assert (tmp_path / ".kafka_cleanshutdown").exists()


async def test_shutdown_answers_a_waiting_long_poll_fetch() -> None:
    async with running_broker(None) as (_, server, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        fetch = FetchRequest(
            max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )
        await client.send(ApiKey.FETCH, 11, fetch)
        await trio.sleep(0.1)
        server.request_shutdown()
        _, resp = await client.receive(wait_s=3)
        assert resp.responses[0].partitions[0].error_code == 0


async def test_unsupported_api_versions_with_a_non_flexible_header_is_answered() -> None:
    async with running_broker(None) as (_, _, port):
        client = await Client.connect(port)
        frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 12, 4) + b"test"
        await client.send_raw(struct.pack(">i", len(frame)) + frame)
        raw = await client.read_frame()
        assert raw is not None
        corr, resp = decode_response(ApiKey.API_VERSIONS, 0, raw)
        assert (corr, resp.error_code) == (12, ErrorCode.UNSUPPORTED_VERSION)


async def test_peer_reset_mid_request_is_quiet(caplog: pytest.LogCaptureFixture) -> None:
    async with running_broker(None) as (_, _, port):
        sock = trio.socket.socket()
        await sock.connect(("127.0.0.1", port))
        await sock.send(struct.pack(">i", 40) + b"\x00\x03")
        await trio.sleep(0.1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST, not FIN
        await trio.sleep(0.2)
        ok = await Client.connect(port)
        assert (await ok.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_handler_exception_answers_unknown_server_error_and_keeps_serving(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "t", 1)

        async def explode(*_: object) -> None:
            raise RuntimeError("boom")

        for api in (ApiKey.PRODUCE, ApiKey.DESCRIBE_CLUSTER):
            served = lookup(api)
            assert served is not None
            monkeypatch.setitem(REGISTRY, api, dataclasses.replace(served, func=explode))
        client = await Client.connect(port)
        produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"x"))])])
        resp = await client.request(ApiKey.PRODUCE, 9, produce)
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        cluster = await client.request(ApiKey.DESCRIBE_CLUSTER, 1, DescribeClusterRequest())
        assert cluster.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
        assert (await client.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())).error_code == 0
    assert "boom" in caplog.text
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)


async def test_queued_max_request_bytes_mutes_reading_until_a_request_is_answered() -> None:
    """A bound of 1 byte: every request is larger, so each is admitted alone; the next client's
    request is not read until the long-poll fetch holding the memory is answered."""
    async with running_broker(None, **{"queued.max.request.bytes": "1"}) as (_, server, port):
        await create_topic(port, "t", 1)
        poller, other = await Client.connect(port), await Client.connect(port)
        fetch = FetchRequest(
            max_wait_ms=1500, min_bytes=1, max_bytes=1 << 20, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )
        await poller.send(ApiKey.FETCH, 11, fetch)
        await trio.sleep(0.2)  # the fetch is read and waiting for data
        sent = trio.current_time()
        await other.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        _, versions = await other.receive(wait_s=10)
        waited = trio.current_time() - sent
        _, fetched = await poller.receive(wait_s=1)  # answered first
        assert versions.error_code == 0
        assert fetched.responses[0].partitions[0].error_code == 0
        assert waited >= 1.0
        # nothing stays counted: answered requests, and a half-sent frame whose peer left
        half = await Client.connect(port)
        await half.send_raw(struct.pack(">i", 500) + b"x" * 10)
        await wait_until(lambda: server.request_memory.queued == 500, "the half frame admitted")
        await half.aclose()
        await wait_until(lambda: server.request_memory.queued == 0, "request memory released")


async def test_pipelined_answers_ready_together_leave_in_one_send() -> None:
    """Requests read together whose answers are ready together are answered with one send, in
    request order (a client pipelining small requests pays one write, not one per request)."""
    async with running_broker(None) as (broker, _, _):
        client, server = trio.testing.memory_stream_pair()
        sends: list[int] = []
        pump = server.send_stream.send_all_hook
        assert pump is not None

        async def counted() -> None:
            sends.append(1)
            await pump()

        server.send_stream.send_all_hook = counted
        conn = Connection(broker, server, "PLAINTEXT", "test:1")
        frames = b""
        for correlation_id in range(5):
            frame = encode_request(RequestHeader(ApiKey.API_VERSIONS, 3, correlation_id, "c"), ApiVersionsRequest())
            frames += struct.pack(">i", len(frame)) + frame
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn.run)
            await client.send_all(frames)
            received = b""
            with trio.fail_after(10):
                while len(_frames(received)) < 5:
                    received += await client.receive_some()
            await client.aclose()
        assert [decode_response(ApiKey.API_VERSIONS, 3, f)[0] for f in _frames(received)] == [0, 1, 2, 3, 4]
        assert len(sends) == 1


def _frames(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(data) and pos + 4 + struct.unpack_from(">i", data, pos)[0] <= len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        out.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return out
