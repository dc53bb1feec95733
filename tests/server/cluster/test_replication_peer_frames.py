"""Replica fetch answers through `PeerClient`: large and small response frames arrive whole.

Why: a follower's Fetch answer is megabytes of record batches, received straight into a buffer
of its own (`peer._ResponseFrames`) while small answers are cut from a shared buffer; whatever
way TCP splits the stream, every caller must get exactly its own response with its record bytes
intact, and the records must be usable as the log's input (they are appended as they are).

A real broker for the end-to-end case; a raw 127.0.0.1 server (our own bytes, split where the
test says) for the chunking property.
"""

from __future__ import annotations

import functools
import struct
import uuid

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, decode_request, decode_request_header, encode_response
from kafkapy.protocol.messages import FetchRequest, FetchResponse, MetadataRequest, ProduceRequest
from kafkapy.protocol.records import iter_batches
from kafkapy.server.cluster.peer import OWN_BUFFER_BYTES, PeerClient
from tests.server.helpers import batch, create_topic, running_broker

pytestmark = pytest.mark.timeout(60)

FETCH_V = 15
TOPIC_ID = uuid.UUID(int=7)


def _fetch_response(size: int, tag: int) -> FetchResponse:
    records = bytes([tag % 256]) * size
    return FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=TOPIC_ID,
                partitions=[FetchResponse.PartitionData(partition_index=tag, records=records)],
            )
        ]
    )


async def _serve_split(sizes: list[int], cuts: list[int], listener: trio.SocketListener) -> None:
    """Answer len(sizes) Fetch requests in arrival order (request with session id i gets
    `sizes[i]` bytes of byte i), the whole answer stream sent in pieces of the lengths in `cuts`
    (cycled), with a scheduling point between pieces."""
    stream = await listener.accept()
    async with stream:
        buf = bytearray()
        answers = bytearray()
        for _ in range(len(sizes)):
            while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
                data = await stream.receive_some(65536)
                assert data, "client closed early"
                buf += data
            size = struct.unpack_from(">i", buf)[0]
            header, request = decode_request(bytes(buf[4 : 4 + size]))
            del buf[: 4 + size]
            tag = request.session_id  # which caller asked: under load they may send in any order
            body = encode_response(
                ApiKey.FETCH, FETCH_V, header.correlation_id, _fetch_response(sizes[tag], tag)
            )
            answers += struct.pack(">i", len(body)) + body
        pos = 0
        for n in range(10**6):
            if pos >= len(answers):
                break
            step = cuts[n % len(cuts)]
            await stream.send_all(bytes(answers[pos : pos + step]))
            pos += step
            await trio.sleep(0.0005)  # let the client read this piece alone


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sizes=st.lists(
        st.sampled_from([0, 10, 1000, OWN_BUFFER_BYTES - 200, OWN_BUFFER_BYTES, 300_000]),
        min_size=1,
        max_size=6,
    ),
    big_cut=st.integers(20_000, 200_000),
    small_cuts=st.lists(st.integers(1, 5000), max_size=4),
)
def test_pipelined_answers_split_anywhere_reach_their_callers(
    sizes: list[int], big_cut: int, small_cuts: list[int]
) -> None:
    cuts = [big_cut, *small_cuts]  # one large piece per cycle bounds the number of sends

    async def main() -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        client = PeerClient("127.0.0.1", port, client_id="frames-test")
        got: dict[int, FetchResponse] = {}

        async def ask(i: int) -> None:
            await trio.sleep(i * 0.005)  # spread the requests out (any order is answered right)
            got[i] = await client.request(
                ApiKey.FETCH, FETCH_V, FetchRequest(session_id=i), timeout_s=20
            )

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_serve_split, sizes, cuts, listeners[0])
                for i in range(len(sizes)):
                    nursery.start_soon(ask, i)
        await client.aclose()
        await listeners[0].aclose()
        for i, size in enumerate(sizes):
            part = got[i].responses[0].partitions[0]
            assert part.partition_index == i
            assert bytes(part.records or b"") == bytes([i % 256]) * size

    trio.run(main)


