"""PeerClient / PeerPool against a real in-process broker on 127.0.0.1 (no mocked peer).

What the cluster relies on: many tasks share one connection and each gets its own answer
(pipelining); a request that is not answered in time fails with PeerError instead of hanging; a
restarted peer is reached again without a new client; every failure is a PeerError.
"""

from __future__ import annotations

import contextlib
import functools
import socket
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkapy.server.cluster.peer import PeerClient, PeerError, PeerPool
from tests.server.helpers import batch, create_topic, running_broker

pytestmark = pytest.mark.timeout(60)


def _metadata(topic: str) -> MetadataRequest:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=True
    )


async def test_pipelined_requests_each_get_their_own_answer() -> None:
    async with running_broker(None) as (_broker, _server, port):
        client = PeerClient("127.0.0.1", port, client_id="peer-test")
        names = [f"pipe-{i}" for i in range(20)]
        answers: dict[str, str] = {}

        async def ask(name: str) -> None:
            response = await client.request(ApiKey.METADATA, 9, _metadata(name), timeout_s=10)
            answers[name] = response.topics[0].name

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(ask, name)
        assert answers == {name: name for name in names}
        versions = await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)
        assert versions.error_code == ErrorCode.NONE
        assert client.connected
        await client.aclose()


async def test_unanswered_request_times_out_and_the_next_one_works() -> None:
    async with running_broker(None) as (_, _server, port):
        await create_topic(port, "quiet", 1)
        client = PeerClient("127.0.0.1", port, client_id="peer-test")
        # a long poll on an empty partition: the broker holds it back for max_wait_ms
        fetch = FetchRequest(
            replica_id=-1, max_wait_ms=5000, min_bytes=1, max_bytes=1 << 20,
            topics=[FetchRequest.FetchTopic(topic="quiet", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )
        started = trio.current_time()
        with pytest.raises(PeerError, match="timed out"):
            await client.request(ApiKey.FETCH, 11, fetch, timeout_s=0.3)
        assert trio.current_time() - started < 3
        response = await client.request(ApiKey.METADATA, 9, _metadata("quiet"), timeout_s=10)
        assert response.topics[0].error_code == ErrorCode.NONE
        await client.aclose()


async def test_a_timeout_fails_the_requests_in_flight_with_it() -> None:
    """Contract (docs/cluster.md): a timed-out request closes its connection, so another long
    poll in flight on it fails at once instead of hanging; the next request reconnects."""
    async with running_broker(None) as (_, _server, port):
        await create_topic(port, "quiet2", 1)
        client = PeerClient("127.0.0.1", port, client_id="peer-test")

        def fetch(wait_ms: int) -> FetchRequest:
            return FetchRequest(
                replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, max_bytes=1 << 20,
                topics=[FetchRequest.FetchTopic(topic="quiet2", partitions=[
                    FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
            )

        outcome: list[str] = []

        async def patient() -> None:
            try:
                await client.request(ApiKey.FETCH, 11, fetch(8000), timeout_s=20)
                outcome.append("answered")
            except PeerError:
                outcome.append(f"failed at {trio.current_time() - started:.1f}")

        started = trio.current_time()
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(patient)
                await trio.sleep(0.1)
                with pytest.raises(PeerError, match="timed out"):
                    await client.request(ApiKey.FETCH, 11, fetch(8000), timeout_s=0.3)
        assert len(outcome) == 1
        assert outcome[0].startswith("failed"), outcome
        assert float(outcome[0].split()[-1]) < 3
        assert (await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)).error_code == 0
        await client.aclose()


async def test_long_poll_is_answered_when_data_arrives_while_others_pipeline() -> None:
    async with running_broker(None) as (_, _server, port):
        await create_topic(port, "poll", 1)
        client = PeerClient("127.0.0.1", port, client_id="peer-test")
        fetch = FetchRequest(
            replica_id=-1, max_wait_ms=8000, min_bytes=1, max_bytes=1 << 20,
            topics=[FetchRequest.FetchTopic(topic="poll", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
        )
        produce = ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="poll", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch(b"v"))])])
        got: list[int] = []

        async def poll() -> None:
            response = await client.request(ApiKey.FETCH, 11, fetch, timeout_s=15)
            got.append(response.responses[0].partitions[0].high_watermark)

        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(poll)
                await trio.sleep(0.2)
                # the fetch waits on the broker; a request behind it on the same client still
                # goes out (the broker answers it after the fetch, in request order)
                answer = await client.request(ApiKey.PRODUCE, 8, produce, timeout_s=10)
                assert answer.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert got == [1]
        await client.aclose()


async def test_reconnects_after_the_peer_restarts(tmp_path: Path) -> None:
    async with running_broker(tmp_path / "a") as (_broker, _server, port):
        client = PeerClient("127.0.0.1", port, client_id="peer-test")
        assert (await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)).error_code == 0
    # the peer is gone: the connection is found closed, then connecting is refused
    for _ in range(2):
        with pytest.raises(PeerError):
            await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=5)
    async with running_broker(tmp_path / "a", listeners=f"PLAINTEXT://127.0.0.1:{port}"):
        response = await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)
        assert response.error_code == ErrorCode.NONE
        assert client.connected
    await client.aclose()