async def test_a_large_fetch_answer_is_the_batches_the_broker_holds() -> None:
    """End to end: several ~200 KiB batches fetched in one answer (received into its own
    buffer) and small Metadata answers pipelined with it; the records are the broker's bytes."""
    async with running_broker(None) as (broker, _server, port):
        info = await create_topic(port, "big", 1)
        client = PeerClient("127.0.0.1", port, client_id="frames-test")
        value = b"v" * 200_000
        for i in range(4):
            produce = ProduceRequest(
                acks=1,
                timeout_ms=5000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name="big",
                        partition_data=[
                            ProduceRequest.PartitionProduceData(
                                index=0, records=batch(value + b"%d" % i)
                            )
                        ],
                    )
                ],
            )
            answer = await client.request(ApiKey.PRODUCE, 9, produce, timeout_s=10)
            assert answer.responses[0].partition_responses[0].error_code == 0
        plog = broker.logs.get("big", 0)
        assert plog is not None
        held = b"".join(s.read() for s in plog.read(0, 10 << 20).slices)

        fetch = FetchRequest(
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=10 << 20,
            topics=[
                FetchRequest.FetchTopic(
                    topic_id=info.topic_id,
                    partitions=[
                        FetchRequest.FetchPartition(
                            partition=0, fetch_offset=0, partition_max_bytes=10 << 20
                        )
                    ],
                )
            ],
        )
        results: dict[str, object] = {}

        async def fetch_all() -> None:
            results["fetch"] = await client.request(ApiKey.FETCH, FETCH_V, fetch, timeout_s=10)

        async def metadata(i: int) -> None:
            request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="big")])
            results[f"md{i}"] = await client.request(ApiKey.METADATA, 9, request, timeout_s=10)

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fetch_all)
                for i in range(5):
                    nursery.start_soon(functools.partial(metadata, i))
        response = results["fetch"]
        assert isinstance(response, FetchResponse)
        records = response.responses[0].partitions[0].records
        assert records is not None
        assert len(records) > OWN_BUFFER_BYTES
        assert bytes(records) == held
        assert len(list(iter_batches(records))) == 4
        for i in range(5):
            assert results[f"md{i}"].topics[0].name == "big"  # type: ignore[attr-defined]
        await client.aclose()


def _records_of(body: memoryview) -> bytes:
    """The single partition's records of a raw FetchResponse v15 body (protocol.fetch_response's parser)."""
    from kafkapy.protocol.fetch_response import parse_fetch_response

    _, topics = parse_fetch_response(FETCH_V, body)
    records = topics[0][1][0].records
    return bytes(records) if records is not None else b""


async def _serve_each(sizes: list[int], listener: trio.SocketListener) -> None:
    """Answer each Fetch request as it comes (answer i: `sizes[i]` bytes of records, byte i),
    sent in two pieces so the client receives it in parts."""
    stream = await listener.accept()
    async with stream:
        buf = bytearray()
        for i in range(len(sizes)):
            while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
                data = await stream.receive_some(65536)
                assert data, "client closed early"
                buf += data
            size = struct.unpack_from(">i", buf)[0]
            header = decode_request_header(bytes(buf[4 : 4 + size]))
            del buf[: 4 + size]
            body = encode_response(
                ApiKey.FETCH, FETCH_V, header.correlation_id, _fetch_response(sizes[i], i)
            )
            answer = struct.pack(">i", len(body)) + body
            await stream.send_all(answer[:1000])
            await trio.sleep(0.0005)
            await stream.send_all(answer[1000:])


@settings(max_examples=10, deadline=None)
@given(
    sizes=st.lists(
        st.sampled_from([OWN_BUFFER_BYTES, 100_000, 300_000, 900_000]), min_size=2, max_size=5
    ),
    hold=st.booleans(),
)
def test_raw_large_answers_stay_intact_while_held_and_memory_is_reused_once_released(
    sizes: list[int], hold: bool
) -> None:
    """Raw answers (the replica fetcher's) are views of a receive buffer that is reused for the
    next large answer; an answer whose views are still held must never be overwritten by a
    later one, and once released its memory is taken again instead of a new zeroed buffer."""

    async def main() -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        client = PeerClient("127.0.0.1", port, client_id="frames-test")
        held: list[memoryview] = []
        owners: list[int] = []
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_serve_each, sizes, listeners[0])
                for i, size in enumerate(sizes):
                    body = await client.request(
                        ApiKey.FETCH, FETCH_V, FetchRequest(), timeout_s=20, raw=True
                    )
                    assert _records_of(body) == bytes([i % 256]) * size
                    owners.append(id(body.obj))
                    if hold:
                        held.append(body)
                    del body
        for i, body in enumerate(held):  # every held answer is still its own bytes
            assert _records_of(body) == bytes([i % 256]) * sizes[i]
        if not hold and max(sizes[1:]) <= sizes[0] + sizes[0] // 4:
            assert len(set(owners)) == 1  # released answers' memory was reused
        held.clear()
        await client.aclose()
        await listeners[0].aclose()

    trio.run(main)