async def test_errors_are_peer_errors() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    client = PeerClient("127.0.0.1", free_port, client_id="peer-test")
    with pytest.raises(PeerError, match="cannot connect"):
        await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=5)
    async with running_broker(None) as (_broker, _server, port):
        client = PeerClient("127.0.0.1", port, client_id="peer-test")
        # the broker listener has no Vote handler: it closes the connection
        from kafkapy.protocol.messages import VoteRequest

        with pytest.raises(PeerError, match="closed"):
            await client.request(ApiKey.VOTE, 0, VoteRequest(), timeout_s=10)
        # a version the codec cannot encode never reaches the wire
        with pytest.raises(PeerError, match="cannot encode"):
            await client.request(ApiKey.API_VERSIONS, 99, ApiVersionsRequest(), timeout_s=10)
        assert (await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)).error_code == 0
        await client.aclose()


async def test_pool_follows_address_changes() -> None:
    async with running_broker(None) as (_b1, _s1, port1), running_broker(None) as (_b2, _s2, port2):
        addresses: dict[int, tuple[str, int]] = {1: ("127.0.0.1", port1)}
        pool = PeerPool(addresses.get, client_id="pool-test")
        with pytest.raises(PeerError, match="no known address"):
            pool.get(7)
        first = pool.get(1)
        assert pool.get(1) is first
        assert (await pool.request(1, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)).error_code == 0
        addresses[1] = ("127.0.0.1", port2)
        second = pool.get(1)
        assert second is not first
        assert second.address == ("127.0.0.1", port2)
        assert (await pool.request(1, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=10)).error_code == 0
        assert not first.connected  # the replaced client was closed
        await pool.aclose()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answer=st.one_of(
    st.binary(max_size=64),
    st.binary(max_size=48).map(lambda b: (len(b) + 4).to_bytes(4, "big") + (1).to_bytes(4, "big") + b),
    st.integers(-(2**31), 2**31 - 1).map(lambda n: n.to_bytes(4, "big", signed=True)),
))
async def test_a_hostile_peer_only_ever_causes_peer_error(answer: bytes) -> None:
    """Whatever bytes come back (garbage, a bad size, a truncated or undecodable body with the
    right correlation id), the caller gets an answer or PeerError - never another exception."""

    async def serve(stream: trio.SocketStream) -> None:
        with trio.move_on_after(5):
            await stream.receive_some(65536)
            await stream.send_all(answer)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        client = PeerClient("127.0.0.1", port, client_id="peer-test")
        with trio.fail_after(10):
            with contextlib.suppress(PeerError):
                await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=5)
        await client.aclose()
        nursery.cancel_scope.cancel()


async def test_a_dead_peer_is_reported_gone_and_a_slow_one_is_not() -> None:
    """`PeerError.gone` / `PeerPool.on_gone` (what the controller's early fencing starts from):
    a refused connect and a connection the peer closes are signs of a dead process; a request
    that merely times out (a slow or paused peer) is not. Only the refused connect is
    `refused` (what lets Raft followers replace their leader before the fetch timeout)."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    reported: list[int] = []
    pool = PeerPool({1: ("127.0.0.1", free_port)}.get, client_id="gone-test")
    pool.on_gone = reported.append
    with pytest.raises(PeerError) as refused:
        await pool.request(1, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=5)
    assert refused.value.gone
    assert refused.value.refused
    assert reported == [1]
    await pool.aclose()

    with socket.socket() as silent:  # accepts (the kernel's backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        pool = PeerPool({2: silent.getsockname()}.get, client_id="gone-test")
        pool.on_gone = reported.append
        with pytest.raises(PeerError, match="timed out") as slow:
            await pool.request(2, ApiKey.API_VERSIONS, 3, ApiVersionsRequest(), timeout_s=0.3)
        assert not slow.value.gone
        assert not slow.value.refused
        assert reported == [1]
        await pool.aclose()

    async with running_broker(None) as (_broker, _server, port):
        pool = PeerPool({3: ("127.0.0.1", port)}.get, client_id="gone-test")
        pool.on_gone = reported.append
        from kafkapy.protocol.messages import VoteRequest

        with pytest.raises(PeerError, match="closed") as closed:  # no Vote on a broker listener
            await pool.request(3, ApiKey.VOTE, 0, VoteRequest(), timeout_s=10)
        assert closed.value.gone
        assert not closed.value.refused
        assert reported == [1, 3]
        await pool.aclose()
